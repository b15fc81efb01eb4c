"""Atomic file writes: a crash (kill -9 included) leaves either the old file or the new one,
never half of one.

The content goes to a temporary file in the target's folder, is flushed and fsync'ed, gets the
permissions an ordinary ``open`` would give (``mkstemp`` makes 0600), and is renamed over the
target; the folder is fsync'ed so that the rename itself survives a power cut. Used by every
writer of the project: checkpoints, CoNLL-U predictions, metrics JSON. :func:`atomic_link`
gives a file a second name the same way (``best.pt`` beside ``step-N.pt``).
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["atomic_link", "atomic_write"]

# link() refused by the file system (no hard links, another device, too many links): copy instead
_NO_LINK = frozenset({errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK})


@contextmanager
def atomic_write(path: str | os.PathLike, *, binary: bool = False) -> Iterator[IO]:
    """Open ``path`` for an atomic write: text (UTF-8, newlines written as given) or
    ``binary``. The target is replaced only when the ``with`` block ends without an exception;
    otherwise the temporary file is removed and the old target, if any, is left as it was.
    The target's folder must exist.

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_write(target) as handle:
    ...     _ = handle.write("a\\r\\nb\\n")
    >>> target.read_bytes()
    b'a\\r\\nb\\n'
    """
    target = Path(path)
    descriptor, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        if binary:
            handle = open(descriptor, "wb")  # noqa: SIM115 - closed below, before the rename
        else:
            handle = open(descriptor, "w", encoding="utf-8", newline="")  # noqa: SIM115
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def atomic_link(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Make ``target`` another name of ``source``'s file (a hard link: no second copy on disk),
    replacing ``target`` atomically; a copy written with :func:`atomic_write` where the file
    system has no hard links. Later writes to ``source`` (which replace it) leave ``target`` as
    it is.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a").write_text("new"), (folder / "b").write_text("old")
    >>> atomic_link(folder / "a", folder / "b")
    >>> (folder / "b").read_text()
    'new'
    """
    source, target = Path(source), Path(target)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        os.link(source, temp)
    except OSError as error:
        if error.errno not in _NO_LINK:
            raise
        with open(source, "rb") as original, atomic_write(target, binary=True) as handle:
            shutil.copyfileobj(original, handle)
        return
    try:
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _umask() -> int:
    # The process umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # not possible on every platform; the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
