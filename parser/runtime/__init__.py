"""What every long-running command needs and nothing about parsing: atomic file writes,
checkpoints (with RNG state), the optimiser and its schedule, the torch device, checks of the
files and folders a user names, and the errors a run stops on. Imports no other parser package
but ``parser.config``, so the data layer, the tagger and the trainers can all use it."""

from __future__ import annotations

from parser.runtime.checkpoint import (
    CheckpointError,
    CheckpointManager,
    load_checkpoint,
    save_checkpoint,
)
from parser.runtime.device import resolve_device
from parser.runtime.errors import NonFiniteError
from parser.runtime.io_atomic import atomic_write
from parser.runtime.optim import build_optimizer, build_scheduler
from parser.runtime.user_files import input_file, output_dir, output_file

__all__ = [
    "CheckpointError", "CheckpointManager", "NonFiniteError", "atomic_write", "build_optimizer",
    "build_scheduler", "input_file", "load_checkpoint", "output_dir", "output_file",
    "resolve_device", "save_checkpoint",
]
