"""``parser-evaluate`` / ``python -m parser.eval``: official scores of a prediction file, or of a
trained checkpoint on a treebank split.

    parser-evaluate gold=en_ewt-ud-test.conllu pred=test.pred.conllu
    parser-evaluate checkpoint=outputs/.../checkpoints/best.pt treebank=en_ewt split=test
    parser-evaluate checkpoint=outputs/.../checkpoints/best.pt treebank=en_ewt split=test \\
        tagger=outputs/tagger/en_ewt/<time>/checkpoints/best.pt

The first form scores an existing file against its gold file. The second parses the split with
the checkpoint (``root=`` or ``$UD_ROOT`` locate the treebank; ``gold=`` may name the file
instead), writes ``<output>/<treebank>-<split>.pred.conllu`` (``output`` defaults to the
checkpoint's folder) and scores it. Both print UAS/LAS (official CoNLL 2018 script, via
``udtools``) with breakdowns, and write the metrics JSON beside the predictions (``metrics=`` to
choose the path).

The third form is the realistic pipeline: the gold UPOS are replaced by those of the tagger
before parsing (written to ``<treebank>-<split>.tagged.pred.conllu``), and the UPOS accuracy of
those tags (the official UPOS score) is printed beside UAS/LAS.

``projective=true`` (or ``false``) decodes with the best projective tree (Eisner) or the maximum
spanning tree whatever the checkpoint's ``model.projective`` says, and ``attach_to_units=PUNCT,CCONJ``
(or ``none``) re-attaches those words by the UD punct/cc rule or not, whatever its
``model.attach_to_units`` says (ablations of the decoder).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

OPTIONS = {
    "gold": None,
    "pred": None,
    "checkpoint": None,
    "treebank": None,
    "split": "test",
    "root": None,
    "output": None,
    "metrics": None,
    "device": "auto",
    "tokens_per_batch": "5000",
    "tagger": None,  # parse with this tagger's UPOS instead of the gold ones
    "projective": None,  # true | false: decoder of checkpoint= (default: the checkpoint's model.projective)
    "attach_to_units": None,  # PUNCT,CCONJ | none: UD punct/cc re-attachment (default: the checkpoint's)
}


def evaluate(args: dict) -> tuple[dict, Path]:
    """The report (``parser.eval.report.file_report``) and where its JSON was written."""
    from parser.data.conllu_io import read_conllu
    from parser.eval.report import file_report, metrics_path_for, write_metrics_json
    from parser.train.user_files import input_file, output_file

    if args["checkpoint"]:
        if args["pred"]:
            raise ValueError("give pred= (score a file) or checkpoint= (parse, then score), not both")
        pred_path, gold_path = _predict(args)
    else:
        if args["tagger"]:
            raise ValueError("tagger= tags the input of a checkpoint=...; scoring gold= pred= "
                             "files parses nothing")
        if not args["gold"] or not args["pred"]:
            raise ValueError("give gold=... pred=..., or checkpoint=... treebank=... split=...")
        gold_path = input_file(args["gold"], option="gold")
        pred_path = input_file(args["pred"], option="pred")
    metrics_path = Path(args["metrics"]) if args["metrics"] else metrics_path_for(pred_path)
    metrics_path = output_file(metrics_path, option="metrics", inputs=(gold_path, pred_path))
    # Malformed files fail with the reader's file:line message, before the official script
    # (which would only report mismatched sentence counts or its first complaint).
    for path in (gold_path, pred_path):
        read_conllu(path, on_invalid="raise", require_trees=True)
    report = file_report(gold_path, pred_path)
    if args["tagger"]:
        report["tagger"] = str(args["tagger"])
    write_metrics_json(report, metrics_path)
    return report, metrics_path


def _predict(args: dict) -> tuple[Path, Path]:
    from parser.data.paths import resolve_ud_root, treebank_file
    from parser.predict import decoder_overrides, predict_file
    from parser.train.user_files import input_file, output_dir

    checkpoint = Path(args["checkpoint"]).expanduser()
    if args["gold"]:
        gold_path = input_file(args["gold"], option="gold")
        name = gold_path.stem
    else:
        if not args["treebank"]:
            raise ValueError("checkpoint= needs treebank=... (and split=) or gold=...")
        gold_path = treebank_file(resolve_ud_root(args["root"]), args["treebank"], args["split"])
        name = f"{args['treebank']}-{args['split']}"
    out_dir = output_dir(args["output"], option="output") if args["output"] else checkpoint.resolve().parent
    tagger = args["tagger"]
    # Predicted-UPOS parses get their own file: they never replace a gold-UPOS run's predictions.
    pred_path = out_dir / f"{name}{'.tagged' if tagger else ''}.pred.conllu"
    predict_file(checkpoint, gold_path, pred_path, format="conllu", device=args["device"],
                 tokens_per_batch=int(args["tokens_per_batch"]), tagger=tagger,
                 retag=bool(tagger), **decoder_overrides(args))
    return pred_path, gold_path


def main(argv: Sequence[str] | None = None) -> int:
    from parser.train.cli_args import run_key_value_cli

    return run_key_value_cli(
        argv, prog="parser-evaluate", doc=__doc__, defaults=OPTIONS, command=_run
    )


def _run(args: dict) -> str:
    from parser.eval.report import format_report
    from parser.train.final import format_scores

    report, metrics_path = evaluate(args)
    scores = format_scores("official" if report.get("official") else "scores", report)
    if args["tagger"] and report.get("official"):
        scores += f"  UPOS {report['official']['UPOS']:.2f} (predicted by {args['tagger']})"
    return f"{format_report(report)}\n{scores}\nmetrics: {metrics_path}"


if __name__ == "__main__":
    sys.exit(main())
