"""What a word-vectors reader returns (:class:`Vectors`) and how it fails (:class:`VectorsError`):
shared by the text reader (:mod:`parser.data.vectors`) and the fastText binary one
(:mod:`parser.data.fasttext_bin`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["Vectors", "VectorsError", "keep_set"]


class VectorsError(ValueError):
    """A vectors file that cannot be read: ``path:line: problem`` (a binary file: ``path: byte
    offset: problem``)."""

    def __init__(self, path: str | os.PathLike, where: int | str, problem: str) -> None:
        self.path, self.where, self.problem = str(path), where, problem
        super().__init__(f"{self.path}:{where}: {problem}")

    def __reduce__(self):
        return (type(self), (self.path, self.where, self.problem))


@dataclass(frozen=True)
class Vectors:
    """The rows kept: ``words[i]`` has the vector ``matrix[reserved + i]`` (``matrix``:
    ``[reserved + rows, dim]`` float32, its first ``reserved`` rows zero); ``rows_read``: the
    rows of the file (words of the model for a ``.bin``); ``fmt``: ``text`` or ``fasttext_bin``."""

    words: list[str]
    matrix: np.ndarray
    rows_read: int
    fmt: str

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])


def keep_set(wanted: Iterable[str]) -> set[str]:
    """The words whose rows are kept beyond the first ones: ``wanted`` and their lowercased forms.

    >>> sorted(keep_set(["The", "cat"]))
    ['The', 'cat', 'the']
    """
    keep = set()
    for word in wanted:
        keep.add(word)
        keep.add(word.lower())
    return keep
