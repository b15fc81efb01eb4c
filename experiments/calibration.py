"""Calibration of a trained parser's confidence, before and after temperature scaling.

    taskset -c 0 python experiments/calibration.py --checkpoint <best.pt> \\
        --calibrated-out <calibrated.pt>

End to end: fits the temperatures on the treebank's dev split (``parser-calibrate``), writes the
calibrated checkpoint to ``--calibrated-out`` (or measures an existing one: ``--calibrated``),
parses the measured splits (default test and dev) with both checkpoints as ``parser-predict
confidence=true`` does, and writes ``experiments/results/calibration.md`` (reliability tables,
ECE before/after, temperatures, selective-parsing tables) and
``experiments/results/calibration_ewt.png`` (reliability diagram and selective-parsing curves).
``--treebank`` takes any treebank the model was trained for; a model is only measured on its own
language, and another treebank's figures go to their own files (``calibration_<treebank>.md`` and
``.png``). A treebank distributed without a train file (de_gsd) is trained and measured on a split
of its dev file: ``--root`` names the data root ``experiments/holdout_split.py`` wrote, and
``--about`` says in the results file how the model was trained:

    python experiments/holdout_split.py --treebank de_gsd --held-out-fraction 0.2 --seed 1 \\
        --out <held-out data root>
    taskset -c 0 python experiments/calibration.py --checkpoint <best.pt> \\
        --calibrated-out <calibrated.pt> --treebank de_gsd --root <held-out data root> \\
        --about "<how the model was trained>"
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from common import RESULTS, machine, markdown_table

from parser.cli.calibrate import calibrate, format_fit
from parser.data.conllu_io import read_conllu
from parser.data.paths import resolve_ud_root, treebank_file
from parser.eval.calibration import (
    expected_calibration_error,
    reliability_table,
    selective_curve,
)
from parser.inference import load_parser
from parser.inference.calibration import Outcomes, measure
from parser.runtime.checkpoint import load_checkpoint

PERCENT = 100.0


def main() -> None:
    args = _arguments()
    root = resolve_ud_root(args.root)
    started = time.time()
    fit_text = None
    calibrated = args.calibrated
    if calibrated is None:
        if args.calibrated_out is None:
            raise SystemExit("give --calibrated-out (where to write the calibrated checkpoint) or --calibrated")
        dev = treebank_file(root, args.treebank, args.fit_split)
        fit = calibrate(args.checkpoint, dev, args.calibrated_out, device="cpu",
                        tokens_per_batch=args.tokens_per_batch)
        fit_text = format_fit(fit, gold=dev, output=Path(args.calibrated_out).name)
        calibrated = args.calibrated_out
    state = load_checkpoint(calibrated)
    entry = state.get("calibration") or {}
    trainer = state.get("trainer") or {}
    models = {"before": load_parser(args.checkpoint)[:2], "after": load_parser(calibrated)[:2]}
    measured: dict[str, dict[str, Outcomes]] = {}
    for split in args.splits:
        sentences = read_conllu(treebank_file(root, args.treebank, split)).sentences
        measured[split] = {name: measure(model, sentences, vocabs, tokens_per_batch=args.tokens_per_batch)
                           for name, (model, vocabs) in models.items()}
        before, after = measured[split]["before"], measured[split]["after"]
        if before.head_correct != after.head_correct:
            raise SystemExit(f"{split}: the calibrated checkpoint decoded other heads; temperature "
                             "scaling must leave the trees unchanged")
    body = _report(args, measured, entry=entry, trainer=trainer, fit_text=fit_text,
                   minutes=(time.time() - started) / 60)
    out = Path(args.output) if args.output else RESULTS / _results_name(args.treebank)
    out.write_text(body, encoding="utf-8")
    figure = out.with_name(_figure_name(args.treebank))
    _plot(measured[args.splits[0]], figure, title=f"{args.treebank} {args.splits[0]}")
    print(body)
    print(f"wrote {out} and {figure}")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the trained parser (best.pt)")
    parser.add_argument("--calibrated-out", help="write the calibrated checkpoint here (fitted on --fit-split)")
    parser.add_argument("--calibrated", help="an existing calibrated checkpoint (no fit)")
    parser.add_argument("--treebank", default="en_ewt", help="a treebank the model was trained for")
    parser.add_argument("--fit-split", default="dev")
    parser.add_argument("--splits", nargs="+", default=["test", "dev"], help="splits measured; the first is plotted")
    parser.add_argument("--root", default=None, help="UD root (default $UD_ROOT or data/ud)")
    parser.add_argument("--tokens-per-batch", type=int, default=5000)
    parser.add_argument("--output", default=None,
                        help="results file (default experiments/results/calibration.md for en_ewt, "
                        "calibration_<treebank>.md for another); the figure is written beside it")
    parser.add_argument("--about", default=None,
                        help="a sentence for the results file: how the model and its data were made")
    return parser.parse_args()


def _results_name(treebank: str) -> str:
    return "calibration.md" if treebank == "en_ewt" else f"calibration_{treebank}.md"


def _figure_name(treebank: str) -> str:
    return f"calibration_{'ewt' if treebank == 'en_ewt' else treebank}.png"


def _ece(probs: list[float], correct: list[bool], keep: list[bool] | None = None) -> float:
    if keep is not None:
        probs = [p for p, k in zip(probs, keep) if k]
        correct = [c for c, k in zip(correct, keep) if k]
    return PERCENT * expected_calibration_error(reliability_table(probs, correct))


def _no_punct(flags: list[bool]) -> list[bool]:
    return [not flag for flag in flags]


def _accuracy(correct: list[bool]) -> float:
    return PERCENT * sum(correct) / len(correct) if correct else math.nan


def _f(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _report(args, measured, *, entry: dict, trainer: dict, fit_text: str | None, minutes: float) -> str:
    first = args.splits[0]
    root = " --root <held-out data root>" if args.root else ""
    about = " --about \"<how the model was trained>\"" if args.about else ""
    lines = [
        "# Calibration of the tree CRF's confidence" + ("" if args.treebank == "en_ewt" else f", {args.treebank}"),
        "",
        (f"Command: `taskset -c 0 python experiments/calibration.py --checkpoint <best.pt> "
        f"--calibrated-out <calibrated.pt> --treebank {args.treebank}{root}{about}`"),
        "",
        f"Machine: {machine()}; {minutes:.1f} minutes.",
        "",
        (f"Model: the checkpoint at training step {trainer.get('step', '?')} (its best dev step "
        f"{trainer.get('best_step', '?')}, dev selection score {_f(float(trainer.get('best_score', math.nan)))}: LAS for a model with relations). "
        f"Treebank {args.treebank}: temperatures fitted on {args.fit_split}, measured on "
        f"{', '.join(args.splits)} ({args.fit_split} is in-sample for the fit). The model is measured "
        "only on the treebank it was trained for; each treebank has its own results file "
        "(en_ewt: `calibration.md`, another: `calibration_<treebank>.md`, e.g. `calibration_de_gsd.md`)."),
        "",
        *([args.about, ""] if args.about else []),
        ("Definitions. HeadProb: the tree CRF's marginal of the head written (`parser-predict "
        "confidence=true`), right when it is the gold head. DeprelProb: the probability of the "
        "relation written given its arc, on the words whose head is right, right when the relation "
        "equals the gold one exactly (subtype included). Every word counts, punctuation included "
        "(the project's UAS convention, CoNLL 2018); ECE without punctuation is given beside. "
        "ECE: 10 equal-width bins, |accuracy - mean confidence| weighted by the bins' word counts, "
        "in points (x100). Selective parsing: UAS of the x% most confident words (by HeadProb), "
        "and of the words of the x% most confident sentences, ranked by mean HeadProb (= expected "
        "UAS of the sentence, expected_correct / length; the tree probability would rank short "
        "sentences first). Temperature: T divides the CRF's arc scores (after the UD rules), fitted "
        "by the gold-tree NLL on dev; the label temperature divides the relation classifier's "
        "scores, fitted by the gold-relation NLL on gold arcs (`parser.inference.calibration`). "
        "Decoded trees are identical before and after (checked)."),
        "",
        "## Temperatures",
        "",
        markdown_table(["", "temperature", "dev NLL before", "dev NLL after"], [
            ["arcs (gold tree NLL per sentence)", _f(entry.get("arc_temperature", 1.0), 4),
             _f(entry.get("tree_nll_before", math.nan), 4), _f(entry.get("tree_nll_after", math.nan), 4)],
            ["relations (gold relation NLL per word)", _f(entry.get("label_temperature", 1.0), 4),
             _f(entry.get("label_nll_before", math.nan), 4), _f(entry.get("label_nll_after", math.nan), 4)],
        ]),
    ]
    if fit_text:
        lines += ["", "```", fit_text, "```"]
    rows = []
    for split, pair in measured.items():
        for name in ("before", "after"):
            o = pair[name]
            rows.append([split, name, _f(_accuracy(o.head_correct)), _f(_ece(o.head_probs, o.head_correct)),
                         _f(_ece(o.head_probs, o.head_correct, _no_punct(o.punct))),
                         _f(_ece(o.label_probs, o.label_correct)),
                         _f(_ece(o.label_probs, o.label_correct, _no_punct(o.label_punct)))])
    lines += ["", "## Expected calibration error (points)", "",
              markdown_table(["split", "temperature", "UAS", "ECE HeadProb", "ECE HeadProb, no punct",
                              "ECE DeprelProb", "ECE DeprelProb, no punct"], rows)]
    for kind, probs, correct in (("HeadProb", "head_probs", "head_correct"),
                                 ("DeprelProb (words with the right head)", "label_probs", "label_correct")):
        tables = {name: reliability_table(getattr(o, probs), getattr(o, correct))
                  for name, o in measured[first].items()}
        rows = [[f"{b.low:.1f}-{b.high:.1f}"] + [cell for name in ("before", "after") for cell in (
            tables[name][i].count, _f(PERCENT * tables[name][i].confidence, 1),
            _f(PERCENT * tables[name][i].accuracy, 1))] for i, b in enumerate(tables["before"])]
        lines += ["", f"## Reliability table, {kind}, {args.treebank} {first}", "",
                  markdown_table(["bin", "words before", "mean conf. before", "accuracy before",
                                  "words after", "mean conf. after", "accuracy after"], rows)]
    for split, pair in measured.items():
        curves = {name: (selective_curve(o.head_probs, [int(c) for c in o.head_correct]),
                         selective_curve(o.sentence_scores, o.sentence_correct, o.sentence_words))
                  for name, o in pair.items()}
        rows = [[point.percent, _f(PERCENT * curves["before"][0][i].accuracy),
                 _f(PERCENT * curves["after"][0][i].accuracy), curves["after"][1][i].kept,
                 _f(PERCENT * curves["before"][1][i].accuracy), _f(PERCENT * curves["after"][1][i].accuracy)]
                for i, point in enumerate(curves["after"][0])]
        half = curves["after"][1][4]
        lines += ["", f"## Selective parsing, {args.treebank} {split}", "",
                  markdown_table(["most confident %", "UAS words before", "UAS words after",
                                  "sentences kept", "UAS sentences before", "UAS sentences after"], rows),
                  "", (f"The 50% most confident sentences ({half.kept}, {half.units} words): UAS "
                  f"{_f(PERCENT * half.accuracy)} (calibrated ranking) against {_f(_accuracy(pair['after'].head_correct))} "
                  "on all sentences.")]
    lines += ["", (f"Figure: `{_figure_name(args.treebank)}` (reliability diagram of "
              f"HeadProb on {first}, before and after; selective-parsing curves)."), ""]
    return "\n".join(lines)


def _plot(pair: dict[str, Outcomes], path: Path, *, title: str) -> None:
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    left.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect calibration")
    for name, marker in (("before", "o"), ("after", "s")):
        o = pair[name]
        bins = [b for b in reliability_table(o.head_probs, o.head_correct) if b.count]
        ece = _ece(o.head_probs, o.head_correct)
        left.plot([b.confidence for b in bins], [b.accuracy for b in bins], marker=marker,
                  label=f"{'T = 1' if name == 'before' else 'calibrated'} (ECE {ece:.2f} points)")
    left.set(xlabel="HeadProb (mean of the bin)", ylabel="attachment accuracy of the bin",
             title=f"Reliability, {title}", xlim=(0, 1), ylim=(0, 1))
    left.legend(loc="upper left", fontsize=8)
    o = pair["after"]
    words = selective_curve(o.head_probs, [int(c) for c in o.head_correct])
    sentences = selective_curve(o.sentence_scores, o.sentence_correct, o.sentence_words)
    right.plot([p.percent for p in words], [PERCENT * p.accuracy for p in words], marker="o",
               label="words, by HeadProb")
    right.plot([p.percent for p in sentences], [PERCENT * p.accuracy for p in sentences], marker="s",
               label="sentences, by mean HeadProb")
    right.set(xlabel="most confident % kept", ylabel="UAS", title=f"Selective parsing, {title}")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
