"""fastText's binary model (``.bin``, format version 12 of fastText 0.9, which gensim's
``save_facebook_model`` also writes), read with :mod:`struct` and numpy, streamed.

Layout (fastText's ``FastText::saveModel``): the magic number and version (int32 each); the
arguments (12 int32: ``dim, ws, epoch, minCount, neg, wordNgrams, loss, model, bucket, minn,
maxn, lrUpdateRate``, then a double); the dictionary (int32 ``size, nwords, nlabels``, int64
``ntokens, pruneidx_size``, then per entry its UTF-8 word ending in a NUL byte, an int64 count
and an int8 type); a quantisation flag (one byte); the input matrix (int64 ``m, n``, then ``m x
n`` float32, row-major): ``nwords`` word rows, then ``bucket`` rows of hashed character n-grams.

A word's vector is what fastText's ``getWordVector`` gives: the mean of its own row (when the
dictionary has it) and the rows of its character n-grams of ``minn..maxn`` characters of
``<word>`` (FNV-1a hashes, each byte sign-extended as fastText does, modulo ``bucket``). So a
wanted word that the dictionary lacks still gets a vector. The matrix is read a block of rows at
a time and only the kept words' sums are held. Quantised (``.ftz``) and pruned models are refused.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import IO

import numpy as np
import torch

from parser.data.vector_rows import Vectors, VectorsError

__all__ = ["FASTTEXT_MAGIC", "char_ngrams", "ngram_hash", "read_fasttext_bin"]

FASTTEXT_MAGIC = 793712314
VERSION = 12
EOS = "</s>"  # fastText's end-of-sentence word: no n-grams
_BLOCK_ROWS = 8192  # matrix rows read at once
_READ = 1 << 20


def ngram_hash(data: bytes) -> int:
    """fastText's FNV-1a over the bytes of ``data``, each byte sign-extended to 32 bits first.

    >>> ngram_hash(b"<a>"), ngram_hash("é".encode())
    (2359087600, 1023043777)
    """
    h = 2166136261
    for byte in data:
        h = ((h ^ (byte | 0xFFFFFF00 if byte & 0x80 else byte)) * 16777619) & 0xFFFFFFFF
    return h


def char_ngrams(word: str, *, minn: int, maxn: int) -> list[bytes]:
    """The character n-grams of ``<word>`` that fastText hashes (whole UTF-8 characters; the
    single-character ``<`` and ``>`` left out).

    >>> char_ngrams("ab", minn=2, maxn=3)
    [b'<a', b'<ab', b'ab', b'ab>', b'b>']
    """
    text = f"<{word}>"
    pieces = [c.encode("utf-8") for c in text]
    grams = []
    for i in range(len(pieces)):
        for n in range(minn, maxn + 1):
            if i + n > len(pieces):
                break
            if n == 1 and (i == 0 or i + n == len(pieces)):
                continue
            grams.append(b"".join(pieces[i:i + n]))
    return grams


class _Stream:
    """Bytes of ``handle`` read in blocks, with the offset for error messages."""

    def __init__(self, handle: IO[bytes], path: Path, *, offset: int) -> None:
        self.handle, self.path, self.offset = handle, path, offset
        self.buffer, self.at = b"", 0

    def take(self, size: int, *, what: str) -> bytes:
        while len(self.buffer) - self.at < size:
            more = self.handle.read(max(_READ, size))
            if not more:
                missing = size - (len(self.buffer) - self.at)
                raise VectorsError(self.path, f"byte {self.offset}", f"the file ends inside the "
                                   f"{what} ({missing} more bytes expected): a cut file")
            self.buffer = self.buffer[self.at:] + more
            self.at = 0
        data = self.buffer[self.at:self.at + size]
        self.at += size
        self.offset += size
        return data

    def unpack(self, layout: str, *, what: str) -> tuple:
        return struct.unpack(layout, self.take(struct.calcsize(layout), what=what))

    def word(self) -> bytes:
        while True:
            end = self.buffer.find(b"\0", self.at)
            if end >= 0:
                data = self.buffer[self.at:end]
                self.offset += end + 1 - self.at
                self.at = end + 1
                return data
            more = self.handle.read(_READ)
            if not more:
                raise VectorsError(self.path, f"byte {self.offset}",
                                   "the file ends inside the dictionary: a cut file")
            self.buffer = self.buffer[self.at:] + more
            self.at = 0


def read_fasttext_bin(handle: IO[bytes], path: Path, *, keep: set[str], max_rows: int,
                      reserved: int, skip: set[str] = frozenset()) -> Vectors:
    """The kept words' vectors of the fastText model in ``handle`` (its magic number already
    read): the dictionary's first ``max_rows`` words, its words in ``keep``, and the words of
    ``keep`` it lacks (from their n-grams); none of ``skip``."""
    stream = _Stream(handle, path, offset=4)
    (version,) = stream.unpack("<i", what="header")
    if version != VERSION:
        raise VectorsError(path, "byte 4", f"fastText format version {version}; this reader "
                                           f"reads version {VERSION} (fastText 0.9, gensim 4)")
    args = stream.unpack("<12id", what="model arguments")
    dim, bucket, minn, maxn = args[0], args[8], args[9], args[10]
    size, nwords, _ = stream.unpack("<3i", what="dictionary")
    _, pruned = stream.unpack("<2q", what="dictionary")
    if dim < 1 or not 0 <= nwords <= size or bucket < 0:
        raise VectorsError(path, f"byte {stream.offset}", f"dim={dim}, {nwords} words of {size} "
                                                          f"entries, bucket={bucket}: a damaged file")
    words = []
    for _ in range(size):
        raw = stream.word()
        stream.take(9, what="dictionary")  # count (int64) and type (int8)
        try:
            words.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise VectorsError(path, f"byte {stream.offset}", f"dictionary entry {len(words) + 1} "
                                                              "is not valid UTF-8") from None
    if pruned > 0:
        raise VectorsError(path, f"byte {stream.offset}", "a pruned (quantised) fastText model: "
                                                          "give the full .bin or the .vec file")
    stream.take(8 * 2 * max(pruned, 0), what="dictionary")
    (quantised,) = stream.unpack("<?", what="quantisation flag")
    if quantised:
        raise VectorsError(path, f"byte {stream.offset}", "a quantised fastText model (.ftz): give "
                                                          "the full .bin or the .vec file")
    rows, columns = stream.unpack("<2q", what="input matrix")
    if rows != nwords + bucket or columns != dim:
        raise VectorsError(path, f"byte {stream.offset}", f"input matrix {rows} x {columns}, "
                                                          f"expected {nwords + bucket} x {dim}")
    kept, owners = _kept_words(words[:nwords], keep=keep, skip=skip, max_rows=max_rows, nwords=nwords,
                               bucket=bucket, minn=minn, maxn=maxn if pruned != 0 else 0)
    sums = torch.zeros(reserved + len(kept), dim)
    order = np.argsort(owners[0], kind="stable")
    matrix_rows, slots = owners[0][order], owners[1][order]
    for first in range(0, rows, _BLOCK_ROWS):
        count = min(_BLOCK_ROWS, rows - first)
        block = np.frombuffer(stream.take(4 * count * dim, what="input matrix"), dtype="<f4")
        lo, hi = np.searchsorted(matrix_rows, [first, first + count])
        if hi > lo:
            block = torch.from_numpy(block.reshape(count, dim).astype(np.float32))
            index = torch.from_numpy(matrix_rows[lo:hi] - first)
            sums.index_add_(0, torch.from_numpy(slots[lo:hi] + reserved), block[index])
    counts = np.bincount(owners[1], minlength=len(kept)).astype(np.float32)
    sums[reserved:] /= torch.from_numpy(np.maximum(counts, 1.0))[:, None]
    if not torch.isfinite(sums).all():
        raise VectorsError(path, "input matrix", "a value is not finite (nan or inf)")
    return Vectors(kept, sums.numpy(), nwords, "fasttext_bin")


def _kept_words(dictionary: list[str], *, keep: set[str], skip: set[str], max_rows: int, nwords: int,
                bucket: int, minn: int, maxn: int) -> tuple[list[str], tuple[np.ndarray, np.ndarray]]:
    """The kept words and ``(matrix rows, slots)``: each kept word (slot) sums these rows."""
    kept: list[str] = []
    rows: list[int] = []
    slots: list[int] = []
    seen = set(skip)
    known = {}
    for i, word in enumerate(dictionary):
        known.setdefault(word, i)
    chosen = [(dictionary[i], i) for i in range(min(max_rows, nwords))]
    chosen += [(word, known[word]) for word in sorted(keep) if word in known and known[word] >= max_rows]
    if maxn > 0 and bucket > 0:
        chosen += [(word, -1) for word in sorted(keep) if word not in known]
    for word, row in chosen:
        if word in seen:
            continue
        seen.add(word)
        slot = len(kept)
        own = [row] if row >= 0 else []
        grams = [] if word == EOS or maxn == 0 or bucket == 0 else char_ngrams(word, minn=minn, maxn=maxn)
        own += [nwords + ngram_hash(gram) % bucket for gram in grams]
        if not own:
            continue
        kept.append(word)
        rows += own
        slots += [slot] * len(own)
    return kept, (np.asarray(rows, dtype=np.int64), np.asarray(slots, dtype=np.int64))
