"""Checkpoints on disk: atomic writes, the last k kept, corrupt files refused, RNG state.

A checkpoint is a plain dict saved with ``torch.save`` and read back with ``weights_only=True``
(only tensors and Python containers/scalars inside: the trainer converts everything else).
Writes go through :func:`parser.runtime.io_atomic.atomic_write` (temporary file, fsync, rename), so a
crash (kill -9 included) leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

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

FORMAT = 1
_STEP_FILE = re.compile(r"^step-(\d+)\.pt$")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used (truncated, corrupt, wrong format)."""


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``state`` to ``path`` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, binary=True) as handle:
        torch.save({"format": FORMAT, **state}, handle)
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
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError ...
        size = path.stat().st_size
        raise CheckpointError(
            f"checkpoint {path} ({size} bytes) is truncated or corrupt, or not a checkpoint, "
            f"and was refused: {_load_failure(error)}"
        ) from error
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"checkpoint {path}: unknown format {found!r} (expected {FORMAT})")
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
        found = self.step_files() + ([self.best_path] if self.best_path.exists() else [])
        if found and not resuming:
            names = ", ".join(p.name for p in found[-3:])
            raise ValueError(
                f"{option}={self.directory}: already holds checkpoints ({names}); continue that "
                "run with trainer.resume=last, or choose another folder"
            )

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
