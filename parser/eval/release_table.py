"""The table of a release sweep (``parser-release``): a row per treebank from the
``result.json`` that ``parser-train-pipeline`` writes (every official metric from raw text,
Tokens ... BLEX, then UAS and LAS from gold tokens), the macro average of the trained ones, and
the treebanks skipped with their reason (a metric a result lacks: ``n/a``). Beside it, systems side by side metric by metric
(:func:`comparison_tables`) and the differences with a baseline (:func:`difference_table`).

>>> row = {"treebank": "xx_a", "train_sentences": 10, "train_seconds": 120, "gold_tokens":
...        {"UAS": 80.0, "LAS": 70.0}, "raw": {"Tokens": 99.0, "Sentences": 90.0, "Words": 99.0,
...        "UPOS": 90.0, "UAS": 75.0, "LAS": 65.0}}
>>> print(release_table([row], skipped={"xx_b": "no text"}))
| treebank | train sentences | Tokens | Sentences | Words | UPOS | XPOS | UFeats | AllTags | Lemmas | UAS | LAS | CLAS | MLAS | BLEX | gold-token UAS | gold-token LAS | training min |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| xx_a | 10 | 99.00 | 90.00 | 99.00 | 90.00 | n/a | n/a | n/a | n/a | 75.00 | 65.00 | n/a | n/a | n/a | 80.00 | 70.00 | 2.0 |
| macro average (1) |  | 99.00 | 90.00 | 99.00 | 90.00 | n/a | n/a | n/a | n/a | 75.00 | 65.00 | n/a | n/a | n/a | 80.00 | 70.00 | 2.0 |
<BLANKLINE>
Skipped: xx_b (no text).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from parser.eval.official import METRICS

__all__ = ["COLUMNS", "DIFFERENCE_METRICS", "METRIC_GROUPS", "comparison_tables", "difference_table",
           "release_csv", "release_table"]

RAW_ROWS = METRICS  # every official row, Tokens ... BLEX

# (heading, value of a result.json, averaged); the raw-text rows are the official F1 scores.
COLUMNS: tuple[tuple[str, Callable[[dict], float | None], bool], ...] = (
    ("train sentences", lambda r: r["train_sentences"], False),
    *((row, (lambda r, row=row: (r.get("raw") or {}).get(row)), True) for row in RAW_ROWS),
    ("gold-token UAS", lambda r: r["gold_tokens"]["UAS"], True),
    ("gold-token LAS", lambda r: r["gold_tokens"]["LAS"], True),
    ("training min", lambda r: r["train_seconds"] / 60, True),
)


def _cell(value: float | None, heading: str) -> str:
    if value is None:
        return "n/a"
    if heading == "train sentences":
        return f"{value:,}"
    return f"{value:.1f}" if heading == "training min" else f"{value:.2f}"


def _average(results: Sequence[dict], value: Callable[[dict], float | None]) -> float | None:
    values = [value(r) for r in results]
    return None if not values or None in values else sum(values) / len(values)


def release_table(results: Sequence[dict], *, skipped: Mapping[str, str],
                  extra: Mapping[str, Mapping[str, float | None]] | None = None) -> str:
    """Markdown: a row per result, then the macro average; ``extra`` adds columns (heading ->
    treebank -> value, e.g. a baseline's scores), averaged over the same treebanks."""
    extra = extra or {}
    headings = [h for h, _, _ in COLUMNS] + list(extra)
    values = [(h, v) for h, v, _ in COLUMNS] + [
        (h, (lambda r, h=h: extra[h].get(r["treebank"]))) for h in extra]
    lines = ["| treebank | " + " | ".join(headings) + " |",
             "| --- |" + " ---: |" * len(headings)]
    for result in results:
        lines.append(f"| {result['treebank']} | "
                     + " | ".join(_cell(value(result), h) for h, value in values) + " |")
    if results:
        averaged = {h for h, _, mean in COLUMNS if mean} | set(extra)
        cells = [_cell(_average(results, value), h) if h in averaged else "" for h, value in values]
        lines.append(f"| macro average ({len(results)}) | " + " | ".join(cells) + " |")
    if skipped:
        lines += ["", "Skipped: " + "; ".join(f"{code} ({why})" for code, why in skipped.items())
                  + "."]
    return "\n".join(lines)


def release_csv(results: Sequence[dict]) -> str:
    """The rows of :func:`release_table` as CSV (numbers unrounded)."""
    lines = [",".join(["treebank"] + [h for h, _, _ in COLUMNS])]
    for result in results:
        cells = [value(result) for _, value, _ in COLUMNS]
        lines.append(",".join([result["treebank"], *("" if c is None else str(c) for c in cells)]))
    return "\n".join(lines) + "\n"


# the official rows from raw text beyond segmentation, a table each group
METRIC_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tags", ("UPOS", "XPOS", "AllTags")),
    ("features and lemmas", ("UFeats", "Lemmas")),
    ("attachment", ("UAS", "LAS", "CLAS")),
    ("attachment with morphology and lemmas", ("MLAS", "BLEX")),
)
DIFFERENCE_METRICS = ("Lemmas", "UFeats", "MLAS", "BLEX", "LAS")

# system -> treebank -> official row -> F1 (a row or a treebank a system lacks: left out)
Scores = Mapping[str, Mapping[str, Mapping[str, float | None]]]


def _averaged(train_sentences: Mapping[str, int], min_sentences: int) -> list[str]:
    return [code for code, n in train_sentences.items() if n >= min_sentences]


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean, or None when a value is missing (a mean over fewer treebanks compares nothing)."""
    return None if not values or None in values else sum(values) / len(values)


def _row(label: str, cells: Sequence[str]) -> str:
    return f"| {label} | " + " | ".join(cells) + " |"


def comparison_tables(systems: Scores, *, train_sentences: Mapping[str, int],
                      groups: Sequence[tuple[str, Sequence[str]]] = METRIC_GROUPS,
                      min_sentences: int = 400) -> str:
    """Markdown, a table per group of metrics: a row per treebank of ``train_sentences`` (in its
    order), for each metric a column per system; a missing figure is blank. Last row: the macro
    average over the treebanks with at least ``min_sentences`` training sentences, blank for a
    column that lacks one of them.

    >>> print(comparison_tables({"ours": {"xx_a": {"LAS": 80.0}, "xx_b": {"LAS": 60.0}},
    ...                          "base": {"xx_a": {"LAS": 70.0}}},
    ...                         train_sentences={"xx_a": 500, "xx_b": 30},
    ...                         groups=[("attachment", ["LAS"])]))
    Attachment, from raw text (F1):
    <BLANKLINE>
    | treebank | train sentences | LAS ours | LAS base |
    | --- | ---: | ---: | ---: |
    | xx_a | 500 | 80.00 | 70.00 |
    | xx_b | 30 | 60.00 |  |
    | macro average, >= 400 training sentences (1) |  | 80.00 | 70.00 |
    """
    averaged = _averaged(train_sentences, min_sentences)
    tables = []
    for title, metrics in groups:
        columns = [(metric, name) for metric in metrics for name in systems]
        lines = [f"{title[:1].upper()}{title[1:]}, from raw text (F1):", "",
                 _row("treebank", ["train sentences", *(f"{m} {n}" for m, n in columns)]),
                 "| --- |" + " ---: |" * (len(columns) + 1)]
        for code, sentences in train_sentences.items():
            values = [systems[name].get(code, {}).get(metric) for metric, name in columns]
            lines.append(_row(code, [f"{sentences:,}", *("" if v is None else f"{v:.2f}"
                                                          for v in values)]))
        means = [_mean([systems[name].get(code, {}).get(metric) for code in averaged])
                 for metric, name in columns]
        lines.append(_row(f"macro average, >= {min_sentences} training sentences "
                          f"({len(averaged)})", ["", *("" if v is None else f"{v:.2f}"
                                                       for v in means)]))
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def difference_table(ours: Mapping[str, Mapping[str, float | None]],
                     baseline: Mapping[str, Mapping[str, float | None]], *,
                     train_sentences: Mapping[str, int], baseline_name: str,
                     metrics: Sequence[str] = DIFFERENCE_METRICS, min_sentences: int = 400) -> str:
    """Markdown: ours - baseline per treebank and metric (blank where either lacks the figure),
    then the macro average of the differences over the treebanks with at least
    ``min_sentences`` training sentences (blank unless every one of them has both figures).

    >>> print(difference_table({"xx_a": {"LAS": 80.0}, "xx_b": {"LAS": 60.0}},
    ...                        {"xx_a": {"LAS": 70.5}, "xx_b": {}},
    ...                        train_sentences={"xx_a": 500, "xx_b": 30},
    ...                        baseline_name="base", metrics=["LAS"]))
    | treebank | train sentences | LAS, ours - base |
    | --- | ---: | ---: |
    | xx_a | 500 | +9.50 |
    | xx_b | 30 |  |
    | macro average, >= 400 training sentences (1) |  | +9.50 |
    """
    def difference(code: str, metric: str) -> float | None:
        mine, theirs = ours.get(code, {}).get(metric), baseline.get(code, {}).get(metric)
        return None if mine is None or theirs is None else mine - theirs

    averaged = _averaged(train_sentences, min_sentences)
    lines = [_row("treebank", ["train sentences", *(f"{m}, ours - {baseline_name}"
                                                    for m in metrics)]),
             "| --- |" + " ---: |" * (len(metrics) + 1)]
    for code, sentences in train_sentences.items():
        values = [difference(code, metric) for metric in metrics]
        lines.append(_row(code, [f"{sentences:,}", *("" if v is None else f"{v:+.2f}"
                                                      for v in values)]))
    means = [_mean([difference(code, metric) for code in averaged]) for metric in metrics]
    lines.append(_row(f"macro average, >= {min_sentences} training sentences ({len(averaged)})",
                      ["", *("" if v is None else f"{v:+.2f}" for v in means)]))
    return "\n".join(lines)
