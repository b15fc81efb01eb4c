"""UDPipe 1 (the CoNLL 2018 shared task's baseline) on every treebank of a UD release: the UDPipe
rows of ``experiments/results/ud_release.md``.

For each treebank with a train file and text, ``ufal.udpipe`` trains its tokenizer, tagger and
parser in one call with UDPipe's default options (the dev file, where there is one, as UDPipe's
heldout data, as ``udpipe --train --heldout`` does), then the test file is scored by the official
CoNLL 2018 script twice: from its raw text (the same text ``parser-evaluate pipeline=`` reads,
:func:`parser.tokenize.write_raw_text`) and from its gold tokens (UDPipe tags and parses them).
Each treebank's scores go to ``<out>/<code>.json`` as soon as they exist, so a killed sweep goes
on with the treebanks not finished.

    pip install ufal.udpipe          # an experiment's dependency, never the package's
    PYTHONPATH=. python experiments/udpipe_release.py --root data/ud-release --out $RUNS/udpipe
    PYTHONPATH=. python experiments/udpipe_release.py --root data/ud-release --out $RUNS/udpipe \\
        --treebanks hu_szeged ta_ttb
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from udpipe_tokenizer import read_sentences  # experiments/: the scripts' folder is on sys.path
from ufal import udpipe

from parser.data.paths import available_treebanks
from parser.data.treebanks import read_treebank_info, training_refusal
from parser.eval.official import METRICS, official_evaluation
from parser.tokenize import write_raw_text

ROWS = METRICS  # every row of the official table: tags, features, lemmas, MLAS and BLEX too


def train_model(train: Path, dev: Path | None, model_path: Path) -> float:
    """UDPipe's tokenizer, tagger and parser trained with default options; returns seconds."""
    started = time.time()
    error = udpipe.ProcessingError()
    heldout = read_sentences(udpipe, dev, error) if dev else udpipe.Sentences()
    model = udpipe.Trainer.train("morphodita_parsito", read_sentences(udpipe, train, error), heldout,
                                 udpipe.Trainer.DEFAULT, udpipe.Trainer.DEFAULT,
                                 udpipe.Trainer.DEFAULT, error)
    if error.occurred():
        raise SystemExit(f"{train}: udpipe training failed: {error.message}")
    model_path.write_bytes(model.encode("latin-1") if isinstance(model, str) else model)
    return time.time() - started


def run(model: udpipe.Model, source: str, text: str, output: Path) -> None:
    """``source`` is ``tokenize`` (raw text) or ``conllu`` (gold tokens): tag and parse it."""
    pipeline = udpipe.Pipeline(model, source, udpipe.Pipeline.DEFAULT, udpipe.Pipeline.DEFAULT,
                               "conllu")
    error = udpipe.ProcessingError()
    result = pipeline.process(text, error)
    if error.occurred():
        raise SystemExit(f"udpipe failed on {output}: {error.message}")
    output.write_text(result, encoding="utf-8")


def f1(gold: Path, pred: Path, rows: tuple[str, ...]) -> dict[str, float]:
    scores = official_evaluation(gold, pred)
    return {row: round(scores[row].f1, 2) for row in rows}


def treebank_scores(files: dict[str, Path], work: Path) -> dict:
    model_path = work / "model.udpipe"
    seconds = train_model(files["train"], files.get("dev"), model_path)
    model = udpipe.Model.load(str(model_path))
    test = files["test"]
    text_path, raw_pred, gold_pred = work / "test.txt", work / "raw.conllu", work / "gold.conllu"
    write_raw_text(test, text_path)
    run(model, "tokenize", text_path.read_text(encoding="utf-8"), raw_pred)
    run(model, "conllu", test.read_text(encoding="utf-8"), gold_pred)
    return {"train_seconds": round(seconds), "raw": f1(test, raw_pred, ROWS),
            "gold_tokens": f1(test, gold_pred, ROWS[3:])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the release folder")
    parser.add_argument("--out", type=Path, required=True, help="models and <code>.json go here")
    parser.add_argument("--treebanks", nargs="*", help="codes (default: every treebank)")
    args = parser.parse_args(argv)
    for name in args.treebanks or available_treebanks(args.root):
        info = read_treebank_info(args.root, name)
        result_path = args.out / f"{info.code}.json"
        if result_path.exists():
            print(f"{info.code}: done before", flush=True)
            continue
        refusal = training_refusal(info, root=args.root)
        if refusal:
            result = {"code": info.code, "skipped": refusal}
        else:
            work = args.out / info.code
            work.mkdir(parents=True, exist_ok=True)
            result = {"code": info.code, **treebank_scores(info.files, work)}
        result_path.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
