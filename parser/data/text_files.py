"""User text read as UTF-8, every decoding error naming the file, the line and the column.

Python's own message (``'utf-8' codec can't decode byte 0xff in position 0``) names neither the
file nor the line. Every reader of user text (CoNLL-U, tokenised or raw text, corpus shards,
selection pools; plain, gzip, bzip2 or xz) raises :class:`~parser.data.validate.ConlluError`
instead: ``<file>:<line>: not valid UTF-8 (byte 0xff at column 4)``, the column counted in
characters from 1.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> _ = (folder / "a.txt").write_bytes(b"one\\ntwo\\nthr\\xffee\\n")
>>> with open_text(folder / "a.txt") as lines:
...     list(lines)
Traceback (most recent call last):
...
parser.data.validate.ConlluError: ...a.txt:3: not valid UTF-8 (byte 0xff at column 4)
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from parser.data.corpus_files import open_binary
from parser.data.validate import ConlluError

__all__ = ["CheckedText", "checked_lines", "copy_checked", "decode_utf8", "open_text", "read_text",
           "utf8_error"]

_CHUNK = 1 << 20  # bytes per read of copy_checked
_ESCAPED = re.compile("[\udc80-\udcff]")  # what errors="surrogateescape" makes of a bad byte


def utf8_error(path: str | os.PathLike, data: bytes, error: UnicodeDecodeError, *,
               first_line: int = 1) -> ConlluError:
    """The error of decoding ``data`` (read from ``path``, starting at line ``first_line``)."""
    start = error.start
    line_start = data.rfind(b"\n", 0, start) + 1
    column = len(data[line_start:start].decode("utf-8", "replace")) + 1
    return ConlluError(str(path), first_line + data.count(b"\n", 0, start),
                       f"not valid UTF-8 (byte {data[start]:#04x} at column {column})")


def decode_utf8(data: bytes, path: str | os.PathLike, *, first_line: int = 1) -> str:
    """``data`` decoded; its first byte on line ``first_line`` of ``path`` (for the error)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise utf8_error(path, data, error, first_line=first_line) from None


def read_text(path: str | os.PathLike, *, name: str | None = None) -> str:
    """The whole text of ``path`` (decompressed by its suffix), newlines untouched; ``name``: the
    file errors name (default ``path``)."""
    with open_binary(Path(path)) as handle:
        data = handle.read()
    return decode_utf8(data, name or path)


def checked_lines(lines: Iterable[str], path: str | os.PathLike, *,
                  first_line: int = 1) -> Iterator[str]:
    """``lines`` (decoded with ``errors="surrogateescape"``) as they are, up to the first holding
    an undecodable byte: a :class:`ConlluError` naming ``path``, the line and the column."""
    for number, line in enumerate(lines, start=first_line):
        bad = _ESCAPED.search(line)
        if bad is not None:
            raise ConlluError(str(path), number, f"not valid UTF-8 (byte "
                                                 f"{ord(bad.group()) - 0xDC00:#04x} at column "
                                                 f"{bad.start() + 1})")
        yield line


class CheckedText:
    """A text file read through :func:`checked_lines`: iterated line by line, or by
    ``readline()``/``read()`` (for readers that take a file, such as ``conllu.parse_incr``)."""

    def __init__(self, lines: Iterable[str], path: str | os.PathLike) -> None:
        self._lines = checked_lines(lines, path)

    def __iter__(self) -> Iterator[str]:
        return self._lines

    def __next__(self) -> str:
        return next(self._lines)

    def readline(self) -> str:
        return next(self._lines, "")

    def read(self) -> str:
        return "".join(self._lines)


@contextmanager
def open_text(path: str | os.PathLike, *, name: str | None = None,
              encoding: str = "utf-8") -> Iterator[CheckedText]:
    """The lines of ``path`` (decompressed by its suffix; universal newlines, as ``open``),
    checked by :func:`checked_lines`; ``name``: the file errors name (default ``path``);
    ``encoding``: ``utf-8`` or ``utf-8-sig``."""
    try:
        handle = open_binary(Path(path))
    except FileNotFoundError:
        raise FileNotFoundError(f"{name or path}: no such file") from None
    with handle, io.TextIOWrapper(handle, encoding=encoding, errors="surrogateescape") as text:
        yield CheckedText(text, name or path)


def copy_checked(source: IO[bytes], out: IO[bytes], name: str) -> None:
    """Copy ``source`` to ``out`` in chunks, refusing text that is not UTF-8 with an error naming
    ``name``, the line and the column (the check costs one decode; memory: a chunk and a line)."""
    carry, lines_before = b"", 0
    while True:
        chunk = source.read(_CHUNK)
        data = carry + chunk
        cut = data.rfind(b"\n") + 1 if chunk else len(data)
        whole, carry = data[:cut], data[cut:]
        decode_utf8(whole, name, first_line=lines_before + 1)
        out.write(whole)
        lines_before += whole.count(b"\n")
        if not chunk:
            return
