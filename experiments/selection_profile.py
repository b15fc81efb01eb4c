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
from collections.abc import Iterator
from pathlib import Path

BINS = ("1-10", "11-20", "21-30", "31-40", "41+")


def blocks(path: Path) -> Iterator[tuple[dict[str, str], list[list[str]]]]:
    """``(comments, word rows)`` of each sentence of a CoNLL-U file (integer ids only)."""
    comments: dict[str, str] = {}
    rows: list[list[str]] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                if rows:
                    yield comments, rows
                comments, rows = {}, []
            elif line.startswith("#"):
                key, _, value = line[1:].partition("=")
                comments[key.strip()] = value.strip()
            else:
                columns = line.rstrip("\n").split("\t")
                if columns[0].isdigit():
                    rows.append(columns)
    if rows:
        yield comments, rows


def length_bin(length: int) -> str:
    return BINS[min((length - 1) // 10, len(BINS) - 1)]


def profile(select: Path, gold: Path) -> dict:
    heads = {comments.get("sent_id"): [row[6] for row in rows] for comments, rows in blocks(gold)}
    upos, lengths = Counter(), Counter()
    words = right = 0
    head_prob = 0.0
    for comments, rows in blocks(select):
        chosen = ({int(w) for w in comments["selected_words"].split(",")}
                  if "selected_words" in comments else {int(row[0]) for row in rows})
        for row in rows:
            if int(row[0]) not in chosen:
                continue
            misc = dict(item.split("=", 1) for item in row[9].split("|") if "=" in item)
            words += 1
            upos[row[3]] += 1
            lengths[length_bin(len(rows))] += 1
            head_prob += float(misc["HeadProb"])
            right += misc.get("PredHead") == heads[comments["sent_id"]][int(row[0]) - 1]
    return {"words": words, "upos": upos, "lengths": lengths, "head_prob": head_prob / words,
            "right": right / words}


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
