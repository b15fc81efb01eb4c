"""Head sides of function words in gold and predicted trees (ge_alone_harmony.md).

    python experiments/function_word_directions.py GOLD.conllu PRED.conllu [PRED2.conllu ...]

For each UPOS of ADP, AUX, SCONJ, DET, PART, CCONJ: how many words have their head on the left,
on the right, or at ROOT, how many are attached correctly, and q = left / (left + right), the
quantity the ``direction: consistent`` constraints push towards 0 or 1. Gold is printed first.
Multiword-token and empty-node lines are skipped (experiments/direction_diagnosis.py's reader).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from direction_diagnosis import read

TAGS = ("ADP", "AUX", "SCONJ", "DET", "PART", "CCONJ")


def sides(gold: list, predicted: list) -> Counter:
    c: Counter = Counter()
    for gold_tree, tree in zip(gold, predicted):
        for i, ((tag, gold_head, _), (_, head, _)) in enumerate(zip(gold_tree, tree), start=1):
            if tag in TAGS:
                c[tag, "root" if head == 0 else ("left" if head < i else "right")] += 1
                c[tag, "correct"] += head == gold_head
    return c


def show(name: str, c: Counter) -> None:
    print(f"== {name}")
    for tag in TAGS:
        left, right, root = c[tag, "left"], c[tag, "right"], c[tag, "root"]
        n = left + right + root
        q = left / (left + right) if left + right else float("nan")
        print(f"   {tag:5} n={n:5}  head left {left:5}  right {right:5}  root {root:3}  q={q:.3f}  "
              f"correct {c[tag, 'correct']:5} ({100 * c[tag, 'correct'] / max(n, 1):.1f}%)")


def main(argv: list[str]) -> None:
    gold = read(argv[0])
    show(f"gold {argv[0]}", sides(gold, gold))
    for path in argv[1:]:
        predicted = read(path)
        if [len(t) for t in predicted] != [len(t) for t in gold]:
            raise SystemExit(f"{path}: not the same sentences as {argv[0]}")
        show(path, sides(gold, predicted))


if __name__ == "__main__":
    main(sys.argv[1:])
