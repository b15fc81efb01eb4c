"""Head-direction diagnosis of predictions against gold trees
(experiments/results/ge_alone_coordination.md).

    python -m parser.eval.analyses.direction_diagnosis GOLD.conllu PRED.conllu [PRED2.conllu ...]

For each prediction file: UAS over all words, attachment accuracy of conj and root and by gold
relation, VERB<-VERB arcs by direction (head before / after the child), and, for the words right
after a CCONJ that the ud_coordination set constrains (NOUN|PROPN and VERB), how many have their
head before the conjunction (distance >= 2 to the left) and how many are attached correctly. The
gold file is printed first, against itself.
"""

from __future__ import annotations

import sys
from collections import Counter

from parser.eval.analyses.paired import percent, run_on_predictions, universal_relation

__all__ = ["RELATIONS", "counts", "format_counts", "main"]

RELATIONS = ("punct", "nsubj", "case", "root", "det", "advmod", "nmod", "amod", "obj", "obl",
             "compound", "conj", "aux", "cc", "mark", "cop", "acl", "xcomp", "advcl", "flat",
             "parataxis", "ccomp")


def counts(pairs) -> Counter:
    """Counts over ``(gold, predicted)`` sentence pairs; tags and relations are the gold ones."""
    c: Counter = Counter()
    for gold, predicted in pairs:
        tags = gold.upos
        for i, (tag, gold_head, deprel, head) in enumerate(
                zip(tags, gold.heads, gold.deprels, predicted.heads), start=1):
            relation = universal_relation(deprel)
            c["words"] += 1
            c["correct"] += head == gold_head
            c[relation] += 1
            c[f"{relation} correct"] += head == gold_head
            if tag == "VERB" and head > 0 and tags[head - 1] == "VERB":
                c["VERB<-VERB head before"] += head < i
                c["VERB<-VERB head after"] += head > i
            if i > 1 and tags[i - 2] == "CCONJ" and tag in ("NOUN", "PROPN", "VERB"):
                group = "VERB" if tag == "VERB" else "NOUN|PROPN"
                c[f"after-CCONJ {group}"] += 1
                c[f"after-CCONJ {group} head before the CCONJ"] += 0 < head <= i - 2
                c[f"after-CCONJ {group} correct"] += head == gold_head
    return c


def format_counts(name: str, c: Counter) -> str:
    lines = [(f"== {name}: UAS {percent(c['correct'], c['words']):.2f}, "
             f"conj {c['conj correct']}/{c['conj']} ({percent(c['conj correct'], c['conj']):.1f}%), "
             f"root {c['root correct']}/{c['root']} ({percent(c['root correct'], c['root']):.1f}%)")]
    lines += [f"   {key}: {c[key]}" for key in sorted(c) if key.startswith(("VERB<-VERB", "after-CCONJ"))]
    accuracy = [f"{r} {percent(c[f'{r} correct'], c[r]):.0f}" for r in RELATIONS if c[r]]
    lines.append("   attachment accuracy by gold relation (%): " + ", ".join(accuracy))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_on_predictions(sys.argv[1:] if argv is None else argv, usage=__doc__,
                              analyse=counts, report=format_counts)


if __name__ == "__main__":
    sys.exit(main())
