"""Checks of the paths a user names on the command line, done before any work starts, so that a
typo fails in a second with the option's name instead of after an hour (or with a traceback).

Each raises ``ValueError`` as ``<option>=<value>: <problem>``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["input_file", "output_dir", "output_file"]


def input_file(value: str | os.PathLike, *, option: str) -> Path:
    """The existing file ``value`` (``~`` expanded) named by ``option``.

    >>> input_file("/", option="input")
    Traceback (most recent call last):
    ...
    ValueError: input=/: is a directory, not a file
    """
    path = Path(value).expanduser()
    if path.is_dir():
        raise ValueError(f"{option}={value}: is a directory, not a file")
    if not path.is_file():
        raise ValueError(f"{option}={value}: no such file")
    return path


def output_file(
    value: str | os.PathLike, *, option: str, inputs: Iterable[str | os.PathLike] = ()
) -> Path:
    """The file ``value`` to write (``~`` expanded), its folder created when missing. Refused:
    a directory, a path under a file, a path that is one of ``inputs`` (writing it would
    destroy the input)."""
    path = Path(value).expanduser()
    if path.is_dir():
        raise ValueError(f"{option}={value}: is a directory; give a file path")
    for given in inputs:
        source = Path(given).expanduser()
        if path.exists() and source.exists() and path.samefile(source):
            raise ValueError(f"{option}={value}: is also the input file; write to another path")
    output_dir(path.parent, option=option, shown=value)
    return path


def output_dir(value: str | os.PathLike, *, option: str, shown: object = None) -> Path:
    """The folder ``value`` (``~`` expanded), created with its parents when missing.

    >>> output_dir("/dev/null/sub", option="trainer.checkpoint_dir")
    Traceback (most recent call last):
    ...
    ValueError: trainer.checkpoint_dir=/dev/null/sub: cannot create the folder /dev/null/sub: /dev/null is not a folder
    """
    path = Path(value).expanduser()
    shown = value if shown is None else shown
    blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ValueError(
            f"{option}={shown}: cannot create the folder {path}: {blocker} is not a folder"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # permissions, read-only file system
        raise ValueError(f"{option}={shown}: cannot create the folder {path}: {error.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{option}={shown}: the folder {path} is not writable")
    return path
