"""Head-direction diagnosis of GE-alone predictions against gold trees (ge_alone_coordination.md).

    python experiments/direction_diagnosis.py GOLD.conllu PRED.conllu [PRED2.conllu ...]

For each prediction file: UAS over all words, attachment accuracy of conj and root and by gold
relation, VERB<-VERB arcs by direction (head before / after the child), and, for the words right
after a CCONJ that the ud_coordination set constrains (NOUN|PROPN and VERB), how many have their head before the
conjunction (distance >= 2 to the left) and how many are attached correctly. The gold counts are
printed once. Multiword-token and empty-node lines are skipped.
"""

from __future__ import annotations

import sys
from collections import Counter

RELATIONS = ("punct", "nsubj", "case", "root", "det", "advmod", "nmod", "amod", "obj", "obl",
             "compound", "conj", "aux", "cc", "mark", "cop", "acl", "xcomp", "advcl", "flat",
             "parataxis", "ccomp")


def read(path: str) -> list[list[tuple[str, int, str]]]:
    """Sentences as lists of (UPOS, head, universal relation)."""
    sentences, words = [], []
    with open(path, encoding="utf-8") as lines:
        text = lines.read().split("\n")
    for line in text:
        if not line:
            if words:
                sentences.append(words)
            words = []
        elif not line.startswith("#"):
            fields = line.split("\t")
            if "-" not in fields[0] and "." not in fields[0]:
                words.append((fields[3], int(fields[6]), fields[7].split(":")[0]))
    if words:
        sentences.append(words)
    return sentences


def counts(gold: list, heads: list[list[int]]) -> Counter:
    c: Counter = Counter()
    for tree, predicted in zip(gold, heads):
        for i, ((tag, gold_head, relation), head) in enumerate(zip(tree, predicted), start=1):
            c["words"] += 1
            c["correct"] += head == gold_head
            c[relation] += 1
            c[f"{relation} correct"] += head == gold_head
            if tag == "VERB" and head > 0 and tree[head - 1][0] == "VERB":
                c["VERB<-VERB head before"] += head < i
                c["VERB<-VERB head after"] += head > i
            if i > 1 and tree[i - 2][0] == "CCONJ" and tag in ("NOUN", "PROPN", "VERB"):
                group = "VERB" if tag == "VERB" else "NOUN|PROPN"
                c[f"after-CCONJ {group}"] += 1
                c[f"after-CCONJ {group} head before the CCONJ"] += 0 < head <= i - 2
                c[f"after-CCONJ {group} correct"] += head == gold_head
    return c


def show(name: str, c: Counter) -> None:
    print(f"== {name}: UAS {100 * c['correct'] / c['words']:.2f}, conj {c['conj correct']}/{c['conj']} "
          f"({100 * c['conj correct'] / c['conj']:.1f}%), root {c['root correct']}/{c['root']} "
          f"({100 * c['root correct'] / c['root']:.1f}%)")
    for key in sorted(c):
        if key.startswith(("VERB<-VERB", "after-CCONJ")):
            print(f"   {key}: {c[key]}")
    accuracy = [f"{r} {100 * c[f'{r} correct'] / c[r]:.0f}" for r in RELATIONS if c[r]]
    print("   attachment accuracy by gold relation (%):", ", ".join(accuracy))


def main(argv: list[str]) -> None:
    gold = read(argv[0])
    show(f"gold {argv[0]}", counts(gold, [[h for _, h, _ in tree] for tree in gold]))
    for path in argv[1:]:
        predicted = read(path)
        if [len(t) for t in predicted] != [len(t) for t in gold]:
            raise SystemExit(f"{path}: not the same sentences as {argv[0]}")
        show(path, counts(gold, [[h for _, h, _ in tree] for tree in predicted]))


if __name__ == "__main__":
    main(sys.argv[1:])
