"""Word vectors a user brings, read streamed and kept to the rows a parser can use.

Formats, told by the file's content (a compression suffix ``.gz``, ``.bz2``, ``.xz`` aside):

- text (word2vec / fastText ``.vec``, GloVe ``.txt``): one ``<word> <v1> ... <vd>`` row a line,
  values separated by single spaces (a trailing space is allowed), after an optional
  ``<rows> <dim>`` header line (word2vec and fastText write one, GloVe does not). A first line of
  two integers is read as the header, so a 1-dimensional file whose first word is a number is
  not read right;
- fastText's binary model (``.bin``, its magic number first): words of the model's dictionary
  and, for wanted words it lacks, vectors from their character n-grams
  (:mod:`parser.data.fasttext_bin`).

Which rows are kept (:func:`read_vectors`): the first ``max_rows`` of the file (word2vec and
fastText sort them by frequency) and every row whose word is ``wanted`` (the training words) or
is the lowercased form of one (the fallback :meth:`Vocabularies.vector_ids` reads). The other
rows are counted and dropped as they are read: memory holds the kept rows, never the matrix.

Errors name the file and the line (:class:`VectorsError`): a row of another dimension than the
header's (or the first row's), a value that is not a number, a header that promises more rows
than the file holds, a row cut short at the end of the file, text that is not UTF-8, and a file
that is not word vectors at all (a CoNLL-U or JSON file given by mistake).

>>> import tempfile
>>> path = Path(tempfile.mkdtemp()) / "v.vec"
>>> _ = path.write_text("3 2\\nthe 1 0\\ncat 0 1\\nmat 1 1\\n")
>>> vectors = read_vectors(path, wanted=["Mat"], max_rows=1)
>>> vectors.words, vectors.matrix.tolist()
(['the', 'mat'], [[1.0, 0.0], [1.0, 1.0]])
>>> _ = path.write_text("the 1 0\\ncat 0 1 1\\n")
>>> read_vectors(path)
Traceback (most recent call last):
...
parser.data.vector_rows.VectorsError: ...v.vec:2: 3 values where the first row has 2 (rows of \
another dimension, or a cut or damaged file)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import IO

import numpy as np

from parser.data.conllu_io import Sentence
from parser.data.corpus_files import open_binary
from parser.data.fasttext_bin import FASTTEXT_MAGIC, read_fasttext_bin
from parser.data.text_files import utf8_error
from parser.data.vector_rows import Vectors, VectorsError, keep_set
from parser.data.vocab import N_SPECIAL, SPECIALS, UNK, Vocab, Vocabularies

__all__ = ["Vectors", "VectorsError", "keep_set", "read_vectors", "vocabularies_with_vectors"]

log = logging.getLogger(__name__)

SHOWN = 40  # characters of a bad line quoted in a message


def read_vectors(path: str | os.PathLike, *, wanted: Iterable[str] = (), max_rows: int = 200000,
                 reserved: int = 0, skip: Iterable[str] = ()) -> Vectors:
    """The rows of ``path`` a parser can use: the first ``max_rows`` and those of ``wanted``
    words and their lowercased forms (a word given twice: its first row; the words of ``skip``:
    none); ``reserved`` zero rows come first in the matrix (a vocabulary's PAD, UNK and ROOT)."""
    path = Path(path).expanduser()
    if max_rows < 0 or reserved < 0:
        raise ValueError(f"max_rows={max_rows}, reserved={reserved}: must be >= 0")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such vectors file")
    keep = keep_set(wanted)
    skip = set(skip)
    with open_binary(path) as handle:
        start = handle.peek(4)[:4]  # nothing consumed (every opener of open_binary buffers)
        if len(start) == 4 and int.from_bytes(start, "little") == FASTTEXT_MAGIC:
            handle.read(4)
            return read_fasttext_bin(handle, path, keep=keep, max_rows=max_rows, reserved=reserved,
                                     skip=skip)
        return _read_text(handle, path, keep=keep, max_rows=max_rows, reserved=reserved, skip=skip)


def _read_text(handle: IO[bytes], path: Path, *, keep: set[str], max_rows: int,
               reserved: int, skip: set[str]) -> Vectors:
    first = handle.readline()
    if not first:
        raise VectorsError(path, 1, "empty file: not word vectors")
    header = _header(first)
    number, dim, promised = 0, 0, None
    pending = None
    if header is not None:
        promised, dim = header
        if dim < 1:
            raise VectorsError(path, 1, f"header '{_shown(first)}' gives dimension {dim}")
        number = 1
    else:
        pending = first
    bound = max_rows + len(keep)
    if promised is not None:
        bound = min(bound, promised)
    matrix: np.ndarray | None = None
    words: list[str] = []
    seen = set(skip)
    rows = 0
    while True:
        line = pending if pending is not None else handle.readline()
        pending = None
        if not line:
            break
        number += 1
        row = line.rstrip(b"\r\n").rstrip(b" ")
        if not row:
            if handle.read(1):  # a blank line inside the file
                raise VectorsError(path, number, "blank line among the vector rows")
            break
        values = row.count(b" ")
        if dim == 0:  # no header: the first row sets the dimension
            dim = values
            _check_first_row(row, path, number)
        elif values != dim:
            raise VectorsError(path, number, _dimension_problem(values, dim, header is not None,
                                                                line.endswith(b"\n")))
        word_bytes = row[:row.index(b" ")] if values else row
        try:
            word = word_bytes.decode("utf-8")
        except UnicodeDecodeError as error:
            raise VectorsError(path, number, utf8_error(path, word_bytes, error, first_line=number)
                               .problem) from None
        rows += 1
        if (rows <= max_rows or word in keep) and word not in seen:
            if matrix is None:  # untouched pages cost no memory: the bound is an upper limit
                matrix = np.zeros((reserved + bound, dim), dtype=np.float32)
            if len(words) >= bound:
                raise VectorsError(path, number, f"more rows than the header's {promised}")
            matrix[reserved + len(words)] = _values(row, len(word_bytes), path, number)
            words.append(word)
            seen.add(word)
    if promised is not None and rows != promised:
        problem = (f"the header promises {promised} rows, the file holds {rows} (a cut file?)"
                   if rows < promised else f"the header promises {promised} rows, the file holds more")
        raise VectorsError(path, number, problem)
    if dim == 0:
        raise VectorsError(path, number, "no vector rows")
    if matrix is None:
        matrix = np.zeros((reserved, dim), dtype=np.float32)
    else:
        matrix.resize((reserved + len(words), dim), refcheck=False)  # in place: no second copy
    return Vectors(words, matrix, rows, "text")


def vocabularies_with_vectors(vocabs: Vocabularies, sentences: Iterable[Sentence], *,
                              path: str | os.PathLike, max_rows: int) -> tuple[Vocabularies, np.ndarray]:
    """``vocabs`` with the vector rows a parser trained on ``sentences`` keeps (their forms
    are the wanted words), and those rows' matrix ``[len(vectors), dim]`` (PAD, UNK and ROOT
    zero)."""
    if max_rows < 0:
        raise ValueError(f"model.vectors.max_rows={max_rows}: must be >= 0")
    sentences = list(sentences)
    wanted = {form for sentence in sentences for form in sentence.forms}
    vectors = read_vectors(path, wanted=wanted, max_rows=max_rows, reserved=N_SPECIAL,
                           skip=SPECIALS)
    vocab = Vocab(vectors.words, name="vectors")
    result = replace(vocabs, vectors=vocab, vector_dim=vectors.dim)
    tokens = [form for sentence in sentences for form in sentence.forms]
    found = sum(vocab.index(form) != UNK for form in tokens)
    lowered = sum(vocab.index(form) == UNK and vocab.index(form.lower()) != UNK for form in tokens)
    log.info("model.vectors: %d rows of dimension %d kept of the %d in %s; of the %d training "
             "words, %d have their own row and %d their lowercased form's", len(vectors.words),
             vectors.dim, vectors.rows_read, path, len(tokens), found, lowered)
    return result, vectors.matrix


def _header(line: bytes) -> tuple[int, int] | None:
    fields = line.split()
    if len(fields) == 2 and all(f.isdigit() for f in fields):
        return int(fields[0]), int(fields[1])
    return None


def _check_first_row(row: bytes, path: Path, number: int) -> None:
    """The first row of a file without a header must read as ``word v1 ... vd``: a CoNLL-U or
    JSON file, or any other text, is refused here by name."""
    text = row.decode("utf-8", "replace")
    kind = ("a CoNLL-U file" if b"\t" in row or text.startswith("# ") else
            "JSON" if text.lstrip().startswith(("{", "[")) else None)
    if kind is None and b" " in row:
        try:
            np.array(row.split(b" ")[1:], dtype=np.float32)
            return
        except ValueError:
            pass
    raise VectorsError(path, number, f"not a word-vectors file{f' ({kind})' if kind else ''}: "
                                     "expected '<word> <v1> ... <vd>' rows of numbers, after an "
                                     f"optional '<rows> <dim>' header line; got '{_shown(row)}'")


def _values(row: bytes, start: int, path: Path, number: int) -> np.ndarray:
    try:
        values = np.array(row[start + 1:].split(b" "), dtype=np.float32)
    except ValueError:
        bad = next((v for v in row[start + 1:].split(b" ") if not _is_number(v)), b"")
        raise VectorsError(path, number, f"value '{_shown(bad)}' is not a number") from None
    if not np.isfinite(values).all():
        raise VectorsError(path, number, "a value is not finite (nan or inf)")
    return values


def _is_number(value: bytes) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _dimension_problem(values: int, dim: int, has_header: bool, whole: bool) -> str:
    source = "the header gives" if has_header else "the first row has"
    if not whole and values < dim:
        return f"the last row is cut: {values} values where {source} {dim}"
    return (f"{values} values where {source} {dim} (rows of another dimension, or a cut or "
            "damaged file)")


def _shown(data: bytes) -> str:
    text = data.decode("utf-8", "replace").rstrip("\r\n")
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."
