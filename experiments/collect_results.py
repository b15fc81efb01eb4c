"""Gather training runs into a markdown table and a plot of UAS per objective.

Each argument is a run directory or a directory above runs (a Hydra multirun directory such as
``multirun/ssl_ewt``); every directory holding ``.hydra/config.yaml`` is a run. Runs are grouped by
their resolved config (see ``ablation/table.py``): rows are objectives (from ``objective.terms``),
columns labeled sizes (``data.labeled_size`` / ``labeled_fraction``; ``all`` when neither is set)
or treebanks; cells give the mean ± standard deviation of the official UAS and LAS of
``<run>/<split>.pred.metrics.json`` over seeds and the number of runs. Runs still missing their
metrics are listed, not counted.

    python experiments/collect_results.py multirun/ssl_ewt
        # -> experiments/results/ssl_ablation.md and ssl_ablation.png
    python experiments/collect_results.py multirun/ge_alone --columns treebank --name ge_alone \\
        --title "GE alone (ud_universal constraints, gold UPOS, no trees)"
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from ablation.runs import find_run_dirs, load_run
from ablation.table import build_table, plot_table, render_markdown

RESULTS = Path(__file__).resolve().parent / "results"
COLUMN_TITLES = {"labeled_size": "labeled trees", "treebank": "treebank"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories or directories above runs")
    parser.add_argument("--split", default="test", help="which metrics file: <split>.pred.metrics.json")
    parser.add_argument("--columns", choices=("labeled_size", "treebank"), default="labeled_size")
    parser.add_argument("--name", default="ssl_ablation", help="output files: <name>.md, <name>.png")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--title", default="Semi-supervised ablation on EWT")
    parser.add_argument("--ignore", action="append", default=[], metavar="PATTERN",
                        help="config keys (fnmatch) allowed to differ inside a cell; repeatable")
    parser.add_argument("--note", action="append", default=[], metavar="TEXT",
                        help="a line written under the title (e.g. how the runs were made); repeatable")
    parser.add_argument("--no-plot", action="store_true", help="write the markdown only")
    return parser.parse_args(argv)


def collect(args: argparse.Namespace, *, argv: list[str]) -> tuple[Path, Path | None]:
    """Read the runs, write ``<out_dir>/<name>.md`` and ``.png`` (naming the command ``argv``);
    returns both paths (no plot: None)."""
    runs = [load_run(directory, split=args.split) for directory in find_run_dirs(args.paths)]
    table = build_table(runs, columns=args.columns, ignore=args.ignore)
    column_title = COLUMN_TITLES[args.columns]
    command = "python experiments/collect_results.py " + " ".join(shlex.quote(a) for a in argv)
    made = (f"Made by `{command}` on {platform.node()} ({platform.platform()}), "
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.")
    counted = (f"Runs: {sum(r.complete for r in runs)} with {args.split} metrics, "
               f"{sum(not r.complete for r in runs)} without, under {', '.join(map(str, args.paths))}.")
    provenance = [*args.note, made, counted]
    text = render_markdown(table, title=args.title, split=args.split, column_title=column_title,
                           provenance=provenance)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    markdown = args.out_dir / f"{args.name}.md"
    markdown.write_text(text, encoding="utf-8")
    if args.no_plot:
        return markdown, None
    figure = plot_table(table, args.out_dir / f"{args.name}.png", title=args.title,
                        split=args.split, column_title=column_title,
                        lines=args.columns == "labeled_size")
    return markdown, figure


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    try:
        markdown, figure = collect(args, argv=argv)
    except ValueError as error:
        print(f"collect_results: error: {error}", file=sys.stderr)
        return 1
    print(markdown.read_text(encoding="utf-8"))
    print(f"wrote {markdown}" + (f" and {figure}" if figure else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
