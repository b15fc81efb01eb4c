"""Ownership of a run folder: one writer at a time.

A run takes ``<folder>/.lock`` before it writes anything there: an advisory ``flock`` on the file,
which the kernel releases when the process dies (kill -9 included), and the holder's pid, host
and start time in it, so that a refused run can name the holder. A lock file left by a process
that died is stale: the next run takes it over and says so. A second run into a held folder is
refused at once (:class:`RunFolderBusy`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from pathlib import Path

__all__ = ["LOCK_NAME", "RunFolderBusy", "RunLock"]

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"


class RunFolderBusy(ValueError):
    """Another live run holds the folder."""


class RunLock:
    """The lock of one folder (created when missing). ``acquire`` or refuse; ``release`` when
    the run ends. Also a context manager.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with RunLock(folder):
    ...     RunLock(folder).acquire()
    Traceback (most recent call last):
    ...
    parser.runtime.run_lock.RunFolderBusy: ...is in use by another run (pid ...); wait for it to end, or choose another folder
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(fd)
                os.close(fd)
                raise RunFolderBusy(
                    f"{self.directory} is in use by another run ({_describe(holder)}); wait for "
                    "it to end, or choose another folder"
                ) from None
            # The holder may have removed the file between our open and our flock: then we
            # hold a lock on a name-less file; start again on the current one.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _read(fd)
        if previous:
            log.warning("%s: stale lock taken over (%s; that process is gone)", self.path,
                        _describe(previous))
        os.ftruncate(fd, 0)
        record = f"pid={os.getpid()} host={socket.gethostname()} " \
                 f"started={time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
        os.write(fd, record.encode())
        os.fsync(fd)
        self._fd = fd

    def _open(self) -> int:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:  # a read-only folder, another user's
            raise ValueError(
                f"{self.directory} is not writable ({error.strerror}): a run writes its lock, log "
                "and checkpoints there; make it writable, or choose another folder"
            ) from error

    def release(self) -> None:
        if self._fd is None:
            return
        # Remove the name while still holding the lock, so no one locks a file about to vanish.
        self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> dict[str, str]:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096).decode("utf-8", "replace")
    return dict(part.split("=", 1) for part in text.split() if "=" in part)


def _describe(holder: dict[str, str]) -> str:
    """``pid 123 on host a, started ...``, with whether that pid is alive when it is this host's."""
    if not holder:
        return "pid unknown: the lock file is empty"
    text = f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, started " \
           f"{holder.get('started', '?')}"
    if holder.get("host") == socket.gethostname() and holder.get("pid", "").isdigit():
        text += ", running" if _alive(int(holder["pid"])) else ", no such process on this host"
    return text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
