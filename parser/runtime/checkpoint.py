"""Checkpoints on disk: atomic writes, a digest checked on load, the last k kept, RNG state.

A checkpoint is a plain dict saved with ``torch.save`` and read back with ``weights_only=True``
(only tensors and Python containers/scalars inside: the trainer converts everything else). The
file is one header line, ``parser-checkpoint 2 sha256=<hex>``, then the ``torch.save`` bytes:
a flipped byte fails the digest and the file is refused by name (torch's zip reader does not
check its CRCs, so such a file would load, and parse wrongly or with NaN scores). Files of format
1 (no header) still load, unchecked. Writes go through
:func:`parser.runtime.io_atomic.atomic_write` (temporary file, fsync, rename), so a crash (kill
-9 included) leaves either the old file or the new one, never half of one; the temporary file
such a crash leaves is removed by the next run's :meth:`CheckpointManager.prepare`.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import output_dir

__all__ = [
    "CheckpointError",
    "CheckpointManager",
    "capture_rng",
    "load_checkpoint",
    "restore_rng",
    "save_checkpoint",
]

log = logging.getLogger(__name__)

FORMAT = 2
_MAGIC = b"parser-checkpoint 2 sha256="
_HEADER = len(_MAGIC) + 64 + 1  # magic, hex digest, newline
_STEP_FILE = re.compile(r"^step-(\d+)\.pt$")
_TEMP_FILE = re.compile(r"^\.(step-\d+|best)\.pt\..*\.tmp$")  # atomic_write's, of a killed write


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used (truncated, corrupt, wrong format)."""


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``state`` to ``path`` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    payload = buffer.getbuffer()
    with atomic_write(path, binary=True) as handle:
        handle.write(_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n")
        handle.write(payload)
    return path


def load_checkpoint(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint; :class:`CheckpointError` naming the file if it is unreadable."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise CheckpointError(
            f"checkpoint {path}: is a directory, not a checkpoint file (e.g. {path / 'best.pt'})"
        )
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: no such file")
    data = path.read_bytes()
    source: Path | io.BytesIO = path
    if data.startswith(_MAGIC):
        expected = data[len(_MAGIC) : _HEADER - 1].decode("ascii", "replace")
        found = hashlib.sha256(memoryview(data)[_HEADER:]).hexdigest()
        if found != expected:
            raise CheckpointError(
                f"checkpoint {path} ({len(data)} bytes) is truncated or corrupt (its content does not "
                "match the sha256 digest written with it) and was refused"
            )
        source = io.BytesIO(memoryview(data)[_HEADER:])
    del data
    try:
        state = torch.load(source, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError ...
        size = path.stat().st_size
        raise CheckpointError(
            f"checkpoint {path} ({size} bytes) is truncated or corrupt, or not a checkpoint, "
            f"and was refused: {_load_failure(error)}"
        ) from error
    version = state.get("format") if isinstance(state, dict) else type(state).__name__
    # format 1 has no header; a format-2 payload without its header lost it: refused
    if version not in (1, FORMAT) or (version == FORMAT) != isinstance(source, io.BytesIO):
        raise CheckpointError(f"checkpoint {path}: unknown format {version!r} (expected {FORMAT})")
    return state


def _load_failure(error: Exception) -> str:
    """The part of torch's message that says what broke (not its advice to load unsafely)."""
    text = str(error).strip()
    if "WeightsUnpickler error:" in text:  # not a torch.save file, or objects beyond tensors
        detail = text.split("WeightsUnpickler error:", 1)[1].strip().split("\n\n", 1)[0]
        return f"{type(error).__name__}: {detail.strip()}"
    return f"{type(error).__name__}: {text.split('. ', 1)[0]}"


class CheckpointManager:
    """``step-<n>.pt`` files in one directory, the newest ``keep_last`` kept, plus ``best.pt``."""

    def __init__(self, directory: str | os.PathLike, *, keep_last: int) -> None:
        if keep_last < 1:
            raise ValueError(f"trainer.keep_last must be >= 1, got {keep_last}")
        self.directory = Path(directory)
        self.keep_last = keep_last

    @property
    def best_path(self) -> Path:
        return self.directory / "best.pt"

    def prepare(self, *, option: str, resuming: bool) -> None:
        """Create the directory before training starts (a bad path fails now, not at the first
        checkpoint), and refuse one holding another run's checkpoints unless ``resuming``: a
        fresh run would overwrite and prune them. ``option`` names the setting in errors."""
        output_dir(self.directory, option=option)
        self._remove_unfinished()
        found = self.step_files() + ([self.best_path] if self.best_path.exists() else [])
        if found and not resuming:
            names = ", ".join(p.name for p in found[-3:])
            raise ValueError(
                f"{option}={self.directory}: already holds checkpoints ({names}); continue that "
                "run with trainer.resume=last, or choose another folder"
            )

    def _remove_unfinished(self) -> None:
        """Temporary files of writes cut by a kill: never a checkpoint, so removed (the caller
        owns the folder: :class:`parser.runtime.run_lock.RunLock`)."""
        stray = sorted(p for p in self.directory.iterdir() if _TEMP_FILE.match(p.name))
        for path in stray:
            path.unlink(missing_ok=True)
        if stray:
            log.warning("%s: removed %d unfinished checkpoint write(s) of an interrupted run: %s",
                        self.directory, len(stray), ", ".join(p.name for p in stray[:3]))

    def describe_saved(self) -> str:
        """Where the last good checkpoints are, for a message that stops a run."""
        found = [p.name for p in self.step_files()] + (["best.pt"] if self.best_path.exists() else [])
        if not found:
            return f"no checkpoint was written yet ({self.directory} holds none)"
        return f"the last good checkpoints are in {self.directory} ({', '.join(found)})"

    def step_files(self) -> list[Path]:
        """Periodic checkpoints, oldest first."""
        if not self.directory.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := _STEP_FILE.match(p.name))]
        return [p for _, p in sorted(found)]

    def save(self, state: dict[str, Any], *, step: int, best: bool = False) -> Path:
        path = save_checkpoint(state, self.directory / f"step-{step:08d}.pt")
        if best:
            save_checkpoint(state, self.best_path)
        for old in self.step_files()[: -self.keep_last]:
            old.unlink(missing_ok=True)
        return path

    def load_latest(self, *, map_location: str | torch.device = "cpu") -> tuple[Path, dict] | None:
        """The newest readable periodic checkpoint; unreadable ones are reported and skipped."""
        for path in reversed(self.step_files()):
            try:
                return path, load_checkpoint(path, map_location=map_location)
            except CheckpointError as error:
                log.warning("%s; falling back to the previous checkpoint", error)
        return None


def capture_rng() -> dict[str, Any]:
    """Python, NumPy and torch (CPU and CUDA) generator states, as checkpoint-safe values."""
    version, mt_state, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(mt_state), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    version, mt_state, gauss = state["python"]
    random.setstate((version, tuple(mt_state), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
