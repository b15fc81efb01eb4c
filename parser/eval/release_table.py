"""The table of a release sweep (``parser-release``): a row per treebank from the
``result.json`` that ``parser-train-pipeline`` writes, the macro average of the trained ones,
and the treebanks skipped with their reason.

>>> row = {"treebank": "xx_a", "train_sentences": 10, "train_seconds": 120, "gold_tokens":
...        {"UAS": 80.0, "LAS": 70.0}, "raw": {"Tokens": 99.0, "Sentences": 90.0, "Words": 99.0,
...        "UPOS": 90.0, "UAS": 75.0, "LAS": 65.0}}
>>> print(release_table([row], skipped={"xx_b": "no text"}))
| treebank | train sentences | Tokens | Sentences | Words | UPOS | UAS | LAS | gold-token UAS | gold-token LAS | training min |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| xx_a | 10 | 99.00 | 90.00 | 99.00 | 90.00 | 75.00 | 65.00 | 80.00 | 70.00 | 2.0 |
| macro average (1) |  | 99.00 | 90.00 | 99.00 | 90.00 | 75.00 | 65.00 | 80.00 | 70.00 | 2.0 |
<BLANKLINE>
Skipped: xx_b (no text).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

__all__ = ["COLUMNS", "release_csv", "release_table"]

RAW_ROWS = ("Tokens", "Sentences", "Words", "UPOS", "UAS", "LAS")

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
