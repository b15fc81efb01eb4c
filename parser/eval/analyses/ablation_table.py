"""Runs grouped into a table (rows: objectives, columns: labeled sizes or treebanks) with the mean
and spread of UAS/LAS over seeds, written as markdown and as a matplotlib plot.

Runs are pooled into one cell only when their resolved configs agree on every key except the
seed, the column's own keys and bookkeeping (paths, logging, a KL teacher's checkpoint path).
Runs of one objective and column that differ in another key get a row each, labelled with the
keys that tell them apart; a cell whose setting differs from the rest of its row gets a footnote.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from parser.eval.analyses.runs import Run

__all__ = ["COLUMNS", "IGNORED", "Cell", "Row", "Table", "build_table", "plot_table", "render_markdown"]

# Keys that say how a run was bookkept, not what was trained (fnmatch patterns).
IGNORED = (
    "name", "trainer.seed", "data.root", "data.eval_tokens_per_batch", "trainer.device",
    "trainer.resume", "trainer.checkpoint_dir", "trainer.progress", "trainer.log_every",
    "trainer.final_eval", "trainer.keep_last", "logger.*", "hydra.*", "objective.terms.*.checkpoint",
)
# What a column is, and the config keys that define it.
COLUMNS = {
    "labeled_size": ("data.labeled_size", "data.labeled_fraction"),
    "treebank": ("data.treebank",),
}


@dataclass
class Cell:
    runs: list[Run]
    note: int | None = None  # footnote number when the setting differs from the row's

    @property
    def n(self) -> int:
        return len(self.runs)

    def stats(self, metric: str) -> tuple[float, float | None] | None:
        """Mean and sample standard deviation (None for one run) of ``uas`` or ``las``."""
        values = [getattr(run, metric) for run in self.runs if getattr(run, metric) is not None]
        if not values:
            return None
        return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


@dataclass
class Row:
    label: str
    cells: dict[str, Cell] = field(default_factory=dict)


@dataclass
class Table:
    columns: list[str]
    rows: list[Row]
    notes: list[str]           # footnote texts, numbered from 1
    incomplete: list[Run]      # runs without scores for the split
    warnings: list[str]


def _ignored(key: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(key, pattern) for pattern in patterns)


def _show(items: Iterable[tuple[str, object]]) -> str:
    return ", ".join(f"{key}={'null' if value is None else value}" for key, value in items)


def _column(run: Run, columns: str) -> tuple[str, tuple]:
    if columns == "labeled_size":
        return run.labeled_size, run.size_order
    value = str(run.config.get("data.treebank"))
    return value, (value,)


def build_table(runs: Sequence[Run], *, columns: str = "labeled_size",
                ignore: Sequence[str] = ()) -> Table:
    """Group ``runs`` (see the module docstring); ``ignore`` adds fnmatch patterns of keys that
    may differ inside a cell."""
    if columns not in COLUMNS:
        raise ValueError(f"columns={columns!r}: expected one of {', '.join(COLUMNS)}")
    patterns = tuple(IGNORED) + tuple(ignore) + COLUMNS[columns]
    complete = [run for run in runs if run.complete]
    incomplete = [run for run in runs if not run.complete]
    if not complete:
        raise ValueError(f"none of the {len(runs)} run(s) has metrics to collect")

    def setting(run: Run) -> dict[str, object]:
        return {k: v for k, v in run.config.items() if not _ignored(k, patterns)}

    order: dict[str, tuple] = {}
    by_objective: dict[str, list[Run]] = defaultdict(list)
    for run in complete:
        name, key = _column(run, columns)
        order[name] = key
        by_objective[run.objective].append(run)

    rows: list[Row] = []
    notes: list[str] = []
    for objective, members in by_objective.items():
        # Keys that differ between runs of one column split the objective into several rows.
        splitting: set[str] = set()
        per_column: dict[str, list[Run]] = defaultdict(list)
        for run in members:
            per_column[_column(run, columns)[0]].append(run)
        for group in per_column.values():
            settings = [setting(run) for run in group]
            keys = set().union(*settings)
            splitting |= {k for k in keys if len({repr(s.get(k)) for s in settings}) > 1}
        split_rows: dict[tuple, list[Run]] = defaultdict(list)
        for run in members:
            split_rows[tuple((k, setting(run).get(k)) for k in sorted(splitting))].append(run)
        for split_key, row_runs in split_rows.items():
            label = objective + (f" [{_show(split_key)}]" if split_key else "")
            rows.append(_make_row(label, row_runs, columns, setting, notes))
    rows.sort(key=lambda row: (row.label != "likelihood", row.label.count("+"), row.label.lower()))
    warnings = []
    for row in rows:
        for name, cell in row.cells.items():
            seeds = Counter(repr(run.seed) for run in cell.runs)
            repeated = sorted(seed for seed, count in seeds.items() if count > 1)
            if repeated:
                warnings.append(f"{row.label} / {name}: seed(s) {', '.join(repeated)} appear more than once")
    columns_sorted = sorted(order, key=lambda name: order[name])
    return Table(columns_sorted, rows, notes, incomplete, warnings)


def _make_row(label: str, runs: list[Run], columns: str, setting, notes: list[str]) -> Row:
    row = Row(label)
    for run in runs:
        name = _column(run, columns)[0]
        row.cells.setdefault(name, Cell([])).runs.append(run)
    # The row's reference setting: the one most of its runs share (ties: the first seen).
    keyed = [(repr(sorted(setting(run).items())), setting(run)) for run in runs]
    most = Counter(key for key, _ in keyed).most_common(1)[0][0]
    reference = next(value for key, value in keyed if key == most)
    for cell in row.cells.values():
        own = setting(cell.runs[0])
        keys = sorted(set(own) | set(reference))
        differ = [(k, own.get(k)) for k in keys if repr(own.get(k)) != repr(reference.get(k))]
        if differ:
            text = _show(differ)
            if text not in notes:
                notes.append(text)
            cell.note = notes.index(text) + 1
    return row


def _format(stats: tuple[float, float | None] | None) -> str:
    if stats is None:
        return "n/a"
    mean, std = stats
    return f"{mean:.2f}" + (f" ± {std:.2f}" if std is not None else "")


def render_markdown(table: Table, *, title: str, split: str, column_title: str,
                    provenance: Sequence[str] = ()) -> str:
    """Two tables (UAS, LAS) of ``mean ± std (n=runs)``, footnotes, incomplete runs, warnings."""
    lines = [f"# {title}", ""]
    lines += [f"{line}  " for line in provenance]
    if provenance:
        lines.append("")
    lines.append(f"{split} scores (official CoNLL 2018 UAS/LAS, %): mean ± sample standard deviation "
                 "over runs (seeds); n = runs pooled in the cell.")
    for metric in ("uas", "las"):
        lines += ["", f"## {split} {metric.upper()}", ""]
        lines.append("| objective | " + " | ".join(f"{column_title} {c}" for c in table.columns) + " |")
        lines.append("| --- |" + " --- |" * len(table.columns))
        for row in table.rows:
            cells = []
            for column in table.columns:
                cell = row.cells.get(column)
                if cell is None:
                    cells.append("–")
                    continue
                mark = f" [{cell.note}]" if cell.note else ""
                cells.append(f"{_format(cell.stats(metric))} (n={cell.n}){mark}")
            lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    if table.notes:
        lines += ["", "Cells whose setting differs from the rest of their row:", ""]
        lines += [f"- [{i}] {text}" for i, text in enumerate(table.notes, start=1)]
    if table.incomplete:
        lines += ["", f"Runs without {split} metrics (unfinished or failed; not counted):", ""]
        lines += [f"- {run.path}" for run in table.incomplete]
    if table.warnings:
        lines += ["", "Warnings:", ""] + [f"- {text}" for text in table.warnings]
    return "\n".join(lines) + "\n"


def plot_table(table: Table, path: str | Path, *, title: str, split: str, column_title: str,
               lines: bool = True) -> Path:
    """UAS (mean, error bar = std) against the columns, one series per row; PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7.5, 4.5))
    positions = {column: i for i, column in enumerate(table.columns)}
    for offset, row in enumerate(table.rows):
        xs, means, errors = [], [], []
        for column, cell in row.cells.items():
            stats = cell.stats("uas")
            if stats is None:
                continue
            # A small offset per series keeps overlapping error bars readable.
            xs.append(positions[column] + 0.04 * (offset - (len(table.rows) - 1) / 2))
            means.append(stats[0])
            errors.append(stats[1] or 0.0)
        ordered = sorted(zip(xs, means, errors))
        if not ordered:
            continue
        xs, means, errors = zip(*ordered)
        axes.errorbar(xs, means, yerr=errors, marker="o", capsize=3, label=row.label,
                      linestyle="-" if lines else "none")
    axes.set_xticks(range(len(table.columns)), table.columns)
    axes.set_xlabel(column_title)
    axes.set_ylabel(f"{split} UAS (%)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
