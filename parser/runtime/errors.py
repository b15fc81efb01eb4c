"""Errors of a training run that are not bad input (kept free of torch so the command-line
shell can name them without importing it). Each is a :class:`RunStopped`, whose ``status`` is
the exit status of the command that stops on it."""

from __future__ import annotations

__all__ = ["RESUMABLE_STATUS", "CheckpointWriteError", "NonFiniteError", "Preempted", "RunStopped"]

# The exit status of a run stopped by a preemption signal after saving a checkpoint: 75 is
# EX_TEMPFAIL of sysexits.h ("try again later"), which no other failure of a run returns.
RESUMABLE_STATUS = 75


class RunStopped(RuntimeError):
    """A run that stopped before its end; ``status``: the command's exit status."""

    status = 1


class NonFiniteError(RunStopped):
    """Too many consecutive steps with a non-finite loss or gradient."""


class CheckpointWriteError(RunStopped):
    """A checkpoint could not be written (a full disk, a folder that became read-only): the
    message names the file and the last good checkpoint."""


class Preempted(RunStopped):
    """A preemption signal stopped the run at a step boundary, after saving a checkpoint from
    which ``trainer.resume=last`` continues."""

    status = RESUMABLE_STATUS
