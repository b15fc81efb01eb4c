"""Where punctuation attaches, gold against predictions
(experiments/results/ge_alone_harmony.md, punctuation section).

    python -m parser.eval.analyses.punct_attachment GOLD.conllu PRED.conllu [PRED2.conllu ...]

For the PUNCT words (gold tag) of each file, gold first: how many are attached correctly; the
same for the sentence-final PUNCT word (the last word of a sentence, when it is PUNCT); how often
the head is the adjacent word (left or right neighbour); how often the head is the root word (the
word the file attaches to ROOT); and the mean head distance (0 for a word on ROOT).
"""

from __future__ import annotations

import sys

from parser.eval.analyses.paired import percent, run_on_predictions

__all__ = ["format_summary", "main", "summary"]


def summary(pairs) -> dict[str, int]:
    """Counts over ``(gold, predicted)`` sentence pairs (``distance``: the sum of distances)."""
    counts = dict.fromkeys(("punct", "correct", "final", "final_correct", "adjacent",
                            "on_root_word", "distance"), 0)  # fmt: skip
    for gold, predicted in pairs:
        root_word = next((i for i, h in enumerate(predicted.heads, start=1) if h == 0), None)
        for dep, (tag, g_head, p_head) in enumerate(zip(gold.upos, gold.heads, predicted.heads), start=1):
            if tag != "PUNCT":
                continue
            counts["punct"] += 1
            counts["correct"] += p_head == g_head
            if dep == len(gold):
                counts["final"] += 1
                counts["final_correct"] += p_head == g_head
            counts["adjacent"] += p_head in (dep - 1, dep + 1) and p_head != 0
            counts["on_root_word"] += p_head == root_word
            counts["distance"] += abs(dep - p_head) if p_head else 0
    return counts


def format_summary(name: str, c: dict[str, int]) -> str:
    n, f = c["punct"], c["final"]
    return (f"== {name}\n"
            f"   PUNCT {n}: correct {c['correct']} ({percent(c['correct'], n):.1f}%), "
            f"head adjacent {percent(c['adjacent'], n):.1f}%, head = the root word "
            f"{percent(c['on_root_word'], n):.1f}%, mean distance {c['distance'] / max(n, 1):.2f}\n"
            f"   sentence-final PUNCT {f}: correct {c['final_correct']} "
            f"({percent(c['final_correct'], f):.1f}%)")


def main(argv: list[str] | None = None) -> int:
    return run_on_predictions(sys.argv[1:] if argv is None else argv, usage=__doc__,
                              analyse=summary, report=format_summary)


if __name__ == "__main__":
    sys.exit(main())
