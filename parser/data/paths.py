"""Where the UD treebanks are: the data root, a treebank's folder and the file of one of its splits.

The root is, in order: the configured value (``data.root``), ``$UD_ROOT``, ``<repo>/data/ud``
(which ``make data`` links to the shared copy). Under it a treebank lies in either layout:

- ``<root>/<code>/<code>-ud-<split>.conllu`` (``en_ewt/en_ewt-ud-train.conllu``);
- the official release's ``<root>/UD_<Language>-<Name>/<code>-ud-<split>.conllu``
  (``UD_Hungarian-Szeged/hu_szeged-ud-train.conllu``), the folder a downloaded
  ``ud-treebanks-v2.x`` archive unpacks to.

A treebank is named by its code (``hu_szeged``) or its folder name (``UD_Hungarian-Szeged``).
Finding a code in the official layout lists folder names and the names of the files inside them:
no file is opened, so a 300-treebank release costs a few hundred directory listings.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LAYOUTS",
    "SPLITS",
    "TreebankFolder",
    "available_treebanks",
    "existing_file",
    "find_treebank",
    "resolve_ud_root",
    "treebank_file",
]

SPLITS = ("train", "dev", "test")
LAYOUTS = ("<code>/<code>-ud-<split>.conllu", "UD_<Language>-<Name>/<code>-ud-<split>.conllu")
REPO = Path(__file__).resolve().parents[2]
_HOW = ("set data.root=/path/to/ud on the command line, export UD_ROOT=/path/to/ud, or run "
        "`make data` (it links the shared treebanks or prints the download command)")
_SPLIT_FILE = re.compile(r"^(?P<code>[^/]+)-ud-(?P<split>train|dev|test)\.conllu$")
_SHOWN = 12  # treebanks named in an error message; a release has hundreds


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


@dataclass(frozen=True)
class TreebankFolder:
    """A treebank found under a data root: its ``code``, its ``folder`` and ``files``, the file
    of each split present (in ``SPLITS`` order)."""

    code: str
    folder: Path
    files: dict[str, Path]

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.files)


def _split_files(folder: Path) -> dict[str, dict[str, Path]]:
    """``{code: {split: file}}`` of the ``<code>-ud-<split>.conllu`` files in ``folder`` (one
    directory listing; no file is opened)."""
    found: dict[str, dict[str, Path]] = {}
    try:
        names = sorted(os.listdir(folder))
    except (NotADirectoryError, FileNotFoundError, PermissionError):
        return found
    for name in names:
        match = _SPLIT_FILE.match(name)
        if match:
            found.setdefault(match["code"], {})[match["split"]] = folder / name
    return {code: {s: files[s] for s in SPLITS if s in files} for code, files in found.items()}


def _folders(root: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(root) if e.is_dir())
    except (NotADirectoryError, FileNotFoundError):
        return []


def _in_folder(folder: Path, name: str) -> TreebankFolder | None:
    """The treebank of ``folder`` when ``name`` is its folder name: ``<code>/`` holding
    ``<code>-ud-*`` files, or an official ``UD_*`` folder holding one treebank's files."""
    found = _split_files(folder)
    if name in found:
        return TreebankFolder(name, folder, found[name])
    if name.startswith("UD_") and len(found) == 1:
        (code, files), = found.items()
        return TreebankFolder(code, folder, files)
    if name.startswith("UD_") and len(found) > 1:
        raise ValueError(f"{folder}: files of several treebanks ({', '.join(sorted(found))}); "
                         "name the treebank by its code")
    return None


def find_treebank(root: str | os.PathLike, name: str) -> TreebankFolder:
    """The treebank named ``name`` (a code or a folder name) under ``root``, in either layout.

    ValueError naming the root, the layouts looked for and close matches when there is none.

    >>> find_treebank("/nonexistent", "xx_none")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown treebank 'xx_none' under /nonexistent: looked for xx_none/xx_none-ud-<split>...
    """
    root = Path(root)
    if name and "/" not in name and (root / name).is_dir():
        direct = _in_folder(root / name, name)
        if direct is not None:
            return direct
    for folder in _folders(root):
        if folder.name.startswith("UD_"):
            files = _split_files(folder).get(name)
            if files:
                return TreebankFolder(name, folder, files)
    raise ValueError(_unknown(root, name))


def _unknown(root: Path, name: str) -> str:
    looked = " and ".join(layout.replace("<code>", name) for layout in LAYOUTS)
    found = _found(root)
    names = sorted(found) + sorted({f.name for f in found.values() if f.name not in found})
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
    message = f"unknown treebank {name!r} under {root}: looked for {looked}"
    if close:
        message += f"; close matches: {', '.join(close)}"
    if not found:
        return message + "; no treebank there"
    shown = ", ".join(sorted(found)[:_SHOWN])
    more = f", ... ({len(found)} in all)" if len(found) > _SHOWN else ""
    return f"{message}; available: {shown}{more}"


def _found(root: Path) -> dict[str, Path]:
    """``{code: folder}`` of every treebank under ``root``, in either layout."""
    found: dict[str, Path] = {}
    for folder in _folders(root):
        for code in _split_files(folder):
            if folder.name == code or folder.name.startswith("UD_"):
                found.setdefault(code, folder)
    return found


def available_treebanks(root: str | os.PathLike) -> list[str]:
    """The codes of the treebanks under ``root``, in either layout, sorted."""
    return sorted(_found(Path(root)))


def treebank_file(root: str | os.PathLike, treebank: str, split: str) -> Path:
    """The file of ``split`` of ``treebank`` (a code or a folder name) under ``root``, in either
    layout; ValueError naming the close matches when ``treebank`` is unknown, or the splits
    present when this one is missing.

    >>> treebank_file("/nonexistent", "xx_none", "dev")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown treebank 'xx_none' under /nonexistent: looked for xx_none/xx_none-ud-<split>...
    """
    found = find_treebank(root, treebank)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for {found.code}; use one of {', '.join(SPLITS)}")
    if split not in found.files:
        raise ValueError(
            f"{found.folder / f'{found.code}-ud-{split}.conllu'} not found: {found.code} has no "
            f"{split!r} split under {root} (available: {', '.join(found.splits) or 'none'})"
        )
    return found.files[split]
