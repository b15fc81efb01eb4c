"""The checkpoint set of a run: ``step-N.pt`` files, ``best.pt``, and ``manifest.json`` naming them.

A save at step N writes ``step-N.pt`` (atomically, :mod:`parser.runtime.checkpoint_file`); on a dev
gain ``best.pt`` becomes another name of it (a hard link, a copy where the file system has none);
then ``manifest.json`` is replaced atomically, naming the set: the last checkpoint and the best
one, each with its step and sha256; only then are old step files pruned (the newest
``keep_last`` are kept, and the best one's, from which ``best.pt`` can be put back). A crash at
any point of a save (kill -9, power cut) therefore leaves the manifest of the old set or of the
new set, and every file it names. The next run reads the manifest: ``trainer.resume=last`` takes
its last checkpoint, ``best.pt`` is put back to its best one if the crash came between the two,
and step files written after it are not part of any set (removed). Each file the manifest names is
read only if its sha256 is still the manifest's (the header's, :func:`file_digest`: no second pass
over the file): a copy onto ``best.pt`` writes into the step file it is another name of, and such
a file is reported by name and passed over like a corrupt one. A save that fails (a full disk)
is undone the same way and raised as :class:`~parser.runtime.errors.CheckpointWriteError`, naming
the file and the last good checkpoint. Folders of runs written before the manifest existed still
resume, from their newest readable ``step-N.pt``, as they did.

Manifest (format 1)::

    {"format": 1, "last": {"file": "step-00000006.pt", "step": 6, "sha256": "..."},
     "best": {"file": "best.pt", "step": 3, "sha256": "...", "source": "step-00000003.pt"}}
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from parser.runtime.checkpoint_file import (
    CheckpointError,
    capture_rng,
    file_digest,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from parser.runtime.errors import CheckpointWriteError
from parser.runtime.io_atomic import atomic_link, atomic_write
from parser.runtime.user_files import output_dir

__all__ = [
    "MANIFEST",
    "CheckpointError",
    "CheckpointManager",
    "capture_rng",
    "load_checkpoint",
    "restore_rng",
    "save_checkpoint",
]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_STEP_FILE = re.compile(r"^step-(\d+)\.pt$")
# atomic_write's and atomic_link's temporary files, of a write cut by a kill
_TEMP_FILE = re.compile(r"^\.(step-\d+\.pt|best\.pt|manifest\.json)\..*\.tmp$")


@dataclass(frozen=True)
class _Entry:
    """A checkpoint of the set: its step file (``best.pt`` is another name of the best one's)."""

    file: str
    step: int
    sha256: str | None  # None: a file of format 1 (no header)

    @classmethod
    def of(cls, path: Path, step: int) -> _Entry:
        return cls(path.name, step, file_digest(path))


class CheckpointManager:
    """The checkpoint set in one directory (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike, *, keep_last: int) -> None:
        if keep_last < 1:
            raise ValueError(f"trainer.keep_last must be >= 1, got {keep_last}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self._last: _Entry | None = None  # the set as the manifest names it (None: no manifest)
        self._best: _Entry | None = None
        self.manifest_found = False  # whether read_manifest found one
        self.overwritten_files: list[Path] = []  # what load_latest passed over for overwritten()

    @property
    def best_path(self) -> Path:
        return self.directory / "best.pt"

    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    def prepare(self, *, option: str, resuming: bool) -> None:
        """Create the directory before training starts (a bad path fails now, not at the first
        checkpoint), and refuse one holding another run's checkpoints unless ``resuming``: a
        fresh run would overwrite and prune them. Reads the manifest; removes what a killed save
        left outside the set. ``option`` names the setting in errors."""
        output_dir(self.directory, option=option)
        self._remove_unfinished()
        found = self.step_files() + [p for p in (self.best_path, self.manifest_path) if p.exists()]
        if found and not resuming:
            names = ", ".join(p.name for p in found[-3:])
            raise ValueError(
                f"{option}={self.directory}: already holds checkpoints ({names}); continue that "
                "run with trainer.resume=last, or choose another folder"
            )
        self.read_manifest()
        if self._last is not None:
            newer = [p for p in self.step_files() if _step(p) > self._last.step]
            for path in newer:
                path.unlink(missing_ok=True)
            if newer:
                log.warning("%s: removed %s, written after the last complete checkpoint set (%s "
                            "names %s)", self.directory, ", ".join(p.name for p in newer), MANIFEST,
                            self._last.file)

    def _remove_unfinished(self) -> None:
        """Temporary files of writes cut by a kill: never a checkpoint, so removed (the caller
        owns the folder: :class:`parser.runtime.run_lock.RunLock`)."""
        stray = sorted(p for p in self.directory.iterdir() if _TEMP_FILE.match(p.name))
        for path in stray:
            path.unlink(missing_ok=True)
        if stray:
            log.warning("%s: removed %d unfinished checkpoint write(s) of an interrupted run: %s",
                        self.directory, len(stray), ", ".join(p.name for p in stray[:3]))

    def read_manifest(self) -> None:
        """The set as ``manifest.json`` names it (none: a folder of an earlier version's run)."""
        self._last = self._best = None
        self.manifest_found = False
        if not self.manifest_path.is_file():
            return
        try:
            manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
            self._last = _entry(manifest["last"], file="file")
            self._best = None if manifest["best"] is None else _entry(manifest["best"], file="source")
            self.manifest_found = True
        except (ValueError, KeyError, TypeError) as error:
            self._last = self._best = None
            log.warning("%s is unreadable (%s: %s) and was ignored: no file is checked against "
                        "it, and trainer.resume=last takes the newest readable step file",
                        self.manifest_path, type(error).__name__, error)

    def overwritten(self, path: Path) -> str | None:
        """Why ``path``, a file the manifest names (its last or best step file, or ``best.pt``), is
        not the file it names: its sha256 differs, as after ``cp other/best.pt <this>/best.pt``
        (which writes into the step file ``best.pt`` is another name of). None: it is that file,
        or the manifest does not name it (or there is none)."""
        if path.parent.resolve() != self.directory.resolve():
            return None
        named = {e.file: e for e in (self._last, self._best) if e is not None}
        if self._best is not None:
            named[self.best_path.name] = self._best
        entry = named.get(path.name)
        if entry is None or not path.is_file():
            return None
        found = file_digest(path)
        if found == entry.sha256:
            return None
        absent = "absent (a file without a header)"
        return (f"overwritten: {path} is not the checkpoint of step {entry.step} that {MANIFEST} "
                f"names: its sha256 is {found or absent}, the manifest's {entry.sha256 or absent} "
                "(a copy onto best.pt writes into the step file best.pt is another name of)")

    def describe_saved(self) -> str:
        """Where the last good checkpoint is, for a message that stops a run."""
        if self._last is not None:
            best = "" if self._best is None else f"; best.pt: step {self._best.step}"
            return (f"the last good checkpoint is {self.directory / self._last.file} (step "
                    f"{self._last.step}{best})")
        found = [p.name for p in self.step_files()] + (["best.pt"] if self.best_path.exists() else [])
        if not found:
            return f"no checkpoint was written yet ({self.directory} holds none)"
        return f"the last good checkpoints are in {self.directory} ({', '.join(found)})"

    def step_files(self) -> list[Path]:
        """Periodic checkpoints, oldest first."""
        if not self.directory.is_dir():
            return []
        return sorted((p for p in self.directory.iterdir() if _STEP_FILE.match(p.name)), key=_step)

    # -- saving ---------------------------------------------------------------------------------

    def save(self, state: dict[str, Any], *, step: int, best: bool = False) -> Path:
        """Write the checkpoint of ``step`` (``best``: also as ``best.pt``) and commit the new set;
        :class:`CheckpointWriteError` (the old set left as it was) when a write fails."""
        path = self.directory / f"step-{step:08d}.pt"
        try:
            with self._writing(path, step=step):
                save_checkpoint(state, path)
            last = _Entry.of(path, step)
            new_best = last if best else self._best
            if best:
                with self._writing(self.best_path, step=step):
                    atomic_link(path, self.best_path)
            with self._writing(self.manifest_path, step=step):
                self._write_manifest(last, new_best)
        except CheckpointWriteError:
            self._undo(path)
            raise
        self._last, self._best = last, new_best
        keep = {last.file, None if new_best is None else new_best.file}
        for old in self.step_files()[: -self.keep_last]:
            if old.name not in keep:
                old.unlink(missing_ok=True)
        return path

    @contextmanager
    def _writing(self, path: Path, *, step: int) -> Iterator[None]:
        try:
            yield
        except OSError as error:
            reason = f"[Errno {error.errno}] {error.strerror}" if error.strerror else str(error)
            raise CheckpointWriteError(
                f"the checkpoint of step {step} was not saved: writing {path} failed: {reason}; "
                f"{self.describe_saved()}; make room (or set trainer.checkpoint_dir), then "
                "continue with trainer.resume=last"
            ) from error

    def _write_manifest(self, last: _Entry, best: _Entry | None) -> None:
        manifest = {"format": 1, "last": {"file": last.file, "step": last.step, "sha256": last.sha256},
                    "best": None if best is None else {"file": self.best_path.name, "step": best.step,
                                                       "sha256": best.sha256, "source": best.file}}
        with atomic_write(self.manifest_path) as handle:
            handle.write(json.dumps(manifest, indent=1) + "\n")

    def _undo(self, path: Path) -> None:
        """After a failed save: its step file and ``best.pt`` back to the committed set."""
        committed = {e.file for e in (self._last, self._best) if e is not None}
        if path.name not in committed:
            path.unlink(missing_ok=True)
        try:
            if self._best is not None:
                self._publish_best(self._best)
            elif self._last is None:  # the first save: no best.pt before it
                self.best_path.unlink(missing_ok=True)
        except OSError as error:  # the next run's resume puts it back
            log.warning("%s not put back after the failed save: %s", self.best_path, error)

    # -- resuming and the final evaluation ---------------------------------------------------------

    def load_latest(self, *, map_location: str | torch.device = "cpu") -> tuple[Path, dict] | None:
        """The last checkpoint of the set (the manifest's), or, when it is unreadable or
        :meth:`overwritten`, the newest readable one before it; the files passed over are
        reported by name and skipped (the overwritten ones listed in ``overwritten_files``). A
        folder without a manifest (an earlier version's run): its newest readable step file."""
        files = self.step_files()
        if self._last is None:
            candidates = files[::-1]
        else:
            named = self.directory / self._last.file
            candidates = [named, *(p for p in files[::-1] if _step(p) < self._last.step)]
        self.overwritten_files = []
        for path in candidates:
            reason = self.overwritten(path)
            if reason is not None:
                log.warning("%s; falling back to the previous checkpoint", reason)
                self.overwritten_files.append(path)
                continue
            try:
                state = load_checkpoint(path, map_location=map_location)
            except CheckpointError as error:
                log.warning("%s; falling back to the previous checkpoint", error)
                continue
            self._last = _Entry.of(path, _step(path))
            return path, state
        return None

    def adopt(self, *, best_step: int) -> None:
        """Make the set's best checkpoint the one of ``best_step`` (the resumed state's), and
        ``best.pt`` that file: so the final evaluation scores the checkpoint the state calls best.
        It is the manifest's best, else ``step-<best_step>.pt``, else a ``best.pt`` of that step
        (a run of an earlier version); none of them, or one :meth:`overwritten`: a warning, and no
        best until the next gain."""
        source = self.directory / f"step-{best_step:08d}.pt"
        if self._best is not None and self._best.step == best_step \
                and (self.directory / self._best.file).is_file():
            source = self.directory / self._best.file
        elif not source.is_file() and self.best_path.is_file() and _own_step(self.best_path) == best_step:
            if self.overwritten(self.best_path) is None:
                atomic_link(self.best_path, source)  # the best's step file, kept while it is best
            else:
                source = self.best_path  # reported below
        reason = "gone" if not source.is_file() else self.overwritten(source)
        if reason is not None:
            self._best = None
            log.warning("%s: the best checkpoint of the resumed run (step %d) is %s; best.pt is "
                        "replaced at the next dev gain, and until then the final evaluation scores "
                        "the last checkpoint", self.directory, best_step, reason)
            return
        self._best = _Entry.of(source, best_step)
        self._publish_best(self._best)

    def _publish_best(self, entry: _Entry) -> None:
        """``best.pt`` made the file of ``entry`` again, if a crash or failed save left another."""
        source = self.directory / entry.file
        if self.best_path.is_file() and (
                os.path.samefile(source, self.best_path)
                or (entry.sha256 is not None and file_digest(self.best_path) == entry.sha256)):
            return
        atomic_link(source, self.best_path)
        log.warning("%s put back to the best checkpoint, %s (step %d): a save was interrupted",
                    self.best_path, entry.file, entry.step)

    def final_best(self) -> tuple[Path, int | None]:
        """The checkpoint the final evaluation scores and its step: ``best.pt`` as the set names
        it; the last checkpoint when no best is known; ``best.pt`` with step None without a set."""
        if self._best is not None:
            self._publish_best(self._best)
            return self.best_path, self._best.step
        if self._last is not None:
            log.warning("no best checkpoint is known: the final evaluation scores the last one, %s",
                        self._last.file)
            return self.directory / self._last.file, self._last.step
        return self.best_path, None


def _step(path: Path) -> int:
    return int(_STEP_FILE.match(path.name).group(1))


def _own_step(path: Path) -> int | None:
    """The step a checkpoint file says it was saved at (None: unreadable, or none)."""
    try:
        step = load_checkpoint(path).get("step")
    except CheckpointError:
        return None
    return step if isinstance(step, int) else None


def _entry(item: Any, *, file: str) -> _Entry:
    """A manifest entry, its step file's name checked (never a path out of the folder)."""
    name, step, digest = item[file], item["step"], item["sha256"]
    if not isinstance(name, str) or not _STEP_FILE.match(name) or not isinstance(step, int) \
            or not (digest is None or isinstance(digest, str)):
        raise ValueError(f"bad entry {item!r}")
    return _Entry(name, step, digest)
