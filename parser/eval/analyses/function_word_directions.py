"""Head sides of function words in gold and predicted trees (experiments/results/ge_alone_harmony.md).

    python -m parser.eval.analyses.function_word_directions GOLD.conllu PRED.conllu [PRED2.conllu ...]

For each UPOS of ADP, AUX, SCONJ, DET, PART, CCONJ (the gold tag): how many words have their head
on the left, on the right, or at ROOT, how many are attached correctly, and q = left / (left +
right), the quantity the ``direction: consistent`` constraints push towards 0 or 1. Gold is
printed first.
"""

from __future__ import annotations

import sys
from collections import Counter

from parser.eval.analyses.paired import percent, run_on_predictions

__all__ = ["TAGS", "format_sides", "main", "sides"]

TAGS = ("ADP", "AUX", "SCONJ", "DET", "PART", "CCONJ")


def sides(pairs) -> Counter:
    """``c[tag, "left"|"right"|"root"|"correct"]`` over ``(gold, predicted)`` sentence pairs."""
    c: Counter = Counter()
    for gold, predicted in pairs:
        for i, (tag, gold_head, head) in enumerate(zip(gold.upos, gold.heads, predicted.heads), start=1):
            if tag in TAGS:
                c[tag, "root" if head == 0 else ("left" if head < i else "right")] += 1
                c[tag, "correct"] += head == gold_head
    return c


def format_sides(name: str, c: Counter) -> str:
    lines = [f"== {name}"]
    for tag in TAGS:
        left, right, root = c[tag, "left"], c[tag, "right"], c[tag, "root"]
        n = left + right + root
        q = left / (left + right) if left + right else float("nan")
        lines.append(f"   {tag:5} n={n:5}  head left {left:5}  right {right:5}  root {root:3}  "
                     f"q={q:.3f}  correct {c[tag, 'correct']:5} ({percent(c[tag, 'correct'], n):.1f}%)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_on_predictions(sys.argv[1:] if argv is None else argv, usage=__doc__,
                              analyse=sides, report=format_sides)


if __name__ == "__main__":
    sys.exit(main())
