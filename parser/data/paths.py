"""Where the UD treebanks are: the data root and the file of a treebank split.

The root is, in order: the configured value (``data.root``), ``$UD_ROOT``, ``<repo>/data/ud``
(which ``make data`` links to the shared copy). Files are
``<root>/<treebank>/<treebank>-ud-<split>.conllu``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "KNOWN_TREEBANKS",
    "SPLITS",
    "available_treebanks",
    "existing_file",
    "resolve_ud_root",
    "treebank_file",
]

KNOWN_TREEBANKS = ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")
SPLITS = ("train", "dev", "test")
REPO = Path(__file__).resolve().parents[2]
_HOW = ("set data.root=/path/to/ud on the command line, export UD_ROOT=/path/to/ud, or run "
        "`make data` (it links the shared treebanks or prints the download command)")


def resolve_ud_root(configured: str | os.PathLike | None = None) -> Path:
    """The UD data root: ``configured``, else ``$UD_ROOT``, else ``<repo>/data/ud``.

    Raises ValueError saying where it looked and how to set it when that folder is missing.
    """
    if configured:
        root, source = Path(configured).expanduser(), "data.root"
    elif os.environ.get("UD_ROOT"):
        root, source = Path(os.environ["UD_ROOT"]).expanduser(), "$UD_ROOT"
    else:
        root, source = REPO / "data" / "ud", "the default <repo>/data/ud"
    if not root.is_dir():
        raise ValueError(f"UD data root {root} (from {source}) is not a directory; {_HOW}")
    return root


def existing_file(value: str | os.PathLike, *, option: str) -> Path:
    """The file a user named in ``option`` (``~`` expanded); ValueError naming the option and
    the value when it is not a file.

    >>> existing_file("/nonexistent.conllu", option="data.dev_file")
    Traceback (most recent call last):
    ...
    ValueError: data.dev_file=/nonexistent.conllu: no such file
    """
    path = Path(value).expanduser()
    if not path.is_file():
        raise ValueError(f"{option}={value}: no such file")
    return path


def available_treebanks(root: str | os.PathLike) -> list[str]:
    """Known treebanks, plus any folder of ``root`` holding ``<name>-ud-<split>.conllu``."""
    found = {p.parent.name for p in Path(root).glob("*/*-ud-*.conllu")
             if p.name.startswith(f"{p.parent.name}-ud-")}
    return sorted(set(KNOWN_TREEBANKS) | found)


def treebank_file(root: str | os.PathLike, treebank: str, split: str) -> Path:
    """``<root>/<treebank>/<treebank>-ud-<split>.conllu``; ValueError naming the available
    treebanks or splits when ``treebank`` is unknown or the split's file is missing.

    >>> treebank_file("/nonexistent", "xx_none", "dev")
    Traceback (most recent call last):
    ...
    ValueError: unknown treebank 'xx_none'; available: ar_padt, de_gsd, en_ewt, fi_tdt, fr_gsd
    """
    names = available_treebanks(root)
    if treebank not in names:
        raise ValueError(f"unknown treebank {treebank!r}; available: {', '.join(names)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for {treebank}; use one of {', '.join(SPLITS)}")
    path = Path(root) / treebank / f"{treebank}-ud-{split}.conllu"
    if not path.is_file():
        present = [s for s in SPLITS
                   if (Path(root) / treebank / f"{treebank}-ud-{s}.conllu").is_file()]
        raise ValueError(f"{path} not found: {treebank} has no {split!r} split under {root} "
                         f"(available: {', '.join(present) or 'none'})")
    return path
