"""The multiword-token splitter on dev sets, from gold tokens: how many tokens it splits wrongly
with the default rule options (split into words seen or unseen in training, multiword or not),
and a grid over the options of :meth:`parser.tokenize.affix_rules.SuffixRules.build`.

No model: the splitter (:class:`parser.tokenize.multiword.MultiwordTable`) is learnt from the
training file's multiword tokens alone, and each dev token's gold form is split by it.

    PYTHONPATH=. python experiments/multiword_dev.py --root data/ud-release --treebanks ta_ttb mr_ufal el_gdt mt_mudt
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter

from parser.data.paths import treebank_file
from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.text import read_paragraphs

SHARES, MIN_COUNTS, MAX_SUFFIXES = (0.3, 0.4, 0.5), (1, 2, 3), (6, 8)
DEFAULT = (0.5, 2, 8)


def tokens(path) -> list[tuple[str, tuple[str, ...]]]:
    return [(t.form, tuple(t.words)) for p in read_paragraphs(path) for s in p for t in s]


def errors(table: MultiwordTable, dev, seen: set[str]) -> Counter:
    counts: Counter = Counter()
    for form, words in dev:
        got = tuple(table.split(form))
        kind = ("seen" if form.lower() in seen else "unseen",
                "multiword" if len(words) > 1 else "one word")
        counts[kind + ("tokens",)] += 1
        if got != words:
            what = ("left whole" if len(got) == 1 else "split wrongly") if len(words) > 1 \
                else "split"
            counts[kind + (what,)] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--treebanks", nargs="+", required=True)
    parser.add_argument("--max-suffixes", nargs="+", type=int, default=MAX_SUFFIXES,
                        help="the grid's max_suffix values (characters: code points)")
    parser.add_argument("--shares", nargs="+", type=float, default=SHARES)
    parser.add_argument("--min-counts", nargs="+", type=int, default=MIN_COUNTS)
    args = parser.parse_args(argv)
    grid: dict[tuple, dict[str, int]] = {}
    for code in args.treebanks:
        train = list(read_paragraphs(treebank_file(args.root, code, "train")))
        seen = {t.form.lower() for p in train for s in p for t in s}
        dev = tokens(treebank_file(args.root, code, "dev"))
        for share, min_count, max_suffix in itertools.product(args.shares, args.min_counts,
                                                                    args.max_suffixes):
            table = MultiwordTable.build(train, share=share, min_count=min_count,
                                         max_suffix=max_suffix)
            counts = errors(table, dev, seen)
            wrong = sum(v for k, v in counts.items() if k[2] != "tokens")
            grid.setdefault((share, min_count, max_suffix), {})[code] = wrong
            if (share, min_count, max_suffix) == DEFAULT:
                print(f"{code}: {len(dev)} dev tokens, {wrong} split wrongly by the default options")
                for key in sorted(counts):
                    print(f"  {' / '.join(key)}: {counts[key]}")
    print("\nshare, min_count, max_suffix: tokens wrong per treebank (total), best first")
    for options, wrong in sorted(grid.items(), key=lambda item: (sum(item[1].values()), item[0])):
        print(f"  {options}: {wrong} ({sum(wrong.values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
