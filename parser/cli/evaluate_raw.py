"""``parser-evaluate pipeline=<file> treebank=... split=...`` (or ``gold=...``): the whole pipeline
from raw text, scored by the official CoNLL 2018 script (``udtools``' udeval aligns the system's
tokens with the gold ones on the characters).

The raw text is the gold file's own: its paragraphs (``# newdoc`` / ``# newpar``; a file with
neither is one paragraph) with tokens and sentences joined by spaces unless ``SpaceAfter=No``
(:func:`parser.tokenize.write_raw_text`). Writes ``<output>/<name>.txt``, ``<name>.raw.pred.conllu``
and ``<name>.raw.metrics.json``; prints the F1 of every row of the official table (Tokens,
Sentences, Words, UPOS, XPOS, UFeats, AllTags, Lemmas, UAS, LAS, CLAS, MLAS, BLEX).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from parser.data.paths import resolve_ud_root, treebank_file
from parser.eval.official import METRICS, official_evaluation
from parser.pipeline import Pipeline
from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import input_file, output_dir
from parser.tokenize import write_raw_text

__all__ = ["RAW_METRICS", "evaluate_raw_text", "run_raw_evaluation"]

RAW_METRICS = METRICS  # every row: a pipeline fills every column of a CoNLL-U line


def evaluate_raw_text(pipeline: Pipeline, gold_path: str | Path, out_dir: str | Path, *,
                      name: str, metrics: Sequence[str] = RAW_METRICS) -> dict:
    """Parse the raw text of ``gold_path`` with ``pipeline``; the official F1 of each row of
    ``metrics`` (:data:`RAW_METRICS`, or any of :data:`parser.eval.official.METRICS`; 0..100),
    the files written and the seconds taken."""
    unknown = [row for row in metrics if row not in METRICS]
    if unknown:
        raise ValueError(f"metrics={list(metrics)}: {unknown} are not rows of the official table "
                         f"({', '.join(METRICS)})")
    out_dir = Path(out_dir)
    text_path = out_dir / f"{name}.txt"
    pred_path = out_dir / f"{name}.raw.pred.conllu"
    paragraphs = write_raw_text(gold_path, text_path)
    started = time.time()
    sentences = pipeline.parse_file(text_path, pred_path)
    if sentences.failed:  # written unparsed: the official script cannot score them
        raise ValueError(f"{pred_path}: {sentences.failed} of {sentences} sentences were not "
                         "parsed ('# parse_error'; the warnings name them), so it is not scored")
    seconds = time.time() - started
    scores = official_evaluation(gold_path, pred_path)
    return {"gold": str(gold_path), "text": str(text_path), "pred": str(pred_path),
            "paragraphs": paragraphs, "sentences": sentences, "seconds": round(seconds, 1),
            "f1": {row: round(scores[row].f1, 2) for row in metrics}}


def run_raw_evaluation(args: dict) -> str:
    """``parser-evaluate pipeline=...``: the report as text (and its JSON beside the parse)."""
    pipeline_path = input_file(args["pipeline"], option="pipeline")
    if args["gold"]:
        gold_path = input_file(args["gold"], option="gold")
        name = gold_path.stem
    elif args["treebank"]:
        gold_path = treebank_file(resolve_ud_root(args["root"]), args["treebank"], args["split"])
        name = f"{args['treebank']}-{args['split']}"
    else:
        raise ValueError("pipeline= needs treebank=... (and split=) or gold=...")
    target = Path(args["output"]).expanduser() if args["output"] else pipeline_path.parent / "eval"
    out_dir = output_dir(target, option="output", shown=args["output"] or target)
    pipeline = Pipeline.load(pipeline_path, device=args["device"],
                             batch_size=int(args["tokens_per_batch"]))
    report = evaluate_raw_text(pipeline, gold_path, out_dir, name=name)
    metrics = Path(args["metrics"]) if args["metrics"] not in (None, "beside") else \
        out_dir / f"{name}.raw.metrics.json"
    with atomic_write(metrics) as handle:
        handle.write(json.dumps(report, indent=2) + "\n")
    row = "  ".join(f"{key} {value:.2f}" for key, value in report["f1"].items())
    return f"raw text of {gold_path} -> {report['pred']}\nF1: {row}\nmetrics: {metrics}"
