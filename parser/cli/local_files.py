"""Inputs and outputs of ``parser-predict`` that are not plain files: ``-`` (standard input or
output) and compressed input (``.gz``, ``.bz2``, ``.xz``;
:func:`parser.data.corpus_files.open_binary`, the one opener of compressed text). Each becomes a plain file in a temporary folder for
the length of the command, so the parsers keep reading a file twice (check, then parse) with
memory bounded by a chunk, and the output is still written whole or not at all.

A temporary file keeps the name the parsers show and number sentences by (``in.conllu.gz`` ->
``in.conllu``; standard input -> ``stdin.conllu`` or ``stdin.txt``).
"""

from __future__ import annotations

import lzma
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from parser.data.corpus_files import COMPRESSED, open_binary
from parser.data.text_files import copy_checked

__all__ = ["STDIO", "local_input", "local_output"]

STDIO = "-"
STDIN_NAME = "<stdin>"  # the file that errors in the text of standard input name
CONLLU_SUFFIXES = (".conllu", ".conll")


@contextmanager
def local_input(name: str, *, format: str, stdin: IO[str] | None = None) -> Iterator[Path]:
    """A plain file holding the input ``name``: the path itself, or a temporary copy of standard
    input (``-``; with ``format=auto`` named ``.conllu`` when its first line looks like CoNLL-U,
    else ``.txt``) or of a compressed file decompressed (``*.gz``, ``*.bz2``, ``*.xz``). Text that
    is not UTF-8 is refused while copying, the error naming ``name`` (``<stdin>``), line and column."""
    if name != STDIO and Path(name).suffix not in COMPRESSED:
        yield Path(name).expanduser()
        return
    with tempfile.TemporaryDirectory(prefix="parser-predict-") as folder:
        if name == STDIO:
            source = stdin if stdin is not None else sys.stdin
            path = Path(folder) / "stdin"
            if hasattr(source, "buffer"):  # the bytes, checked: a decoding error names its line
                with open(path, "wb") as out:
                    copy_checked(source.buffer, out, STDIN_NAME)
            else:
                with open(path, "w", encoding="utf-8") as out:
                    shutil.copyfileobj(source, out)
            path = path.rename(path.with_suffix(_stdin_suffix(path, format=format)))
        else:
            packed = Path(name).expanduser()
            if not packed.is_file():
                raise ValueError(f"input={name}: no such file")
            path = Path(folder) / packed.with_suffix("").name
            try:
                with open_binary(packed) as source, open(path, "wb") as out:
                    copy_checked(source, out, name)  # errors name the user's file, not the copy
            except (OSError, EOFError, lzma.LZMAError) as error:
                raise ValueError(f"input={name}: not a readable {packed.suffix} file ({error})") from None
        yield path


@contextmanager
def local_output(name: str, *, stdout: IO[str]) -> Iterator[Path]:
    """Where to write the output ``name``: the path itself, or (``-``) a temporary file whose
    text goes to ``stdout`` once the command has succeeded (nothing is written on failure)."""
    if name != STDIO:
        yield Path(name).expanduser()
        return
    with tempfile.TemporaryDirectory(prefix="parser-predict-") as folder:
        path = Path(folder) / "stdout.conllu"
        yield path
        with open(path, encoding="utf-8") as source:
            shutil.copyfileobj(source, stdout)
        stdout.flush()


def _stdin_suffix(path: Path, *, format: str) -> str:
    """``.conllu`` for CoNLL-U (``format=conllu``, or ``auto`` and a first non-blank line that is a
    comment or has ten tab-separated columns), else ``.txt``."""
    if format != "auto":
        return ".conllu" if format == "conllu" else ".txt"
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                return ".conllu" if line.startswith("#") or line.count("\t") == 9 else ".txt"
    return ".txt"
