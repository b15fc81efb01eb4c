"""``parser-vectors`` (or ``python -m parser.cli.vectors``): learn word vectors from your own
unlabeled text, for ``model.vectors.path`` (docs/vectors.md).

    parser-vectors corpus=news.txt.gz output=news.vec
    parser-vectors corpus=[a.conllu,shards/] output=fr.vec dim=100 epochs=5 min_count=2 model=skipgram threads=1

fastText-style vectors (words and their character n-grams of ``minn..maxn`` characters) trained
with gensim's ``FastText`` (the optional extra: ``pip install -e '.[vectors]'``). The corpus is
one or more files or folders of shards read as the trainer reads ``data.unlabeled_corpus``
(:mod:`parser.data.corpus`): one tokenised sentence a line, CoNLL-U (``.conllu``), or raw text
split by ``tokenizer=<checkpoint or pipeline file>``; plain, ``.gz``, ``.bz2`` or ``.xz``;
streamed, once per epoch plus once to count the words. ``format=`` forces one of ``raw``,
``tokenised``, ``conllu``. The output is the word2vec text format (``<rows> <dim>`` header, the
words by decreasing count; a ``.gz``/``.bz2``/``.xz`` name is compressed), written atomically;
a word holding whitespace (a CoNLL-U form may) is left out. ``threads=1`` with ``seed=`` gives
the same vectors on every run.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import lzma
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from parser.cli.shell import UsageError, run_key_value_cli
from parser.data.corpus import UnlabeledCorpus
from parser.data.corpus_files import corpus_files, detect_format
from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import output_file
from parser.train.corpus_data import load_segmenter

__all__ = ["OPTIONS", "CorpusSentences", "main", "train_vectors"]

OPTIONS = {
    "corpus": None,  # a file or folder of shards, or a list [a,b]
    "output": None,  # the .vec file to write
    "format": "auto",  # auto | raw | tokenised | conllu
    "tokenizer": None,  # raw text: a tokenizer checkpoint or pipeline file
    "dim": "100",
    "epochs": "5",
    "min_count": "2",
    "model": "skipgram",  # skipgram | cbow
    "window": "5",
    "minn": "3",  # character n-grams of minn..maxn characters; maxn=0: none (word2vec)
    "maxn": "6",
    "threads": "1",
    "seed": "1",
    "max_sentence_words": "500",
}
_COMPRESSORS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(argv, prog="parser-vectors", doc=__doc__, defaults=OPTIONS,
                             required=("corpus", "output"), command=_run)


def _run(args: dict) -> str:
    numbers = {key: _number(args[key], option=key) for key in
               ("dim", "epochs", "min_count", "window", "minn", "maxn", "threads", "seed",
                "max_sentence_words")}
    if args["model"] not in ("skipgram", "cbow"):
        raise UsageError(f"model={args['model']}: expected skipgram or cbow")
    written = train_vectors(
        [item for item in str(args["corpus"]).split(",") if item], args["output"],
        fmt=args["format"], tokenizer=args["tokenizer"], model=args["model"], **numbers)
    return f"{written} vectors of dimension {numbers['dim']} -> {args['output']}"


class CorpusSentences:
    """The sentences (lists of words) of a corpus, read anew by every iteration (gensim reads
    the corpus once to count its words, then once per epoch)."""

    def __init__(self, make: Callable[[], UnlabeledCorpus]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[list[str]]:
        corpus = self.make()
        while (record := corpus.read()) is not None:
            for _, forms, _ in record:
                yield forms


def train_vectors(corpus: Sequence[str], output: str | Path, *, fmt: str = "auto",
                  tokenizer: str | None = None, dim: int = 100, epochs: int = 5,
                  min_count: int = 2, model: str = "skipgram", window: int = 5, minn: int = 3,
                  maxn: int = 6, threads: int = 1, seed: int = 1,
                  max_sentence_words: int = 500) -> int:
    """Train fastText vectors on the files of ``corpus`` and write ``output`` (.vec); the
    number of words written."""
    if not corpus:
        raise UsageError("corpus=: give a file, a folder or a list [a,b]")
    files = [path for item in corpus for path in corpus_files(item, option="corpus")]
    output = output_file(output, option="output", inputs=files)
    segment = load_segmenter(tokenizer) if tokenizer else None
    kind = detect_format(files, given=fmt, has_segmenter=segment is not None, option="format")
    if kind == "raw" and segment is None:
        raise UsageError("format=raw needs tokenizer=<tokenizer checkpoint or pipeline file>")
    sentences = CorpusSentences(lambda: UnlabeledCorpus(
        files, fmt=kind, segment=segment, max_words=max_sentence_words, max_bad_share=0.01,
        option="corpus"))
    fasttext = _gensim().FastText(
        vector_size=dim, window=window, min_count=min_count, sg=int(model == "skipgram"),
        min_n=minn, max_n=maxn, workers=threads, seed=seed, epochs=epochs)
    fasttext.build_vocab(corpus_iterable=sentences)
    if not fasttext.wv.index_to_key:
        raise ValueError(f"corpus={','.join(corpus)}: no word occurs min_count={min_count} times")
    fasttext.train(corpus_iterable=sentences, total_examples=fasttext.corpus_count, epochs=epochs)
    return write_vec(fasttext.wv, output)


def write_vec(vectors, output: Path) -> int:
    """``vectors`` (gensim ``KeyedVectors``) in the word2vec text format, atomically; words
    holding whitespace left out. The number of rows written."""
    words = [word for word in vectors.index_to_key if not any(c.isspace() for c in word)]
    compress = _COMPRESSORS.get(output.suffix)
    with atomic_write(output, binary=True) as raw:
        handle = compress(raw, "wb") if compress is not None else raw
        handle.write(f"{len(words)} {vectors.vector_size}\n".encode())
        for word in words:
            values = " ".join(f"{value:.6g}" for value in vectors[word])
            handle.write(f"{word} {values}\n".encode())
        if compress is not None:
            handle.close()
    return len(words)


def _gensim():
    try:
        return importlib.import_module("gensim.models")
    except ImportError as error:  # the optional extra is missing
        raise UsageError("parser-vectors needs gensim: pip install -e '.[vectors]'") from error


def _number(value: str | None, *, option: str) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise UsageError(f"{option}={value}: expected a whole number") from None
    if number < 0 or (number == 0 and option not in ("minn", "maxn", "seed")):
        raise UsageError(f"{option}={value}: must be {'>= 0' if option in ('minn', 'maxn', 'seed') else '> 0'}")
    return number


if __name__ == "__main__":
    sys.exit(main())
