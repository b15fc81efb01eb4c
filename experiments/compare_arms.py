"""Arms of an ablation against a baseline, seeds pooled per sentence: a markdown table of each
arm's test UAS/LAS per seed and the mean difference to the baseline with its 95% interval and
p-value (`parser.eval.significance.compare_runs`, paired bootstrap over sentences).

    python experiments/compare_arms.py --gold data/ud/en_ewt/en_ewt-ud-test.conllu \\
        --baseline likelihood=<run s1>,<run s2> --arm entropy_annealed=<run s1>,<run s2> \\
        [--arm ...] [--out table.md]

Each run is a `parser-train` run directory (its `test.pred.conllu` is read) or a prediction
file; an arm lists its runs in the baseline's seed order. An arm with fewer seeds is compared
with the baseline's first seeds only (the table says which).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from parser.eval.official import official_scores
from parser.eval.significance import compare_runs


def prediction(run: str) -> Path:
    path = Path(run)
    return path / "test.pred.conllu" if path.is_dir() else path


def parse_arm(text: str) -> tuple[str, list[Path]]:
    name, _, runs = text.partition("=")
    if not name or not runs:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=RUN[,RUN...]")
    paths = [prediction(run) for run in runs.split(",") if run]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise argparse.ArgumentTypeError(f"{name}: no prediction file {', '.join(missing)}")
    return name, paths


def row(gold: Path, name: str, runs: list[Path], baseline: list[Path] | None) -> str:
    scores = [official_scores(gold, run) for run in runs]
    uas = ", ".join(f"{s['UAS']:.2f}" for s in scores)
    las = ", ".join(f"{s['LAS']:.2f}" for s in scores)
    mean_uas = sum(s["UAS"] for s in scores) / len(scores)
    mean_las = sum(s["LAS"] for s in scores) / len(scores)
    cells = [name, str(len(runs)), uas, las, f"{mean_uas:.2f}", f"{mean_las:.2f}"]
    if baseline is None:
        return "| " + " | ".join(cells + ["", ""]) + " |"
    result = compare_runs(gold, runs, baseline[: len(runs)], method="bootstrap", samples=10_000, seed=1)
    against = f" (vs its first {len(runs)})" if len(runs) < len(baseline) else ""
    for metric in ("UAS", "LAS"):
        r = result[metric]
        cells.append(f"{r.delta:+.2f} [{r.ci[0]:+.2f}, {r.ci[1]:+.2f}], p = {r.p_value:.4f}{against}")
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gold", type=Path, required=True)
    parser.add_argument("--baseline", type=parse_arm, required=True, metavar="NAME=RUN[,RUN...]")
    parser.add_argument("--arm", type=parse_arm, action="append", default=[], metavar="NAME=RUN[,RUN...]")
    parser.add_argument("--out", type=Path, default=None, help="write the table here too")
    args = parser.parse_args(argv)
    base_name, base_runs = args.baseline
    header = ("| arm | seeds | test UAS per seed | test LAS per seed | mean UAS | mean LAS | "
              "vs baseline, UAS (95% CI, p) | vs baseline, LAS (95% CI, p) |")
    lines = [header,
             "|---|---|---|---|---|---|---|---|",
             row(args.gold, base_name, base_runs, None)]
    lines += [row(args.gold, name, runs, base_runs) for name, runs in args.arm]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
