"""A synthetic unlabeled corpus of any size from a treebank's text, for the corpus benchmarks.

Sentences of ``--source`` (a CoNLL-U file) are drawn with replacement by a seeded generator and
written one by one (never held: a corpus of ten million sentences takes the memory of the
treebank), as tokenised lines, raw text lines (the ``# text`` of each sentence) or CoNLL-U (FORM
and UPOS). ``.gz`` / ``.xz`` output names compress. Generated at run time, never committed.

    python experiments/synthetic_corpus.py --source data/ud/en_ewt/en_ewt-ud-train.conllu \\
        --sentences 1000000 --out $RUNS/corpus.txt
"""

from __future__ import annotations

import argparse
import gzip
import lzma
from pathlib import Path
from typing import IO

import numpy as np

from parser.data.conllu_io import read_conllu

FORMATS = ("tokenised", "raw", "conllu")


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=1)
    if path.suffix == ".xz":
        return lzma.open(path, "wt", encoding="utf-8")
    return path.open("w", encoding="utf-8")


def records(source: Path, *, fmt: str) -> list[str]:
    """One output record per sentence of ``source`` (newline-terminated)."""
    sentences = read_conllu(source, require_trees=False).sentences
    if fmt == "tokenised":
        return [" ".join(s.forms) + "\n" for s in sentences]
    if fmt == "raw":
        return [(s.text or " ".join(s.forms)) + "\n" for s in sentences]
    return ["".join(f"{i}\t{form}\t_\t{tag or '_'}\t_\t_\t_\t_\t_\t_\n"
                    for i, (form, tag) in enumerate(zip(s.forms, s.upos), 1)) + "\n"
            for s in sentences]


def write_corpus(source: Path, out: Path, *, sentences: int, fmt: str = "tokenised",
                 seed: int = 0, chunk: int = 100_000) -> Path:
    """``sentences`` records of ``source`` drawn with replacement into ``out``."""
    if fmt not in FORMATS:
        raise ValueError(f"--format={fmt}: expected one of {', '.join(FORMATS)}")
    pool = records(source, fmt=fmt)
    rng = np.random.default_rng(seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _open(out) as handle:
        for start in range(0, sentences, chunk):
            drawn = rng.integers(len(pool), size=min(chunk, sentences - start))
            handle.write("".join(pool[i] for i in drawn.tolist()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a CoNLL-U file (a treebank's train)")
    parser.add_argument("--sentences", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the corpus file (.gz/.xz compress)")
    parser.add_argument("--format", choices=FORMATS, default="tokenised")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_corpus(args.source, args.out, sentences=args.sentences, fmt=args.format, seed=args.seed)
    print(args.out)


if __name__ == "__main__":
    main()
