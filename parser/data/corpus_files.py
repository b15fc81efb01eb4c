"""The files of an unlabeled corpus and a resumable reader of their lines.

A corpus is one file or a folder of shards (every regular file under it whose name does not start
with ``.``, in sorted path order, so every process sees the same order). Each file is plain
UTF-8, gzip (``.gz``), bzip2 (``.bz2``) or xz (``.xz``), told by its suffix. :class:`LineReader`
reads one file line by line in binary mode and knows where it is (line number and byte offset in the
uncompressed text), so a reader reopened at that offset continues with the next line. A line
longer than ``max_bytes`` is never held whole: its first ``max_bytes`` are read, the rest skipped.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["COMPRESSED", "FORMATS", "Line", "LineReader", "corpus_files", "detect_format", "open_binary"]

FORMATS = ("raw", "tokenised", "conllu")
_OPENERS: dict[str, Callable[[Path], IO[bytes]]] = {  # the reader closes what they open
    ".gz": lambda path: gzip.open(path, "rb"),  # noqa: SIM115
    ".bz2": lambda path: bz2.open(path, "rb"),  # noqa: SIM115
    ".xz": lambda path: lzma.open(path, "rb"),  # noqa: SIM115
}
COMPRESSED = tuple(_OPENERS)  # the suffixes open_binary decompresses


def corpus_files(value: str | os.PathLike, *, option: str) -> list[Path]:
    """The files of the corpus at ``value``: itself, or the sorted files under a folder.

    >>> corpus_files("/nope", option="data.unlabeled_corpus")
    Traceback (most recent call last):
    ...
    ValueError: data.unlabeled_corpus=/nope: no such file or folder
    """
    path = Path(value).expanduser()
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ValueError(f"{option}={value}: no such file or folder")
    files = sorted(p for p in path.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if not files:
        raise ValueError(f"{option}={value}: the folder holds no files")
    return files


def detect_format(files: list[Path], *, given: str, has_segmenter: bool, option: str) -> str:
    """``given`` (one of :data:`FORMATS`) or, for ``auto``, the format the names say: CoNLL-U for
    ``.conllu``/``.conll`` files (a compression suffix aside), else raw text when a tokenizer is
    named and one tokenised sentence per line when not. Shards of mixed kinds are refused.

    >>> detect_format([Path("a.conllu.gz")], given="auto", has_segmenter=False, option="f")
    'conllu'
    >>> detect_format([Path("a.txt")], given="auto", has_segmenter=True, option="f")
    'raw'
    """
    if given != "auto":
        if given not in FORMATS:
            raise ValueError(f"{option}={given}: expected auto or one of {', '.join(FORMATS)}")
        return given
    kinds = {_plain_suffix(p) in (".conllu", ".conll") for p in files}
    if len(kinds) > 1:
        raise ValueError(f"{option}=auto: the corpus mixes CoNLL-U and text shards ({files[0]}, "
                         "...); give one kind of file or set the format")
    if kinds.pop():
        return "conllu"
    return "raw" if has_segmenter else "tokenised"


def _plain_suffix(path: Path) -> str:
    suffixes = [s for s in path.suffixes if s not in _OPENERS]
    return suffixes[-1] if suffixes else ""


def open_binary(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, decompressed by its suffix (``.gz``, ``.bz2``, ``.xz``)."""
    opener = _OPENERS.get(path.suffix)
    return opener(path) if opener is not None else path.open("rb")


@dataclass(frozen=True)
class Line:
    """One line: its 1-based number, its bytes without the line ending, whether it was cut at
    ``max_bytes`` (the rest skipped)."""

    number: int
    data: bytes
    cut: bool


class LineReader:
    """The lines of one corpus file from a position (``offset`` bytes of uncompressed text,
    ``line`` lines already read); :attr:`position` is where the next line starts."""

    def __init__(self, path: Path, *, max_bytes: int, offset: int = 0, line: int = 0) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._handle = open_binary(path)
        if offset:
            self._handle.seek(offset)  # compressed files decompress up to it, once
        self._line = line

    @property
    def position(self) -> tuple[int, int]:
        """(byte offset, lines read): where the next line starts."""
        return self._handle.tell(), self._line

    def next_line(self) -> Line | None:
        """The next line, None at the end of the file."""
        data = self._handle.readline(self.max_bytes + 1)
        if not data:
            return None
        self._line += 1
        cut = not data.endswith(b"\n") and len(data) > self.max_bytes
        while cut:  # skip the rest of an over-long line without holding it
            rest = self._handle.readline(self.max_bytes + 1)
            if not rest or rest.endswith(b"\n"):
                break
        return Line(self._line, data.rstrip(b"\r\n"), cut)

    def close(self) -> None:
        self._handle.close()
