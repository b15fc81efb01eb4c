"""What a ``parser-select`` file asked annotators for: the selected words' UPOS, their sentences'
lengths, the marginal of their pre-filled head (``HeadProb``) and how often that head was right
against the gold pool (issue 46's diagnosis of the marginal-words arm on en_ewt).

    python experiments/selection_profile.py --select $RUNS/sim46/en_ewt/s1/words/r1/select.conllu \\
        --gold $RUNS/sim46/en_ewt/s1/pool.conllu

Sentences are matched by ``sent_id``; a word strategy's file names its words in
``# selected_words``, a sentence strategy's file asks for every word. Length bins are the official
by-length breakdown's (1-10, 11-20, 21-30, 31-40, 41+ words).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import conllu

from parser.inference.selection import length_bin

BINS = ("1-10", "11-20", "21-30", "31-40", "41+")  # the names of selection.LENGTH_BINS' bins


def words(tokens: conllu.TokenList) -> list[conllu.Token]:
    return [t for t in tokens if isinstance(t["id"], int)]


def profile(select: Path, gold: Path) -> dict:
    with open(gold, encoding="utf-8") as lines:
        heads = {tokens.metadata.get("sent_id"): [t["head"] for t in words(tokens)]
                 for tokens in conllu.parse_incr(lines)}
    upos, lengths = Counter(), Counter()
    asked = right = 0
    head_prob = 0.0
    with open(select, encoding="utf-8") as lines:
        for tokens in conllu.parse_incr(lines):
            rows = words(tokens)
            chosen = ({int(w) for w in tokens.metadata["selected_words"].split(",")}
                      if "selected_words" in tokens.metadata else {t["id"] for t in rows})
            for t in (t for t in rows if t["id"] in chosen):
                misc = t["misc"] or {}
                asked += 1
                upos[t["upos"]] += 1
                lengths[BINS[length_bin(len(rows))]] += 1
                head_prob += float(misc["HeadProb"])
                right += int(misc["PredHead"]) == heads[tokens.metadata["sent_id"]][t["id"] - 1]
    return {"words": asked, "upos": upos, "lengths": lengths, "head_prob": head_prob / asked,
            "right": right / asked}


def report(select: Path, result: dict) -> str:
    words = result["words"]
    upos = ", ".join(f"{tag} {100 * n / words:.1f}%" for tag, n in result["upos"].most_common(6))
    lengths = " / ".join(f"{100 * result['lengths'][b] / words:.0f}" for b in BINS)
    return (f"{select}: {words} words; UPOS {upos}; by sentence length {' / '.join(BINS)}: "
            f"{lengths}%; mean HeadProb of the pre-filled head {result['head_prob']:.3f}; "
            f"pre-filled head right {100 * result['right']:.1f}%")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--select", type=Path, nargs="+", required=True,
                        help="parser-select output files")
    parser.add_argument("--gold", type=Path, required=True, help="the pool with its gold trees")
    args = parser.parse_args(argv)
    for select in args.select:
        print(report(select, profile(select, args.gold)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
