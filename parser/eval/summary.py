"""Tables of results regenerated from run folders.

Two tables, both read from what the trainer leaves in a run folder (``.hydra/`` and
``<split>.pred.metrics.json``; official CoNLL 2018 scores, the in-loop ones where the official
scorer failed):

* The grouped table of an ablation or a GE-alone sweep (``experiments/results/ssl_ablation.md``,
  ``ge_alone*.md``): runs grouped by resolved config (``parser.eval.analyses.ablation_table``),
  rows objectives, columns labeled sizes or treebanks, mean ± std over seeds; markdown and a plot.
  Command (from the repository root; ``experiments/collect_results.py`` is the same command)::

      python -m parser.eval.summary multirun/ssl_ewt        # -> experiments/results/ssl_ablation.{md,png}
      python -m parser.eval.summary multirun/ge_alone --columns treebank --name ge_alone \\
          --title "GE alone (ud_universal constraints, gold UPOS, no trees)"

* One row per run of a Hydra sweep, its overrides and its dev/test UAS/LAS, as ``summary.md`` and
  ``summary.csv`` in the sweep folder: written by the :class:`SweepSummary` callback when a
  multirun ends (``+hydra.callbacks.summary._target_=parser.eval.summary.SweepSummary``), or by
  hand with ``python -m parser.eval.summary --per-run multirun/<sweep>``.
"""

from __future__ import annotations

import argparse
import csv
import io
import platform
import shlex
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from parser.eval.analyses.ablation_table import build_table, plot_table, render_markdown
from parser.eval.analyses.runs import find_run_dirs, load_run, read_scores

__all__ = ["RunScores", "SweepSummary", "collect", "main", "sweep_scores", "write_sweep_summary"]

RESULTS = Path("experiments") / "results"
COLUMN_TITLES = {"labeled_size": "labeled trees", "treebank": "treebank"}
SPLIT_ORDER = ("dev", "test")


# -- one row per run (the SweepSummary table) ---------------------------------------------------

@dataclass(frozen=True)
class RunScores:
    """One run folder of a sweep: its path relative to the sweep, its Hydra overrides and
    ``{split: (uas, las)}`` from its ``<split>.pred.metrics.json`` files."""

    name: str
    overrides: str
    scores: dict[str, tuple[float | None, float | None]]


def _overrides(run: Path) -> str:
    path = run / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return ""
    try:
        items = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"{path}: cannot read the run's overrides: {error}") from error
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a list of overrides, got {type(items).__name__}")  # noqa: TRY004 (project convention)
    return " ".join(str(item) for item in items)


def sweep_scores(sweep_dir: str | Path) -> list[RunScores]:
    """Every run folder under ``sweep_dir`` (a folder holding ``.hydra/`` or a
    ``<split>.pred.metrics.json``), sorted by path; a run still without metrics has no scores."""
    root = Path(sweep_dir)
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    runs = {p.parent.parent for p in root.rglob(".hydra/config.yaml")}
    runs |= {p.parent for p in root.rglob("*.pred.metrics.json")}
    runs.discard(root)  # the sweep folder's own files are not a run's
    result = []
    for run in sorted(runs):
        scores = {m.name.split(".", 1)[0]: read_scores(m) for m in sorted(run.glob("*.pred.metrics.json"))}
        result.append(RunScores(run.relative_to(root).as_posix(), _overrides(run), scores))
    return result


def _splits(runs: list[RunScores]) -> list[str]:
    found = {split for run in runs for split in run.scores}
    return [s for s in SPLIT_ORDER if s in found] + sorted(found - set(SPLIT_ORDER))


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _table_rows(runs: list[RunScores], splits: list[str]) -> tuple[list[str], list[list[str]]]:
    header = ["run", "overrides"] + [f"{s} {m}" for s in splits for m in ("UAS", "LAS")]
    rows = [[run.name, run.overrides]
            + [_score(v) for s in splits for v in run.scores.get(s, (None, None))] for run in runs]
    return header, rows


def write_sweep_summary(sweep_dir: str | Path) -> tuple[Path, Path]:
    """Writes ``summary.md`` and ``summary.csv`` into ``sweep_dir``; returns both paths."""
    root = Path(sweep_dir)
    runs = sweep_scores(root)
    header, rows = _table_rows(runs, _splits(runs))
    lines = [f"# Sweep {root.name}", "",
             (f"{len(runs)} run(s); scores from each run's `<split>.pred.metrics.json` "
             "(official CoNLL 2018 UAS/LAS; empty: no metrics yet)."), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    markdown = root / "summary.md"
    markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    table = root / "summary.csv"
    table.write_text(buffer.getvalue(), encoding="utf-8")
    return markdown, table


class SweepSummary(Callback):
    """Hydra callback: when a multirun ends, writes the per-run table into the sweep folder
    (``hydra.sweep.dir``). Register with
    ``+hydra.callbacks.summary._target_=parser.eval.summary.SweepSummary``."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        markdown, _ = write_sweep_summary(sweep_dir)
        print(f"SweepSummary: wrote {markdown} and summary.csv")


# -- the grouped table of an ablation (experiments/collect_results.py) ---------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Tables of results from run folders.")
    parser.add_argument("paths", nargs="+", help="run directories or directories above runs")
    parser.add_argument("--per-run", action="store_true",
                        help="write each sweep folder's summary.md/.csv (one row per run) instead")
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
        if args.per_run:
            for path in args.paths:
                markdown, table = write_sweep_summary(path)
                print(markdown.read_text(encoding="utf-8"))
                print(f"wrote {markdown} and {table}")
            return 0
        markdown, figure = collect(args, argv=argv)
    except ValueError as error:
        print(f"collect_results: error: {error}", file=sys.stderr)
        return 1
    print(markdown.read_text(encoding="utf-8"))
    print(f"wrote {markdown}" + (f" and {figure}" if figure else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
