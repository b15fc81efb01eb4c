"""Issue 46's simulation, "what to annotate next": rounds of active learning with the gold
treebank as the annotator, four arms, learning curves of test LAS against annotated words.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/annotation_sim.py --root data/ud-release \\
        --out $RUNS/annotation_sim --treebanks en_ewt af_afribooms hu_szeged --seeds 1 2 3 --jobs 2

Per treebank and seed: ``--seed-trees`` random trees of the training file are the seed, the rest
of it is the pool (its trees are the oracle; ``parser-select`` ignores them). Round 0 trains on
the seed alone; each round r = 1..``--rounds`` of an arm selects ``--budget`` words from the
remaining pool with the previous round's model, plays the annotator from gold
(:func:`parser.data.partial_trees.fill_selected`) and trains on the seed plus everything
annotated so far (``data.partial_trees=true``). Arms (``--arms``):

- ``random``: random whole sentences (``strategy=random``, a word budget);
- ``entropy``: whole sentences by tree entropy per word (``strategy=entropy``);
- ``words``: single words by the marginal of their pre-filled head (``strategy=words``, at most
  ``--cap`` words of a sentence), the decoder's tree with the UD rules (``ud_rules=all``, what
  parser-select did by default when the simulation started): partial annotation;
- ``words_stratified``: ``words`` with the budget shared among sentence lengths as the pool has
  them (``stratify=length``; the most uncertain words of each length bin), after the seed-1 en_ewt
  result (``words`` lost on short sentences, most of that test set's words);
- ``words_no_rules``: ``words`` read from the parser's own tree (``ud_rules=none``: the maximum
  spanning tree, no UD validator rules), after the en_ewt result: with the rules, the pre-filled
  heads the rules force (marginal about 0) fill the budget on a large pool (53-70% punctuation);
- ``words_kept``: ``words_no_rules`` with the annotation so far put back in the pool it selects
  from (``keep_heads=given``, :func:`select_pool_file`), as a treebank builder's filled-in file
  goes back: an annotated word is never asked again and the others are scored by their
  marginals given the annotated arcs. Added when the first seeds' self-training arm, selecting
  without it, spent a tenth of its asks on words annotated before (hu_szeged: 4,569 annotated
  words after four rounds of 1,000 asks on 1,094 seed words, against 5,051 without
  self-training);
- ``words_selftrain``: ``words_kept``, each round trained as docs/annotation.md says: a
  likelihood teacher on the arm's annotation, then ``objective=confident_arcs`` with the
  remaining pool as ``data.unlabeled_file``. Round 0 too, taught by the shared round 0 (a likelihood run on the
  seed: the arm's first selection is its student's). A student taught by the model it starts
  from (the arm's last one, no teacher run: half the cost) was tried on hu_szeged and stopped:
  the confident arcs pin it where it starts, so it barely learned the new annotation (dev LAS
  flat at 59-60 over round 1 against the likelihood arm's 60.8 to 64.4; test LAS 59.10 and 61.70
  after rounds 1 and 2 against 63.89 and 67.92).

Choices:

- **Warm start.** Round 0 trains from scratch for ``--steps`` steps; every run of a later round
  (the self-training arm's teacher and student too) starts from the arm's last model
  (``model.init``: its weights and vocabularies, a fresh optimiser and schedule) for
  ``--round-steps`` steps, as the issue asks. The vocabularies are round 0's (the seed's): a word
  first seen in a later round's annotation reads as UNK, its characters still count.
- **Tags** (``--tags``). ``gold`` (the first sessions' runs): the release recipe's parser sizes
  (``experiment=release_cpu``) with gold UPOS input and no tag or layer heads
  (``model.upos_input=gold model.tag_loss_weight=0 model.layers=[]``): the pool's words come with
  gold tags, which a parser has at test time only in this simulation. ``predicted`` (what a
  treebank builder has): the recipe's own UPOS head, its tags as the parser's input, trained on
  the UPOS of the words each arm annotated and of the seed trees, nothing more
  (``data.annotated_columns=[UPOS]``: the simulated annotator gives an asked-for word's head,
  relation and UPOS; the pool's tags of the other words are never targets); still no XPOS, FEATS
  or LEMMA heads. Each setting keeps its own ledger.
- **A sentence is one unit of the pool.** Annotation accumulates per pool sentence (the union of
  the words asked for in every round: one training sentence, however often it was touched); a
  sentence leaves the pool once every word of it is annotated (sentence arms: once selected).
  The word arms may ask again for a word annotated before; ``annotated words`` counts distinct
  words with a gold head in the training file, seed trees included, so a wasted ask costs the
  arm. ``parser-select max_words=120`` (the recipe's training length cap).
- **Steps.** Each training run has ``--steps`` (round 0) or ``--round-steps`` steps (dev every
  eighth, the recipe's patience;
  confident arcs warm up over a quarter of them). Estimate, not a measurement: a step of 3,000
  words of the recipe's parser takes about 1 to 1.5 s on one quiet core (ewt_accuracy.md measured
  3.7 s per step of the same sizes at load average 3-14), so the default 400 steps, the dev and
  test evaluations and the start-up take about 10 minutes; a self-training student about 2.5
  times that (an unlabeled batch beside each labeled one, and the teacher's marginals), a
  selection about 1-2 minutes on the EWT pool (200,000 words at about 5,000 words/s with
  confidence, predict_speed.md), seconds on a small treebank.
- **Estimated cost of the default** (4 rounds, 3 seeds, 3 treebanks, the 4 arms before
  ``words_stratified`` and ``words_no_rules``, which add about as much as ``words`` each;
  rounds 1-4 at 200
  warm-started steps, about 5.5 minutes a run): per treebank and seed 1 round-0 run, 16 round
  runs (4 of them teachers), 5 students and 16 selections, about 3.3 core-hours; about 30
  core-hours in all. Without
  ``words_selftrain`` (the issue's claim is about ``words`` against ``random``): about 14
  core-hours. The report writes what the finished steps cost, measured.

Each step writes ``<step>.done.json`` (with its wall seconds) when it finishes; a rerun skips
finished steps, and a killed training run goes on from its last checkpoint
(``trainer.resume=last``), so the command goes on after a kill. A failed subprocess stops the
driver (the running ones finish their step first), naming its log. ``--dry-run`` prints the steps
still to run and runs nothing. When every step is done: ``<out>/annotation_sim.md`` (per
treebank: mean test LAS over seeds per arm and round, with the annotated words; the words each arm
needs to reach the random arm's final LAS, interpolated linearly between rounds; the paired
bootstrap of each arm against ``random`` at equal budget, seeds pooled per sentence),
``annotation_sim.png`` and ``annotation_sim.json``; ``--report`` writes them from the finished
runs alone. Every report first writes the finished rounds into the ledger (``--ledger``, by
default ``experiments/results/annotation_sim/``, committed; ``sim_ledger.py``) and reports the
ledger's rounds with them: run folders do not outlive a session on these machines (the first
seeds' were lost with one), so the seeds of several sessions add up there; the paired bootstrap
reads the per-sentence counts the ledger keeps. ``--extra`` overrides go to every training run, after the driver's (a smoke test:
``--steps 2 --extra model.lstm_hidden=16``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import sim_ledger

from parser.data.conllu_io import Sentence
from parser.data.conllu_stream import stream_conllu
from parser.data.partial_trees import (
    DEPREL,
    HEAD,
    POOL_POSITION,
    SELECTED_WORDS,
    comment,
    edit_words,
    fill_selected,
    selected_words,
)
from parser.data.treebanks import read_treebank_info
from parser.eval.report import sentence_counts
from parser.eval.significance import compare_counts
from parser.runtime.io_atomic import atomic_write

REPO = Path(__file__).resolve().parents[1]
LEDGERS = {  # the finished rounds (sim_ledger.py), per --tags
    "gold": REPO / "experiments" / "results" / "annotation_sim",
    "predicted": REPO / "experiments" / "results" / "annotation_sim_predicted",
}

ARMS = {  # the parser-select options of each arm (the budget, cap and seed are added per round)
    "random": ["strategy=random", "unit=words"],
    "entropy": ["strategy=entropy", "unit=words"],
    # the UD rules named: parser-select's default for strategy=words changed to none after the
    # first seed (words, words_stratified ran with the checkpoint's rules, all)
    "words": ["strategy=words", "unit=words", "ud_rules=all"],
    "words_stratified": ["strategy=words", "unit=words", "stratify=length", "ud_rules=all"],
    "words_no_rules": ["strategy=words", "unit=words", "ud_rules=none"],
    # the annotation so far back in the pool as given heads (select_pool_file)
    "words_kept": ["strategy=words", "unit=words", "ud_rules=none", "keep_heads=given"],
    "words_selftrain": ["strategy=words", "unit=words", "ud_rules=none", "keep_heads=given"],
}
CAPPED = ("words", "words_stratified", "words_no_rules", "words_kept", "words_selftrain")
SELF_TRAINED = ("words_selftrain",)
SELF_TRAINED_BASE = "words_kept"  # the same selection without self-training
SHARED = "likelihood"  # the ledger's name of the likelihood arms' shared round 0
MODELS = {  # the parser of each --tags setting
    "gold": ["experiment=release_cpu", "model.upos_input=gold", "model.tag_loss_weight=0",
             "model.layers=[]"],
    "predicted": ["experiment=release_cpu", "model.upos_input=predicted",
                  "model.tag_loss_weight=1.0", "model.layers=[]", "data.annotated_columns=[UPOS]"],
}
MAX_WORDS = 120  # release_cpu's data.max_length: a longer sentence would be annotated, not trained
DEPS = 8
# Options that change what a finished step means: a rerun with other values is refused.
FIXED = ("budget", "seed_trees", "cap", "steps", "round_steps", "pool_sentences", "extra", "tags")


@dataclass(frozen=True)
class Settings:
    root: Path
    out: Path
    rounds: int
    budget: int
    seed_trees: int
    cap: int
    steps: int
    pool_sentences: int | None
    extra: tuple[str, ...]
    round_steps: int = 0  # steps of a warm-started round (rounds 1..); 0: --steps
    tags: str = "gold"  # the parser's UPOS input (MODELS)


@dataclass(frozen=True)
class Step:
    """One unit of work: ``show`` is what ``--dry-run`` prints, ``work`` does it and returns what
    ``done`` records (beside its seconds)."""

    name: str
    done: Path
    show: str
    work: Callable[[], dict]


class StepFailed(RuntimeError):
    pass


# -- the data of a round -----------------------------------------------------------------------


def prepare(train: Path, base: Path, *, seed: int, seed_trees: int,
            pool_sentences: int | None) -> dict:
    """``base/seed.conllu``: ``seed_trees`` random trees of ``train``; ``base/pool.conllu``: the
    rest (a random ``pool_sentences`` of it, in file order, when given)."""
    sentences = list(stream_conllu(train, on_invalid="skip"))
    if len(sentences) <= seed_trees:
        raise ValueError(f"{train}: {len(sentences)} sentences, not more than --seed-trees "
                         f"{seed_trees}: nothing left for the pool")
    rng = random.Random(seed)
    chosen = set(rng.sample(range(len(sentences)), seed_trees))
    rest = [i for i in range(len(sentences)) if i not in chosen]
    if pool_sentences is not None and pool_sentences < len(rest):
        rest = sorted(rng.sample(rest, pool_sentences))
    base.mkdir(parents=True, exist_ok=True)
    _write_blocks(base / "seed.conllu", [sentences[i] for i in sorted(chosen)])
    _write_blocks(base / "pool.conllu", [sentences[i] for i in rest])
    _write_ids(base / "pool.conllu", list(range(len(rest))))
    return {"seed_trees": seed_trees, "seed_words": sum(len(sentences[i]) for i in chosen),
            "pool_sentences": len(rest), "pool_words": sum(len(sentences[i]) for i in rest)}


def merge_filled(annotation: dict[int, set[int]], filled: Path, ids: list[int]) -> tuple[int, int]:
    """Add the words of the annotator's file ``filled`` (those of ``# selected_words``, or every
    word, that have a head) to ``annotation`` (pool-0 sentence index -> word ids), the file's
    ``# pool_position`` read through ``ids`` (pool-0 index of each position of the round's pool);
    returns ``(words filled, words new)``."""
    filled_words = new = 0
    if not filled.is_file() or not filled.read_text(encoding="utf-8").strip():
        return 0, 0
    for sentence in stream_conllu(filled, require_trees=False, check_heads=False):
        position = int(comment(sentence, POOL_POSITION) or 0)
        if not 1 <= position <= len(ids):
            raise ValueError(f"{filled}:{sentence.line}: pool position {position} is not one of "
                             f"the round's pool (1..{len(ids)})")
        asked = selected_words(sentence) or range(1, len(sentence) + 1)
        got = {word for word in asked if sentence.heads[word - 1] >= 0}
        words = annotation.setdefault(ids[position - 1], set())
        filled_words, new = filled_words + len(got), new + len(got - words)
        words |= got
    return filled_words, new


def heads_of(sentence: Sentence, words: set[int]) -> list[str]:
    """The lines of ``sentence`` (a gold tree) with the HEAD and DEPREL of ``words`` only, the
    others ``_``; DEPS ``_`` (it names heads)."""
    values = {word: ({DEPS: "_"} if word in words else {HEAD: "_", DEPREL: "_", DEPS: "_"})
              for word in range(1, len(sentence) + 1)}
    return edit_words(sentence.lines, values)


def partial_block(sentence: Sentence, words: set[int]) -> str:
    """``sentence`` (a gold tree) as a training block with only ``words`` annotated: the other
    words' HEAD and DEPREL ``_`` and ``# selected_words``; DEPS ``_`` (it names heads); a
    complete set of words keeps the sentence as it is."""
    if len(words) == len(sentence):
        return "\n".join(sentence.lines) + "\n\n"
    lines = heads_of(sentence, words)
    first = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    chosen = ",".join(map(str, sorted(words)))
    return "\n".join([*lines[:first], f"# {SELECTED_WORDS} = {chosen}", *lines[first:]]) + "\n\n"


def write_round_files(base: Path, annotation: dict[int, set[int]], folder: Path) -> dict:
    """``folder/train.conllu`` (the seed trees, then each annotated pool sentence once) and
    ``folder/pool.conllu`` (the pool-0 sentences not annotated whole, with their ids)."""
    seed_text = (base / "seed.conllu").read_text(encoding="utf-8")
    remaining, pool_words = [], 0
    with atomic_write(folder / "train.conllu") as train, \
            atomic_write(folder / "pool.conllu") as pool:
        train.write(seed_text.rstrip("\n") + "\n\n")
        for index, sentence in enumerate(stream_conllu(base / "pool.conllu", on_invalid="skip")):
            words = annotation.get(index)
            if words:
                train.write(partial_block(sentence, words))
            if not words or len(words) < len(sentence):
                pool.write("\n".join(sentence.lines) + "\n\n")
                remaining.append(index)
                pool_words += len(sentence)
    _write_ids(folder / "pool.conllu", remaining)
    if not remaining:
        raise ValueError(f"{folder / 'pool.conllu'}: the pool is used up; fewer rounds or a "
                         "smaller --budget")
    return {"pool_sentences": len(remaining), "pool_words": pool_words}


def annotate(folder: Path, *, base: Path, pool: Path, previous: Path | None) -> dict:
    """Round ``folder``'s annotation: its selection filled from gold, merged with the ``previous``
    round's annotation, the training file and the remaining pool written."""
    filled = folder / "filled.conllu"
    selection = folder / "select.conllu"
    if selection.read_text(encoding="utf-8").strip():
        fill_selected(selection, pool, filled)
    else:
        filled.write_text("", encoding="utf-8")
    annotation = {} if previous is None else read_annotation(previous)
    asked, new = merge_filled(annotation, filled, _read_ids(pool))
    with atomic_write(folder / "annotation.json") as out:
        json.dump({str(k): sorted(v) for k, v in sorted(annotation.items())}, out)
    seed_words = json.loads((base / "prepare.done.json").read_text())["seed_words"]
    return {"asked_words": asked, "new_words": new, "sentences": len(annotation),
            "annotated_words": seed_words + sum(map(len, annotation.values())),
            **write_round_files(base, annotation, folder)}


def read_annotation(path: Path) -> dict[int, set[int]]:
    return {int(k): set(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


def _write_blocks(path: Path, sentences: list[Sentence]) -> None:
    with atomic_write(path) as out:
        out.writelines("\n".join(s.lines) + "\n\n" for s in sentences)


def _write_ids(pool: Path, ids: list[int]) -> None:
    pool.with_suffix(".ids.json").write_text(json.dumps(ids), encoding="utf-8")


def _read_ids(pool: Path) -> list[int]:
    return json.loads(pool.with_suffix(".ids.json").read_text(encoding="utf-8"))


# -- the steps ---------------------------------------------------------------------------------


def command_step(name: str, folder: Path, kind: str, argv: list[str], *,
                 run_dir: Path | None = None) -> Step:
    """A subprocess step (``python -m <argv>``) logged to ``folder/<kind>.log``; a training run
    (``run_dir``) that finished before is not run again, one killed resumes (``resume=last``)."""

    def work() -> dict:
        command = list(argv)
        if run_dir is not None:
            if (run_dir / "test.pred.metrics.json").is_file():
                return {"command": argv, "reused": True}
            if list((run_dir / "checkpoints").glob("step-*.pt")):
                command.append("trainer.resume=last")
        folder.mkdir(parents=True, exist_ok=True)
        log_path = folder / f"{kind}.log"
        print("$ python -m", " ".join(command), flush=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        with open(log_path, "a", encoding="utf-8") as log:
            done = subprocess.run([sys.executable, "-m", *command], check=False, stdout=log,
                                  stderr=subprocess.STDOUT, cwd=REPO, env=env)
        if done.returncode != 0:
            raise StepFailed(f"{name}: {command[0]} failed with exit status {done.returncode}; "
                             f"its log: {log_path} (run the command again to resume)")
        return {"command": command}

    return Step(name, folder / f"{kind}.done.json", "$ python -m " + " ".join(argv), work)


def train_overrides(code: str, s: Settings, *, seed: int, train_file: Path, run_dir: Path,
                    steps: int, more: tuple[str, ...] = ()) -> list[str]:
    """A ``parser-train`` run's module and overrides: the recipe's parser, the round's data,
    ``steps``, ``more`` (the arm's and the warm start), then ``--extra``."""
    return ["parser.cli.train", *MODELS[s.tags], f"data.root={s.root}", f"data.treebank={code}",
            f"data.train_file={train_file}", "data.partial_trees=true", f"trainer.seed={seed}",
            "trainer.num_threads=1", f"trainer.max_steps={steps}",
            f"trainer.eval_every={max(steps // 8, 1)}", "trainer.keep_last=1",
            "trainer.progress=false", *more, *s.extra, f"hydra.run.dir={run_dir}"]


def train_steps(name: str, folder: Path, code: str, s: Settings, *, seed: int, train_file: Path,
                unlabeled: Path | None = None, teacher: Path | None = None,
                init: Path | None = None) -> list[Step]:
    """A likelihood run in ``folder/run``; with ``unlabeled``, the confident-arc student there
    instead, taught by the checkpoint ``teacher`` or, without one, by a likelihood teacher on
    ``train_file`` trained first in ``folder/teacher``. ``init``: the last round's model, which
    every run of the round starts from (``model.init``, ``--round-steps`` steps)."""
    steps = (s.round_steps or s.steps) if init is not None else s.steps
    warm = (f"model.init={init}",) if init is not None else ()

    def run(kind: str, run_dir: Path, more: tuple[str, ...]) -> Step:
        return command_step(f"{name}/{kind}", folder, kind, train_overrides(
            code, s, seed=seed, train_file=train_file, run_dir=run_dir, steps=steps, more=more),
            run_dir=run_dir)

    if unlabeled is None:
        return [run("train", folder / "run", warm)]
    taught = []
    if teacher is None:
        taught.append(run("teacher", folder / "teacher", warm))
        teacher = folder / "teacher" / "checkpoints" / "best.pt"
    return [*taught, run("train", folder / "run", (
        f"data.unlabeled_file={unlabeled}", "objective=confident_arcs",
        f"objective.terms.confident_arcs.checkpoint={teacher}",
        f"objective.terms.confident_arcs.warmup={steps // 4}", *warm))]


def select_step(name: str, folder: Path, arm: str, s: Settings, *, model: Path, pool: Path,
                seed: int, round_: int, previous: Path | None) -> Step:
    """The round's ``parser-select``; an arm with ``keep_heads=given`` reads the round's pool
    with the ``previous`` annotation in it (:func:`select_pool_file`, written first)."""
    kept = "keep_heads=given" in ARMS[arm]
    read = folder / "select_pool.conllu" if kept else pool
    argv = ["parser.cli.select", f"checkpoint={model / 'checkpoints' / 'best.pt'}", f"pool={read}",
            f"output={folder / 'select.conllu'}", *ARMS[arm], f"budget={s.budget}",
            f"max_words={MAX_WORDS}"]
    if arm in CAPPED:
        argv.append(f"cap={s.cap}")
    if arm == "random":
        argv.append(f"seed={seed * 1000 + round_}")
    step = command_step(f"{name}/select", folder, "select", argv)
    if not kept:
        return step

    def work() -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        select_pool_file(pool, {} if previous is None else read_annotation(previous), read)
        return step.work()

    return replace(step, work=work)


def select_pool_file(pool: Path, annotation: dict[int, set[int]], path: Path) -> None:
    """``path``: the round's ``pool`` (gold trees, the oracle's) as an annotator's file put back
    in the pool: the heads of the words annotated so far (``annotation``, by pool-0 sentence)
    given, every other HEAD and DEPREL ``_``; DEPS ``_``. The same sentences in the same order
    (the selection's pool positions are the round pool's)."""
    ids = _read_ids(pool)
    with atomic_write(path) as out:
        for position, sentence in enumerate(stream_conllu(pool, on_invalid="skip")):
            out.write("\n".join(heads_of(sentence, annotation.get(ids[position], set())))
                      + "\n\n")


def chain(code: str, train: Path, seed: int, arm: str, s: Settings) -> list[Step]:
    """Every step of ``arm``'s rounds on ``code`` with ``seed``, in order (the seed split and,
    for the likelihood arms, round 0 are shared: the same names)."""
    base = s.out / code / f"s{seed}"
    steps = [Step(f"{code}/s{seed}/prepare", base / "prepare.done.json",
                  f"# prepare: {s.seed_trees} seed trees of {train} (seed {seed}) -> "
                  f"{base / 'seed.conllu'}, the rest -> {base / 'pool.conllu'}",
                  lambda: prepare(train, base, seed=seed, seed_trees=s.seed_trees,
                                  pool_sentences=s.pool_sentences))]
    pool, previous = base / "pool.conllu", None
    steps += train_steps(f"{code}/s{seed}/r0", base / "r0", code, s, seed=seed,
                         train_file=base / "seed.conllu")
    self_trained = arm in SELF_TRAINED
    if self_trained:  # round 0's student, taught by the shared round 0 (its vocabularies too)
        steps += train_steps(f"{code}/s{seed}/{arm}/r0", base / arm / "r0", code, s, seed=seed,
                             train_file=base / "seed.conllu", unlabeled=pool,
                             teacher=base / "r0" / "run" / "checkpoints" / "best.pt")
    model = (base / arm / "r0" if self_trained else base / "r0") / "run"
    for round_ in range(1, s.rounds + 1):
        folder = base / arm / f"r{round_}"
        name = f"{code}/s{seed}/{arm}/r{round_}"
        steps.append(select_step(name, folder, arm, s, model=model, pool=pool, seed=seed,
                                 round_=round_, previous=previous))
        steps.append(Step(f"{name}/annotate", folder / "annotate.done.json",
                          f"# fill_selected({folder / 'select.conllu'}, {pool}) -> "
                          f"{folder / 'train.conllu'}, {folder / 'pool.conllu'}",
                          _annotate_work(folder, base=base, pool=pool, previous=previous)))
        steps += train_steps(name, folder, code, s, seed=seed, train_file=folder / "train.conllu",
                             unlabeled=folder / "pool.conllu" if self_trained else None,
                             init=model / "checkpoints" / "best.pt")
        pool, previous, model = folder / "pool.conllu", folder / "annotation.json", folder / "run"
    return steps


def _annotate_work(folder: Path, *, base: Path, pool: Path, previous: Path | None):
    return lambda: annotate(folder, base=base, pool=pool, previous=previous)


def plan(s: Settings, treebanks: list[tuple[str, Path]], seeds: list[int],
         arms: list[str]) -> list[list[Step]]:
    """One chain per arm, treebank and seed, seeds first (parallel chains start on different
    seeds' shared steps)."""
    return [chain(code, train, seed, arm, s) for arm in arms for code, train in treebanks
            for seed in seeds]


def execute(step: Step) -> None:
    if step.done.is_file():
        return
    started = time.monotonic()
    record = step.work()
    record["seconds"] = round(time.monotonic() - started, 1)
    step.done.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(step.done) as out:
        json.dump(record, out, indent=1)


def run_chains(chains: list[list[Step]], *, jobs: int) -> None:
    """Each chain's steps in order, ``jobs`` chains at a time; a step shared by chains runs once
    (the others wait for it). The first failure stops every chain at its next step."""
    locks = {step.name: threading.Lock() for steps in chains for step in steps}
    failed = threading.Event()

    def work(steps: list[Step]) -> None:
        for step in steps:
            with locks[step.name]:
                if failed.is_set():  # checked once the lock is held: a shared step may have failed
                    return
                execute(step)

    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=jobs) as workers:
        for future in as_completed([workers.submit(work, steps) for steps in chains]):
            if future.exception() is not None:
                failed.set()
                errors.append(future.exception())
    if errors:
        raise errors[0]


def pending(chains: list[list[Step]]) -> list[Step]:
    """The steps not done, each once, in chain order."""
    seen, todo = set(), []
    for steps in chains:
        for step in steps:
            if step.name not in seen and not step.done.is_file():
                seen.add(step.name)
                todo.append(step)
    return todo


def fixed_settings(s: Settings) -> dict:
    """The values of :data:`FIXED`: what a finished step or a ledger's round was made with."""
    mine = {key: value for key, value in asdict(s).items() if key in FIXED}
    mine["extra"] = list(mine["extra"])
    return mine


# -- the report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """A finished round: its annotated ``words`` (seed trees included), test LAS, and its test
    prediction's sentence counts ``[S, 3]`` (words, heads right, heads and relations right)."""

    arm: str
    seed: int
    round: int
    words: int
    las: float
    counts: np.ndarray = field(repr=False, compare=False)


def finished_rounds(out: Path, code: str, gold: Path, *, seeds: list[int], arms: list[str],
                    rounds: int) -> list[dict]:
    """A ledger record (:mod:`sim_ledger`) of every finished round of ``code`` under ``out``
    (its test run scored, its annotation counted). The likelihood arms' shared round 0 is one
    record per seed, of the arm :data:`SHARED` (its folder ``s<seed>/r0``, the seed split's cost
    with it)."""
    records = []
    shared = [SHARED] if any(arm not in SELF_TRAINED for arm in arms) else []
    for arm in [*shared, *arms]:
        first = 1 if arm not in (SHARED, *SELF_TRAINED) else 0
        for seed in seeds:
            base = out / code / f"s{seed}"
            for round_ in range(first, 1 if arm == SHARED else rounds + 1):
                folder = base / "r0" if arm == SHARED else base / arm / f"r{round_}"
                metrics = folder / "run" / "test.pred.metrics.json"
                counted = folder / "annotate.done.json" if round_ else base / "prepare.done.json"
                if not (metrics.is_file() and counted.is_file()):
                    continue
                count = json.loads(counted.read_text(encoding="utf-8"))
                scores = json.loads(metrics.read_text(encoding="utf-8"))["official"]
                sentences = sentence_counts(gold, folder / "run" / "test.pred.conllu").numpy()
                done = [*folder.glob("*.done.json"), *([] if round_ else [counted])]
                records.append({
                    "arm": arm, "seed": seed, "round": round_,
                    "words": count.get("annotated_words", count.get("seed_words")),
                    "las": float(scores["LAS"]), "uas": float(scores["UAS"]),
                    **({"upos": float(scores["UPOS"])} if "UPOS" in scores else {}),
                    "folder": folder.relative_to(out / code).as_posix(),
                    "seconds": {path.name.split(".")[0]: json.loads(path.read_text()).get("seconds")
                                or 0.0 for path in sorted(done)},
                    "heads": sentences[:, 1].tolist(), "labels": sentences[:, 2].tolist()})
    return records


def to_points(records: list[dict], gold: Path, arms: list[str], *, where: str) -> list[Point]:
    """The points of ``arms`` (a :data:`SHARED` round 0 is every likelihood arm's)."""
    words = sentence_counts(gold, gold).numpy()[:, 0]
    return [Point(arm, r["seed"], r["round"], r["words"], r["las"],
                  sim_ledger.counts(r, words, where=where)) for r in records
            for arm in ([a for a in arms if a not in SELF_TRAINED] if r["arm"] == SHARED
                        else [r["arm"]])]


def mean_curve(points: list[Point], arm: str) -> list[tuple[int, float, float, int]]:
    """``(round, mean words, mean LAS, seeds)`` of ``arm``, by round."""
    rounds: dict[int, list[Point]] = {}
    for point in points:
        if point.arm == arm:
            rounds.setdefault(point.round, []).append(point)
    return [(r, sum(p.words for p in ps) / len(ps), sum(p.las for p in ps) / len(ps), len(ps))
            for r, ps in sorted(rounds.items())]


def words_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    """The annotated words at which the ``(words, LAS)`` curve first reaches ``target``, linear
    between its points; None when it never does.

    >>> words_to_reach([(100, 60.0), (200, 70.0), (300, 75.0)], 65.0)
    150.0
    >>> words_to_reach([(100, 60.0), (200, 70.0)], 60.0), words_to_reach([(100, 60.0)], 61.0)
    (100, None)
    """
    before = None
    for words, las in curve:
        if las >= target:
            if before is None:
                return words
            return before[0] + (target - before[1]) / (las - before[1]) * (words - before[0])
        before = (words, las)
    return None


def curve_table(curves: dict[str, list[tuple[int, float, float, int]]], *, seeds: int) -> str:
    """Markdown: one row per arm, one column per round: mean test LAS (mean annotated words).

    >>> print(curve_table({"random": [(0, 812.0, 61.234, 3), (1, 1790.0, 66.0, 2)]}, seeds=3))
    | arm | round 0 | round 1 |
    | --- | ---: | ---: |
    | random | 61.23 (812 words) | 66.00 (1,790 words; 2 seeds) |
    """
    rounds = sorted({r for curve in curves.values() for r, *_ in curve})
    lines = ["| arm | " + " | ".join(f"round {r}" for r in rounds) + " |",
             "| --- |" + " ---: |" * len(rounds)]
    for arm, curve in curves.items():
        cells = {r: f"{las:.2f} ({words:,.0f} words"
                 + (f"; {n} seed{'s' if n > 1 else ''})" if n < seeds else ")")
                 for r, words, las, n in curve}
        lines.append(f"| {arm} | " + " | ".join(cells.get(r, "") for r in rounds) + " |")
    return "\n".join(lines)


def upos_table(records: list[dict], arms: list[str]) -> list[str]:
    """Markdown: mean test UPOS by arm and round (the records that have it: a parser reading
    gold tags scores the gold column, 100), the likelihood arms' round 0 shared; none when no
    record has it.

    >>> rows = upos_table([{"arm": "likelihood", "round": 0, "upos": 70.0},
    ...                    {"arm": "random", "round": 1, "upos": 74.0},
    ...                    {"arm": "random", "round": 1, "upos": 76.0}], ["random"])
    >>> rows[-1]
    '| random | 70.00 | 75.00 |'
    """
    cells: dict[tuple[str, int], list[float]] = {}
    for r in records:
        if "upos" in r:
            for arm in (arms if r["arm"] == SHARED else [r["arm"]]):
                if arm in arms and (r["arm"] != SHARED or arm not in SELF_TRAINED):
                    cells.setdefault((arm, r["round"]), []).append(r["upos"])
    if not cells:
        return []
    rounds = sorted({round_ for _, round_ in cells})
    lines = ["| arm (test UPOS) | " + " | ".join(f"round {r}" for r in rounds) + " |",
             "| --- |" + " ---: |" * len(rounds)]
    for arm in arms:
        if any((arm, r) in cells for r in rounds):
            lines.append(f"| {arm} | " + " | ".join(
                f"{sum(cells[arm, r]) / len(cells[arm, r]):.2f}" if (arm, r) in cells else ""
                for r in rounds) + " |")
    return lines


def reach_rows(curves: dict[str, list[tuple[int, float, float, int]]],
               baseline: str = "random") -> tuple[list[str], dict[str, float | None]]:
    """Markdown rows of the words each arm needs to reach ``baseline``'s final mean LAS."""
    if not curves.get(baseline):
        return [], {}
    _, base_words, target, _ = curves[baseline][-1]
    header = (f"| arm | annotated words to reach {baseline}'s final LAS ({target:.2f}) | "
              f"share of {baseline}'s {base_words:,.0f} words |")
    lines = [header, "| --- | ---: | ---: |"]
    reached = {}
    for arm, curve in curves.items():
        words = reached[arm] = words_to_reach([(w, las) for _, w, las, _ in curve], target)
        lines.append(f"| {arm} | " + ("not reached | |" if words is None else
                                      f"{words:,.0f} | {words / base_words:.2f} |"))
    return lines, {**reached, "_target": target, "_baseline_words": base_words}


def significance_rows(points: list[Point], arms: list[str], rounds: int,
                      baseline: str = "random") -> tuple[list[str], dict]:
    """Each arm against ``baseline`` at every round (equal budget), paired bootstrap over test
    sentences with the seeds both finished pooled per sentence, beside each seed's own LAS
    difference (the pooled test ignores the spread between seeds: a difference whose sign
    changes from seed to seed is not the arm's): markdown rows, and the LAS
    :class:`~parser.eval.significance.Significance` by ``(arm, round)``."""
    header = (f"| arm | round | seeds | words (arm / {baseline}) | LAS (arm / {baseline}) | "
              "LAS difference [95% CI] | p (one-sided) | each seed's difference |")
    lines = [header, "| --- |" + " ---: |" * 7]
    by = {(p.arm, p.round, p.seed): p for p in points}
    results = {}
    for arm in (a for a in arms if a != baseline):
        for round_ in range(1, rounds + 1):
            seeds = sorted({p.seed for p in points if (arm, round_, p.seed) in by
                            and (baseline, round_, p.seed) in by})
            if not seeds:
                continue
            mine = [by[arm, round_, s] for s in seeds]
            theirs = [by[baseline, round_, s] for s in seeds]
            # each test sentence one unit, its counts summed over the seeds (compare_runs)
            las = results[arm, round_] = compare_counts(
                sum(p.counts for p in mine), sum(p.counts for p in theirs),
                method="bootstrap", samples=10_000, seed=1)["LAS"]
            words = [sum(p.words for p in arm_points) / len(seeds) for arm_points in (mine, theirs)]
            lines.append(f"| {arm} | {round_} | {len(seeds)} | {words[0]:,.0f} / {words[1]:,.0f} | "
                         f"{las.a:.2f} / {las.b:.2f} | {las.delta:+.2f} [{las.ci[0]:+.2f}, "
                         f"{las.ci[1]:+.2f}] | {las.p_value:.4f} | "
                         f"{seed_differences(mine, theirs)} |")
    return lines, results


def seed_differences(mine: list[Point], theirs: list[Point]) -> str:
    """Each seed's LAS difference, with how many of them are above zero.

    >>> a = [Point("w", s, 1, 10, las, None) for s, las in ((1, 70.0), (2, 71.0), (3, 69.0))]
    >>> b = [Point("r", s, 1, 10, 70.5, None) for s in (1, 2, 3)]
    >>> seed_differences(a, b)
    '-0.50, +0.50, -1.50 (1 of 3 above)'
    """
    deltas = [a.las - b.las for a, b in zip(mine, theirs)]
    return (", ".join(f"{d:+.2f}" for d in deltas)
            + f" ({sum(d > 0 for d in deltas)} of {len(deltas)} above)")


def claim(reached: dict, results: dict, *, rounds: int, arm: str = "words") -> str:
    """Issue 46's claim for ``arm``: the random arm's final LAS with at most half its words, and
    better at the final equal budget with one-sided p < 0.05."""
    words, final = reached.get(arm), results.get((arm, rounds))
    if "_target" not in reached or final is None:
        return f"Claim ({arm} against random): not all rounds finished."
    share = None if words is None else words / reached["_baseline_words"]
    half = "not reached" if share is None else f"{share:.2f} of its words"
    won = final.delta > 0 and final.p_value < 0.05
    return (f"Claim ({arm} against random): reaches random's final LAS with {half} (at most half: "
            f"{'yes' if share is not None and share <= 0.5 else 'no'}); at the final budget "
            f"{final.delta:+.2f} LAS, p = {final.p_value:.4f} (better, p < 0.05: "
            f"{'yes' if won else 'no'}).")


def step_seconds(records: dict[str, list[dict]]) -> dict[str, float]:
    """Seconds of the finished steps by kind (each step one core), every round folder once
    (a shared round 0 is a record of every arm)."""
    seconds: dict[str, float] = {}
    folders = {(code, r["seed"], r["folder"]): r["seconds"]
               for code, rs in records.items() for r in rs}
    for by_kind in folders.values():
        for kind, sec in by_kind.items():
            seconds[kind] = seconds.get(kind, 0.0) + sec
    return seconds


def plot(path: Path, curves: dict[str, dict[str, list[tuple[int, float, float, int]]]],
         points: dict[str, list[Point]]) -> None:
    """One panel per treebank: mean test LAS against annotated words per arm, seeds as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # one colour per arm in every panel, whichever arms a treebank ran
    every_arm = dict.fromkeys(arm for arms in curves.values() for arm in arms)
    colors = {arm: f"C{index}" for index, arm in enumerate(every_arm)}
    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
    for ax, (code, arms) in zip(axes[0], curves.items()):
        for arm, curve in arms.items():
            color = colors[arm]
            ax.plot([w for _, w, _, _ in curve], [las for _, _, las, _ in curve], "o-",
                    color=color, label=arm)
            mine = [p for p in points[code] if p.arm == arm]
            ax.scatter([p.words for p in mine], [p.las for p in mine], s=8, alpha=0.35, color=color)
        if arms.get("random"):
            ax.axhline(arms["random"][-1][2], color="grey", linestyle=":", linewidth=1)
        ax.set(title=code, xlabel="annotated words (seed trees included)", ylabel="test LAS")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def gather(out: Path, treebanks: list[tuple[str, Path]], *, seeds: list[int], arms: list[str],
           rounds: int, ledger: Path | None) -> dict[str, list[dict]]:
    """Per treebank, the records of the finished rounds under ``out`` and, with ``ledger``, of
    the ledger too (the run folders' records written into it first: a round in both is the run
    folder's, and a LAS that differs is printed), those of ``seeds``, ``arms`` and ``rounds``."""
    gathered = {}
    for code, gold in treebanks:
        records = finished_rounds(out, code, gold, seeds=seeds, arms=arms, rounds=rounds)
        if ledger is not None:
            path = ledger / f"{code}.jsonl"
            before = {sim_ledger.key(r): r["las"] for r in sim_ledger.read(path)}
            for r in records:
                if sim_ledger.key(r) in before and before[sim_ledger.key(r)] != r["las"]:
                    print(f"{path}: {sim_ledger.key(r)} was LAS {before[sim_ledger.key(r)]:.2f}, "
                          f"the run folder's is {r['las']:.2f} (kept)")
            records = sim_ledger.merge(path, records)
        gathered[code] = [r for r in records if r["arm"] in (*arms, SHARED)
                          and r["seed"] in seeds and r["round"] <= rounds]
    return gathered


def write_report(out: Path, treebanks: list[tuple[str, Path]], *, seeds: list[int],
                 arms: list[str], rounds: int, budget: int, command: str,
                 ledger: Path | None = None) -> None:
    """``annotation_sim.md``, ``.json`` and ``.png`` in ``out``, of the finished rounds under
    ``out`` and in ``ledger`` (:func:`gather`)."""
    records = gather(out, treebanks, seeds=seeds, arms=arms, rounds=rounds, ledger=ledger)
    seconds = step_seconds(records)
    text = ["# Issue 46: what to annotate next, simulated", "", f"Made by: `{command}`", "",
            f"Machine: {platform.platform()}, {os.cpu_count()} cores, one thread per step.", "",
            f"Budget {budget:,} words per round, {rounds} round(s), seeds {seeds}; test LAS is the "
            "official CoNLL 2018 LAS of each round's best checkpoint; annotated words are the "
            "words with a gold head in the round's training file, seed trees included; means "
            "over seeds. Finished steps took "
            + ", ".join(f"{kind} {sec / 3600:.2f} h" for kind, sec in sorted(seconds.items()))
            + f" ({sum(seconds.values()) / 3600:.1f} core-hours in all).", ""]
    record, all_curves, all_points = {"seconds": seconds, "treebanks": {}}, {}, {}
    for code, gold in treebanks:
        points = to_points(records[code], gold, arms, where=str(ledger or out))
        # an arm not run on this treebank has only the shared round 0: no row, no claim
        curves = {arm: mean_curve(points, arm) for arm in arms}
        curves = {arm: curve for arm, curve in curves.items() if any(r > 0 for r, *_ in curve)}
        reach_lines, reached = reach_rows(curves)
        rows, results = significance_rows(points, arms, rounds)
        upos_lines = upos_table(records[code], [arm for arm in arms if arm in curves])
        text += [f"## {code}", "", curve_table(curves, seeds=len(seeds)), "",
                 *upos_lines, *([""] if upos_lines else []), *reach_lines, "",
                 *rows, "", *(claim(reached, results, rounds=rounds, arm=arm)
                              for arm in curves if arm in CAPPED), ""]
        if {SELF_TRAINED_BASE, *SELF_TRAINED} <= set(arms):
            # what self-training on the unannotated words adds to the same selection strategy
            self_rows, compared = significance_rows(points, list(SELF_TRAINED), rounds,
                                                    baseline=SELF_TRAINED_BASE)
            text += [*self_rows, ""] if compared else []
        all_curves[code], all_points[code] = curves, points
        record["treebanks"][code] = {"points": [{k: v for k, v in asdict(p).items() if k != "counts"}
                                                for p in points],
                                     "curves": curves, "words_to_reach": reached}
    out.mkdir(parents=True, exist_ok=True)  # a report of the ledger alone: no run folders here
    (out / "annotation_sim.md").write_text("\n".join(text), encoding="utf-8")
    (out / "annotation_sim.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    if any(p for ps in all_points.values() for p in ps):
        plot(out / "annotation_sim.png", all_curves, all_points)
    print("\n".join(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the UD data root (either layout)")
    parser.add_argument("--out", type=Path, required=True, help="run folders, outside the repo")
    parser.add_argument("--treebanks", nargs="+", required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--arms", nargs="+", choices=sorted(ARMS), default=list(ARMS))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--budget", type=int, default=1000, help="words selected per round")
    parser.add_argument("--seed-trees", type=int, default=50)
    parser.add_argument("--cap", type=int, default=3, help="words of one sentence per round "
                        "(word arms)")
    parser.add_argument("--steps", type=int, default=400, help="steps of round 0's training runs")
    parser.add_argument("--round-steps", type=int, default=200,
                        help="steps of a later round's runs, warm-started from the last round's model")
    parser.add_argument("--pool-sentences", type=int, default=None,
                        help="a random subset of the pool (default: the whole training file)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="chains (arm, treebank, seed) run at once, one core each")
    parser.add_argument("--extra", nargs="*", default=[], help="overrides for every training run")
    parser.add_argument("--dry-run", action="store_true", help="print the steps left; run nothing")
    parser.add_argument("--report", action="store_true", help="only the report, of finished runs")
    parser.add_argument("--tags", choices=sorted(MODELS), default="gold",
                        help="the parser's UPOS: gold input, or its own head's (module docstring)")
    parser.add_argument("--ledger", type=Path, default=None,
                        help="the finished rounds kept across sessions (sim_ledger.py; default: "
                        "the --tags setting's in experiments/results/); 'none': the run folders alone")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if out.is_relative_to(REPO):
        raise SystemExit(f"--out {out}: inside the repository; give a folder outside it")
    if min(args.rounds, args.budget, args.seed_trees, args.cap, args.steps, args.jobs) < 1:
        raise SystemExit("--rounds, --budget, --seed-trees, --cap, --steps, --jobs: at least 1")
    s = Settings(args.root.resolve(), out, args.rounds, args.budget, args.seed_trees, args.cap,
                 args.steps, args.pool_sentences, tuple(args.extra), args.round_steps, args.tags)
    infos = [read_treebank_info(s.root, name) for name in args.treebanks]
    ledger = (None if str(args.ledger) == "none" else
              (args.ledger or LEDGERS[args.tags]).resolve())
    sim_ledger.check_settings(s.out / "settings.json", fixed_settings(s),
                              write=not (args.dry_run or args.report), instead="another --out")
    if ledger is not None:  # checked before hours of runs, not at their report
        sim_ledger.check_settings(ledger / "settings.json", fixed_settings(s),
                                  write=not args.dry_run,
                                  instead="another --ledger (none: the run folders alone)")
    chains = plan(s, [(info.code, info.files["train"]) for info in infos], args.seeds, args.arms)
    if args.dry_run:
        todo = pending(chains)
        for step in todo:
            print(step.show)
        print(f"# {len(todo)} steps to run" if todo else "# nothing to run: every step is done")
        return 0
    if not args.report:
        try:
            run_chains(chains, jobs=args.jobs)
        except StepFailed as error:
            raise SystemExit(str(error)) from None
    command = " ".join(["python", *sys.argv] if argv is None else
                       ["python experiments/annotation_sim.py", *argv])
    write_report(s.out, [(info.code, info.files["test"]) for info in infos], seeds=args.seeds,
                 arms=args.arms, rounds=s.rounds, budget=s.budget, command=command,
                 ledger=ledger)
    return 0


if __name__ == "__main__":
    sys.exit(main())
