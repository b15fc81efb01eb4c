"""Where punctuation attaches, gold against predictions (ge_alone_harmony.md, punctuation section).

    python experiments/punct_attachment.py GOLD.conllu PRED.conllu [PRED2.conllu ...]

For the PUNCT words of each file: how many are attached correctly; the same for the sentence-final
PUNCT word (the last word of a sentence, when it is PUNCT); how often the head is the adjacent word
(left or right neighbour); how often the head is the root word (the word attached to ROOT); and
the mean head distance. Multiword-token and empty-node lines are skipped.
"""

from __future__ import annotations

import sys


def read(path: str) -> list[list[tuple[str, int]]]:
    """Sentences as lists of (UPOS, head)."""
    sentences, words = [], []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if not line:
                if words:
                    sentences.append(words)
                words = []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if "-" in cols[0] or "." in cols[0]:
                continue
            words.append((cols[3], int(cols[6])))
    if words:
        sentences.append(words)
    return sentences


def summary(gold: list[list[tuple[str, int]]], pred: list[list[tuple[str, int]]]) -> dict:
    counts = dict.fromkeys(("punct", "correct", "final", "final_correct", "adjacent",
                            "on_root_word", "distance"), 0)  # fmt: skip
    for g_sent, p_sent in zip(gold, pred, strict=True):
        if len(g_sent) != len(p_sent):
            raise ValueError("gold and prediction differ in sentence length")
        root_word = next((i + 1 for i, (_, h) in enumerate(p_sent) if h == 0), None)
        for i, ((tag, g_head), (_, p_head)) in enumerate(zip(g_sent, p_sent)):
            if tag != "PUNCT":
                continue
            dep = i + 1
            counts["punct"] += 1
            counts["correct"] += p_head == g_head
            if dep == len(g_sent):
                counts["final"] += 1
                counts["final_correct"] += p_head == g_head
            counts["adjacent"] += p_head in (dep - 1, dep + 1) and p_head != 0
            counts["on_root_word"] += p_head == root_word
            counts["distance"] += abs(dep - p_head) if p_head else 0
    return counts


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        raise SystemExit(__doc__)
    gold = read(argv[1])
    for path in argv[1:]:
        c = summary(gold, read(path))
        n, f = c["punct"], c["final"]
        print(f"== {path}")
        print(f"   PUNCT {n}: correct {c['correct']} ({100 * c['correct'] / n:.1f}%), "
              f"head adjacent {100 * c['adjacent'] / n:.1f}%, head = the root word "
              f"{100 * c['on_root_word'] / n:.1f}%, mean distance {c['distance'] / n:.2f}")
        print(f"   sentence-final PUNCT {f}: correct {c['final_correct']} "
              f"({100 * c['final_correct'] / f:.1f}%)")


if __name__ == "__main__":
    main(sys.argv)
