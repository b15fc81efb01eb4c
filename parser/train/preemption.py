"""Preemption signals: what a cluster sends before it kills a job (SIGTERM from SLURM, Kubernetes
and spot instances; SIGUSR1 from SLURM's ``--signal=USR1@<seconds>``), set by
``trainer.preempt_signals``.

While the loop trains, such a signal only raises a flag: the step under way finishes, the loop
saves a checkpoint and stops with :class:`~parser.runtime.errors.Preempted` (exit status 75,
:data:`~parser.runtime.errors.RESUMABLE_STATUS`). A second signal of the same kind gets the
handler that was there before (for SIGTERM: the process ends at once), for a user who means it.
Outside the loop (building the run, the final evaluation) the signals keep their usual effect.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Sequence
from types import FrameType

__all__ = ["PreemptionSignals", "parse_signals"]

log = logging.getLogger(__name__)

_UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}


def parse_signals(names: Sequence[str], *, option: str) -> tuple[signal.Signals, ...]:
    """Signal names (``SIGTERM`` or ``TERM``, any case) -> signals; ValueError naming ``option``.

    >>> parse_signals(["SIGTERM", "usr1"], option="trainer.preempt_signals")
    (<Signals.SIGTERM: 15>, <Signals.SIGUSR1: 10>)
    >>> parse_signals(["SIGKILL"], option="trainer.preempt_signals")
    Traceback (most recent call last):
    ...
    ValueError: trainer.preempt_signals: SIGKILL cannot be caught; e.g. [SIGTERM, SIGUSR1]
    """
    found = []
    for name in names:
        key = str(name).strip().upper()
        key = key if key.startswith("SIG") else f"SIG{key}"
        if key not in signal.Signals.__members__:
            raise ValueError(f"{option}: unknown signal {name!r}; e.g. [SIGTERM, SIGUSR1]")
        if signal.Signals[key] in _UNCATCHABLE:
            raise ValueError(f"{option}: {key} cannot be caught; e.g. [SIGTERM, SIGUSR1]")
        found.append(signal.Signals[key])
    return tuple(found)


class PreemptionSignals:
    """Inside ``with``: ``signals`` set :attr:`received` instead of their usual effect; the
    previous handlers come back on exit. Handlers can only be set in the main thread: elsewhere
    the signals keep their effect (with a warning)."""

    def __init__(self, signals: Sequence[signal.Signals]) -> None:
        self.signals = tuple(signals)
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, object] = {}

    def __enter__(self) -> PreemptionSignals:  # noqa: PYI034 - a final class
        if self.signals and threading.current_thread() is not threading.main_thread():
            log.warning("training outside the main thread: %s stop the run without a checkpoint",
                        ", ".join(s.name for s in self.signals))
            return self
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        sig = signal.Signals(signum)
        if self.received is None:
            self.received = sig
        signal.signal(sig, self._previous.get(sig, signal.SIG_DFL))  # a second one: as before
