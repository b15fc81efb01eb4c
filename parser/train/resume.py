"""Which checkpoint a run resumes from (``trainer.resume``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from parser.runtime.checkpoint import CheckpointError, CheckpointManager, load_checkpoint

__all__ = ["resolve_resume"]

log = logging.getLogger(__name__)


def resolve_resume(
    resume: str | None, *, checkpoints: CheckpointManager, run_dir: Path
) -> dict[str, Any] | None:
    """The checkpoint state to resume from, or None.

    ``last``: the newest readable ``step-*.pt`` of this run's checkpoint directory, else of the
    newest sibling run directory (``outputs/<name>/<time>/checkpoints``); a cut or corrupt file is
    reported and the one before it used. A directory: its newest readable checkpoint. A file:
    that checkpoint (refused if unreadable).
    """
    if not resume:
        return None
    if resume != "last":
        path = Path(resume).expanduser()
        if path.is_dir():
            directory = path / "checkpoints" if (path / "checkpoints").is_dir() else path
            found = CheckpointManager(directory, keep_last=1).load_latest()
            if found is None:
                raise CheckpointError(f"trainer.resume={resume}: no readable checkpoint in {directory}")
            log.info("resuming from %s", found[0])
            return found[1]
        log.info("resuming from %s", path)
        try:
            return load_checkpoint(path)
        except CheckpointError as error:
            raise CheckpointError(f"trainer.resume: {error}") from error
    found = checkpoints.load_latest()
    if found is None:
        siblings = sorted(
            (d / "checkpoints" for d in run_dir.parent.glob("*") if d != run_dir),
            key=lambda d: d.stat().st_mtime if d.is_dir() else 0.0,
        )
        for directory in reversed(siblings):
            found = CheckpointManager(directory, keep_last=1).load_latest()
            if found is not None:
                break
    if found is None:
        raise CheckpointError(
            f"trainer.resume=last: no readable checkpoint in {checkpoints.directory} nor in "
            f"the other runs under {run_dir.parent}"
        )
    log.info("resuming from %s", found[0])
    return found[1]
