"""``parser-evaluate`` (or ``python -m parser.cli.evaluate``): official scores of a prediction
file, or of a trained checkpoint on a treebank split.

    parser-evaluate gold=en_ewt-ud-test.conllu pred=test.pred.conllu
    parser-evaluate gold=en_ewt-ud-test.conllu pred=test.pred.conllu metrics=scores.json
    parser-evaluate checkpoint=outputs/<run>/checkpoints/best.pt treebank=en_ewt split=test
    parser-evaluate checkpoint=outputs/<run>/checkpoints/best.pt treebank=en_ewt split=test \\
        tagger=outputs/tagger/en_ewt/<time>/checkpoints/best.pt

The first form scores an existing file against its gold file and prints the scores; it writes
nothing unless asked: ``metrics=<file>`` writes the metrics JSON there, ``metrics=beside`` writes
``<pred>.metrics.json`` next to the predictions.

The second form parses the split with the checkpoint (``root=`` or ``$UD_ROOT`` locate the
treebank; ``gold=`` may name the file instead), writes ``<output>/<treebank>-<split>.pred.conllu``
and its ``.metrics.json`` (``metrics=`` to choose another path), and scores it. ``output``
defaults to ``<run>/eval/``, a folder beside the run's ``checkpoints/`` (for a checkpoint outside
a ``checkpoints/`` folder: ``eval/`` beside the checkpoint); nothing is ever written into a
``checkpoints/`` folder. Both forms print UAS/LAS (official CoNLL 2018 script, via ``udtools``)
with breakdowns. A sentence the checkpoint cannot parse (more than ``max_words=`` words,
default 1000, or a failed parse) is written as read with ``# parse_error``, as ``parser-predict``
does; its gold heads would then be scored, so the command stops with an error naming the count
(status 2) instead of printing scores.

A metrics file that the run's final evaluation wrote (``<run>/{dev,test}.pred.metrics.json``) is
never replaced: choose another ``metrics=`` path.

The third form is the realistic pipeline: the gold UPOS are replaced by those of the tagger
before parsing (written to ``<treebank>-<split>.tagged.pred.conllu``), and the UPOS accuracy of
those tags (the official UPOS score) is printed beside UAS/LAS.

``projective=true`` (or ``false``) decodes with the best projective tree (Eisner) or the maximum
spanning tree whatever the checkpoint's ``model.projective`` says, and ``attach_to_units=PUNCT,CCONJ``
(or ``none``) re-attaches those words by the UD punct/cc rule or not, whatever its
``model.attach_to_units`` says (ablations of the decoder).

``compare=<file>`` tests whether two prediction files of the same gold file differ significantly:

    parser-evaluate gold=en_ewt-ud-test.conllu pred=a.conllu compare=b.conllu
    parser-evaluate gold=en_ewt-ud-test.conllu pred=a.conllu compare=b.conllu test=randomization \\
        samples=10000 seed=1 metrics=a-vs-b.json

It prints both files' UAS/LAS, the differences with their 95% bootstrap interval and the p-value
of ``test=bootstrap`` (paired bootstrap over sentences, one-sided; the default) or
``test=randomization`` (approximate randomisation, two-sided); ``metrics=<file>`` writes them as
JSON (:mod:`parser.eval.significance`).

``pipeline=<file> treebank=... split=...`` (or ``gold=``) parses the split's raw text through a
pipeline file (tokenizer, tagger, parser) and prints the official Tokens, Sentences, Words, UPOS,
UAS and LAS F1 (:mod:`parser.cli.evaluate_raw`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from parser.cli.evaluate_raw import run_raw_evaluation
from parser.cli.predict import decoder_overrides
from parser.cli.shell import run_key_value_cli
from parser.data.conllu_io import read_conllu
from parser.data.paths import resolve_ud_root, treebank_file
from parser.eval.report import (
    EVAL_FOLDER,
    file_report,
    format_report,
    metrics_path_for,
    split_prediction_stem,
    write_metrics_json,
)
from parser.eval.significance import METHODS, comparison_report, format_comparison
from parser.inference import predict_file
from parser.inference.options import PredictOptions
from parser.runtime.user_files import input_file, output_dir, output_file
from parser.train.final import format_scores

__all__ = ["OPTIONS", "compare", "default_output_dir", "evaluate", "main"]

BESIDE = "beside"  # metrics=beside: the metrics JSON next to pred='s file

OPTIONS = {
    "gold": None,
    "pred": None,
    "checkpoint": None,
    "treebank": None,
    "split": "test",
    "root": None,
    "output": None,
    "metrics": None,  # a path, or "beside" (next to pred=); default: none for pred=, beside the parse for checkpoint=
    "device": "auto",
    "tokens_per_batch": "5000",
    "tagger": None,  # parse with this tagger's UPOS instead of the gold ones
    "projective": None,  # true | false: decoder of checkpoint= (default: the checkpoint's model.projective)
    "attach_to_units": None,  # PUNCT,CCONJ | none: UD punct/cc re-attachment (default: the checkpoint's)
    "ud_rules": None,  # all | none | rule names (parser.models.ud_rules; default: the checkpoint's)
    "label_grid": None,  # false: labels scored on the decoded arcs only (default: the checkpoint's model.label_grid)
    "max_words": "1000",  # checkpoint=: the longest sentence parsed (a longer one fails the command)
    "pipeline": None,  # a pipeline file: parse the split's raw text (parser.cli.evaluate_raw)
    "compare": None,  # a second prediction file of gold=: is pred= vs compare= significant?
    "test": None,  # bootstrap | randomization (with compare=; default bootstrap)
    "samples": None,  # resamples of the test (with compare=; default 10000)
    "seed": None,  # of the test's random numbers (with compare=; default 1)
}
_COMPARE_DEFAULTS = {"test": "bootstrap", "samples": "10000", "seed": "1"}


def evaluate(args: dict) -> tuple[dict, Path | None]:
    """The report (``parser.eval.report.file_report``) and where its JSON was written (None when
    scoring a ``pred=`` file without ``metrics=``)."""
    if args["checkpoint"]:
        if args["pred"]:
            raise ValueError("give pred= (score a file) or checkpoint= (parse, then score), not both")
        pred_path, gold_path = _prediction_paths(args)
    else:
        if args["tagger"]:
            raise ValueError("tagger= tags the input of a checkpoint=...; scoring gold= pred= "
                             "files parses nothing")
        if not args["gold"] or not args["pred"]:
            raise ValueError("give gold=... pred=..., or checkpoint=... treebank=... split=...")
        gold_path = input_file(args["gold"], option="gold")
        pred_path = input_file(args["pred"], option="pred")
    metrics_path = _metrics_path(args["metrics"], pred_path, parsed=bool(args["checkpoint"]))
    if metrics_path is not None:
        metrics_path = output_file(metrics_path, option="metrics", inputs=(gold_path, pred_path))
        _refuse_checkpoints_folder(metrics_path, option="metrics")
        _refuse_final_metrics(metrics_path)
    if args["checkpoint"]:  # every path checked before parsing
        options = PredictOptions(
            format="conllu", device=args["device"], tokens_per_batch=int(args["tokens_per_batch"]),
            retag=bool(args["tagger"]), max_words=_integer(args["max_words"], option="max_words"),
            **decoder_overrides(args))
        parsed = predict_file(Path(args["checkpoint"]).expanduser(), gold_path, pred_path, options,
                              tagger=args["tagger"])
        if parsed.failed:  # written as read: their gold heads would be scored as predictions
            raise ValueError(
                f"checkpoint={args['checkpoint']}: {parsed.failed} of {parsed} sentences of "
                f"{gold_path} were not parsed ('# parse_error' in {pred_path}; the warnings name "
                "them), so the file is not scored; over-long sentences: raise max_words=")
    _check_files(gold_path, pred_path)
    report = file_report(gold_path, pred_path)
    if args["tagger"]:
        report["tagger"] = str(args["tagger"])
    if metrics_path is not None:
        write_metrics_json(report, metrics_path)
    return report, metrics_path


def compare(args: dict) -> tuple[dict, Path | None]:
    """``compare=``: the `comparison_report` of ``pred=`` against ``compare=`` and where its JSON
    was written (None without ``metrics=``)."""
    for option in ("checkpoint", "pipeline", "tagger"):
        if args[option]:
            raise ValueError(f"compare= compares two prediction files (pred=, compare=); not with {option}=")
    if not args["gold"] or not args["pred"]:
        raise ValueError("compare= needs gold=... pred=... compare=...")
    gold_path = input_file(args["gold"], option="gold")
    pred_path = input_file(args["pred"], option="pred")
    compare_path = input_file(args["compare"], option="compare")
    options = {key: args[key] or default for key, default in _COMPARE_DEFAULTS.items()}
    if options["test"] not in METHODS:
        raise ValueError(f"test={options['test']}: expected one of {', '.join(METHODS)}")
    samples, seed = _integer(options["samples"], option="samples"), _integer(options["seed"], option="seed")
    metrics_path = None
    if args["metrics"] == BESIDE:
        raise ValueError("metrics=beside: with compare= give metrics=<file>")
    if args["metrics"]:
        metrics_path = output_file(args["metrics"], option="metrics",
                                   inputs=(gold_path, pred_path, compare_path))
        _refuse_final_metrics(metrics_path)
    _check_files(gold_path, pred_path, compare_path)
    report = comparison_report(gold_path, pred_path, compare_path, method=options["test"],
                               samples=samples, seed=seed)
    if metrics_path is not None:
        write_metrics_json(report, metrics_path)
    return report, metrics_path


def _integer(value: str, *, option: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{option}={value}: expected an integer") from None


def _check_files(*paths: Path) -> None:
    """Malformed files fail with the reader's file:line message, before the official script
    (which would only report mismatched sentence counts or its first complaint)."""
    for path in paths:
        read_conllu(path, on_invalid="raise", require_trees=True)


def _metrics_path(option: str | None, pred_path: Path, *, parsed: bool) -> Path | None:
    """``metrics=``: a path; ``beside``: next to the predictions; unset: beside the predictions
    this command parsed (``checkpoint=``), nowhere for a ``pred=`` file it was given."""
    if option == BESIDE or (option is None and parsed):
        return metrics_path_for(pred_path)
    return Path(option).expanduser() if option else None


def _refuse_checkpoints_folder(path: Path, *, option: str) -> None:
    if path.resolve().name == "checkpoints" or path.resolve().parent.name == "checkpoints":
        raise ValueError(f"{option}={path}: a checkpoints/ folder holds checkpoints only; "
                         "choose another folder (default: <run>/eval/)")


def _refuse_final_metrics(path: Path) -> None:
    """Refuse to replace the metrics of a run's final evaluation (the trainer marks them with
    their ``split``); a file this command wrote before may be replaced."""
    if not path.is_file():
        return
    try:
        existing = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        existing = None
    if isinstance(existing, dict) and "split" in existing:
        raise ValueError(
            f"metrics={path}: holds the {existing['split']} metrics of the run's final evaluation; "
            "give another metrics=<file> path"
        )


def default_output_dir(checkpoint: Path) -> Path:
    """``<run>/eval`` for ``<run>/checkpoints/<file>.pt``, else ``eval/`` beside the checkpoint:
    never the ``checkpoints/`` folder itself (the trainer prunes and resumes from it)."""
    folder = checkpoint.resolve().parent
    return (folder.parent if folder.name == "checkpoints" else folder) / EVAL_FOLDER


def _prediction_paths(args: dict) -> tuple[Path, Path]:
    """``(predictions to write, gold file)`` of ``checkpoint=`` mode; the folder is created."""
    checkpoint = Path(args["checkpoint"]).expanduser()
    if args["gold"]:
        gold_path = input_file(args["gold"], option="gold")
        name = gold_path.stem
    else:
        if not args["treebank"]:
            raise ValueError("checkpoint= needs treebank=... (and split=) or gold=...")
        gold_path = treebank_file(resolve_ud_root(args["root"]), args["treebank"], args["split"])
        name = split_prediction_stem(args["treebank"], args["split"])
    target = Path(args["output"]).expanduser() if args["output"] else default_output_dir(checkpoint)
    _refuse_checkpoints_folder(target, option="output")
    out_dir = output_dir(target, option="output", shown=args["output"] or target)
    tagger = args["tagger"]
    # Predicted-UPOS parses get their own file: they never replace a gold-UPOS run's predictions.
    return out_dir / f"{name}{'.tagged' if tagger else ''}.pred.conllu", gold_path


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(
        argv, prog="parser-evaluate", doc=__doc__, defaults=OPTIONS, command=_run
    )


def _run(args: dict) -> str:
    if args["compare"]:
        report, metrics_path = compare(args)
        return f"{format_comparison(report)}\nmetrics: {metrics_path or 'not written (metrics=<file>)'}"
    if any(args[key] for key in _COMPARE_DEFAULTS):
        raise ValueError(f"{', '.join(f'{k}=' for k in _COMPARE_DEFAULTS)} go with compare=<file>")
    if args["pipeline"]:
        return run_raw_evaluation(args)
    report, metrics_path = evaluate(args)
    scores = format_scores("official" if report.get("official") else "scores", report)
    if args["tagger"] and report.get("official"):
        scores += f"  UPOS {report['official']['UPOS']:.2f} (predicted by {args['tagger']})"
    where = metrics_path or "not written (metrics=<file> or metrics=beside)"
    return f"{format_report(report)}\n{scores}\nmetrics: {where}"


if __name__ == "__main__":
    sys.exit(main())
