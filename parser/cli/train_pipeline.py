"""``parser-train-pipeline treebank=<code> output=<folder>`` (or ``python -m
parser.cli.train_pipeline``): from a treebank to a raw-text pipeline file in one command, then its
test scores from raw text and from gold tokens with the official CoNLL 2018 script.

    parser-train-pipeline treebank=hu_szeged root=data/ud-release output=runs/hu_szeged
    parser-train-pipeline treebank=UD_Tamil-TTB root=data/ud-release recipe=release_gpu output=runs/ta

Stages, each a run of the one training loop in its own folder under ``output``:
``tokenizer/`` (the tokenizer and sentence splitter), ``parser/`` (a parser that tags its own
words: joint UPOS, its tags as input), then ``<code>.pipeline`` (+ model card) and ``eval/``
(the test file's raw text parsed by the pipeline). ``result.json`` holds every figure: the
official CoNLL 2018 F1 of every row (Tokens ... BLEX) from raw text, those from UPOS on from gold
tokens.

``recipe``: a file of ``configs/recipe/`` by name (``release_cpu``, the default: the default
experiment's lean parser on a small treebank's budget; ``release_cpu_fed``, the same with a
second BiLSTM layer and its own tags fed back; ``release_cpu_grid``, the 2 x 200 grid parser of
the release tables; or ``release_gpu``) or a path; it lists the overrides of each stage
(:func:`load_recipe`). The
treebank's files decide the rest (:mod:`parser.data.treebanks`): a treebank without text or
without a training file is refused; without a dev file the parser carves one from train
(``data.dev_fraction``) and the tokenizer keeps its last step.

Run again after a kill, the command goes on where it stopped: a finished stage is not run again
(its ``done.json``), an unfinished one resumes from its last checkpoint (``trainer.resume=last``).
The output folder is this command's alone while it runs (a second one is refused).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, ListConfig, OmegaConf

from parser.cli.evaluate_raw import evaluate_raw_text
from parser.cli.pipeline import build_pipeline
from parser.cli.shell import run_key_value_cli
from parser.config import check_known_keys, config_dir, register_configs
from parser.data.conllu_stream import stream_conllu
from parser.data.paths import resolve_ud_root
from parser.data.treebanks import TreebankInfo, read_treebank_info
from parser.eval.official import METRICS
from parser.pipeline import Pipeline
from parser.runtime.checkpoint import CheckpointManager
from parser.runtime.io_atomic import atomic_write
from parser.runtime.run_lock import RunLock
from parser.runtime.user_files import output_dir
from parser.tokenize.config import register_tokenizer_configs, tokenizer_config_dir
from parser.train.run import run_training
from parser.train.task import TaskBuilder
from parser.train.tasks.parser_task import ParserTask
from parser.train.tasks.tokenizer_task import TokenizerTask

__all__ = ["OPTIONS", "STAGES", "load_recipe", "main", "train_pipeline"]

OPTIONS = {"treebank": None, "root": None, "recipe": "release_cpu", "output": None}
STAGES = ("tokenizer", "parser")
# result.json: "raw" holds every official row (Tokens ... BLEX), "gold_tokens" those from UPOS on
# (the parser stage's own scoring of the test file; null where that stage recorded none)
GOLD_TOKEN_METRICS = METRICS[METRICS.index("UPOS"):]


def load_recipe(recipe: str) -> dict[str, list[str]]:
    """``{"tokenizer": [overrides], "parser": [overrides]}`` from ``configs/recipe/<recipe>.yaml``
    or the YAML file ``recipe``."""
    named = config_dir() / "recipe" / f"{recipe}.yaml"
    path = named if named.is_file() else Path(recipe).expanduser()
    if not path.is_file():
        known = sorted(p.stem for p in (config_dir() / "recipe").glob("*.yaml"))
        raise ValueError(f"recipe={recipe}: no such file, nor a recipe of configs/recipe/ "
                         f"({', '.join(known)})")
    loaded = OmegaConf.load(path)
    if not isinstance(loaded, DictConfig) or set(loaded) != set(STAGES) or not all(
            isinstance(loaded[s], ListConfig) and all(isinstance(o, str) for o in loaded[s])
            for s in STAGES):
        raise ValueError(f"{path}: a recipe is two lists of override strings, 'tokenizer' and "
                         "'parser'")
    return {stage: list(loaded[stage]) for stage in STAGES}


def _compose(stage: str, overrides: list[str]) -> DictConfig:
    """The stage's config tree (the tokenizer's or the parser's) composed with ``overrides``."""
    directory, name = (tokenizer_config_dir(), "tokenizer") if stage == "tokenizer" else \
        (config_dir(), "config")
    with initialize_config_dir(config_dir=str(directory), version_base="1.3"):
        cfg = compose(name, overrides=overrides)
    check_known_keys(cfg)
    return cfg


def _stage(stage: str, overrides: list[str], *, folder: Path, task: TaskBuilder) -> dict:
    """Run one stage into ``folder`` (or read what its finished run wrote): the checkpoint it
    passes on, its final scores and its training seconds."""
    done = folder / "done.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    started = time.monotonic()
    if CheckpointManager(folder / "checkpoints", keep_last=1).step_files():  # only read
        overrides = [*overrides, "trainer.resume=last"]
    results = run_training(_compose(stage, overrides), run_dir=folder, task=task)
    record = {"checkpoint": str(results["checkpoint"]), "seconds": round(time.monotonic() - started),
              "test": results.get("test"), "dev": results.get("dev")}
    with atomic_write(done) as handle:
        handle.write(json.dumps(record, indent=2, default=str) + "\n")
    return record


def _overrides(info: TreebankInfo, root: Path, recipe: dict[str, list[str]]) -> dict[str, list[str]]:
    data = [f"data.treebank={info.code}", f"data.root={root}"]
    tokenizer_dev = [] if "dev" in info.files else ["data.dev_split=null"]  # last step kept
    return {"tokenizer": [*data, *tokenizer_dev, *recipe["tokenizer"]],
            "parser": [*data, *recipe["parser"]]}


def train_pipeline(*, treebank: str, root: str | Path | None, recipe: str,
                   output: str | Path) -> dict:
    """Train, build and score the pipeline of ``treebank`` into ``output``; returns (and writes
    to ``<output>/result.json``) its figures."""
    root = resolve_ud_root(root).resolve()  # the stages record it: resumable from any folder
    info = read_treebank_info(root, treebank)
    info.require_text()
    info.require_train(root=root)
    overrides = _overrides(info, root, load_recipe(recipe))
    out = output_dir(output, option="output")
    with RunLock(out):
        register_tokenizer_configs()
        register_configs()
        tokenizer = _stage("tokenizer", overrides["tokenizer"], folder=out / "tokenizer",
                           task=TokenizerTask)
        parsed = _stage("parser", overrides["parser"], folder=out / "parser", task=ParserTask)
        pipeline_path = out / f"{info.code}.pipeline"
        build_pipeline(tokenizer=tokenizer["checkpoint"], parser=parsed["checkpoint"], tagger=None,
                       output=pipeline_path)
        raw = None
        if "test" in info.files:
            (out / "eval").mkdir(exist_ok=True)
            raw = evaluate_raw_text(Pipeline.load(pipeline_path), info.files["test"], out / "eval",
                                    name=f"{info.code}-test", metrics=METRICS)
        gold = ((parsed.get("test") or {}).get("official") or {})
        result = {
            "treebank": info.code, "language": info.language, "recipe": recipe,
            "train_sentences": sum(1 for _ in stream_conllu(info.files["train"], report=False)),
            "raw": None if raw is None else raw["f1"],
            "gold_tokens": {row: gold.get(row) for row in GOLD_TOKEN_METRICS},
            "train_seconds": tokenizer["seconds"] + parsed["seconds"],
            "pipeline": str(pipeline_path),
        }
        with atomic_write(out / "result.json") as handle:
            handle.write(json.dumps(result, indent=2) + "\n")
    return result


def _run(args: dict) -> str:
    result = train_pipeline(treebank=args["treebank"], root=args["root"], recipe=args["recipe"],
                            output=args["output"])
    raw = result["raw"] or {}
    row = "  ".join(f"{key} {value:.2f}" for key, value in raw.items())
    gold = result["gold_tokens"]
    return (f"{result['treebank']}: raw text F1: {row}\ngold tokens: UAS {gold['UAS']:.2f}  "
            f"LAS {gold['LAS']:.2f}\npipeline: {result['pipeline']}")


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(argv, prog="parser-train-pipeline", doc=__doc__, defaults=OPTIONS,
                             required=("treebank", "output"), command=_run)


if __name__ == "__main__":
    sys.exit(main())
