"""Averaged weights (the averaged perceptron's trick, Polyak-Ruppert averaging) for evaluation.

Training updates the raw parameters as usual; after each optimiser step
:meth:`WeightAverage.update` folds them into a running average. Dev evaluation and checkpoints see the average (inside
:meth:`WeightAverage.swapped_in`), training goes on from the raw weights.

- ``ema``: exponential moving average with bias correction: after ``t`` updates the average is
  ``sum_k (1 - d) d^(t-k) w_k / (1 - d^t)``, so the initial weights carry no weight at all;
- ``uniform``: the plain mean of the weights after each of the ``t`` updates.

Both are kept as ``avg_t = a_t avg_{t-1} + (1 - a_t) w_t`` with ``a_t = d (1 - d^(t-1)) / (1 - d^t)``
(EMA) or ``a_t = (t - 1) / t`` (uniform), in float64 so that long runs do not drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch import Tensor, nn

from parser.config import Average

__all__ = ["AVERAGE_KINDS", "WeightAverage", "build_average", "restore_average", "swapped_in"]

AVERAGE_KINDS = tuple(kind.value for kind in Average)


class WeightAverage:
    """A running average of ``model``'s floating-point parameters (buffers are not averaged)."""

    def __init__(self, model: nn.Module, *, kind: str, decay: float = 0.999) -> None:
        if kind not in AVERAGE_KINDS:
            raise ValueError(
                f"optim.average={kind!r}: expected null or one of {AVERAGE_KINDS}"
            )
        if kind == "ema" and not 0.0 < decay < 1.0:
            raise ValueError(f"optim.ema_decay={decay}: must lie strictly between 0 and 1")
        self.model, self.kind, self.decay = model, kind, float(decay)
        self.params = {
            name: p
            for name, p in model.named_parameters()
            if p.requires_grad and p.is_floating_point()
        }
        self.average = {name: p.detach().to(torch.float64) for name, p in self.params.items()}
        self.updates = 0
        self._raw: dict[str, Tensor] | None = None  # the raw weights while the average is swapped in

    def _old_share(self, t: int) -> float:
        """``a_t``: the share of the previous average in the average after update ``t``."""
        if self.kind == "uniform":
            return (t - 1) / t
        d = self.decay
        return d * (1.0 - d ** (t - 1)) / (1.0 - d**t)

    @torch.no_grad()
    def update(self) -> None:
        """Fold the current raw parameters in; call once after each optimiser step."""
        if self._raw is not None:
            raise RuntimeError(
                "WeightAverage.update: the average is swapped in, not the raw weights"
            )
        self.updates += 1
        share = self._old_share(self.updates)
        for name, p in self.params.items():
            self.average[name].mul_(share).add_(p.detach(), alpha=1.0 - share)

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its raw weights again after."""
        if self._raw is not None or self.updates == 0:  # nested, or nothing averaged yet
            yield
            return
        with torch.no_grad():
            self._raw = {name: p.detach().clone() for name, p in self.params.items()}
            for name, p in self.params.items():
                p.copy_(self.average[name])
        try:
            yield
        finally:
            with torch.no_grad():
                for name, p in self.params.items():
                    p.copy_(self._raw[name])
            self._raw = None

    def raw_weights(self) -> dict[str, Tensor]:
        """The raw (training) parameters, whether or not the average is swapped in."""
        if self._raw is not None:
            return {name: t.clone() for name, t in self._raw.items()}
        return {name: p.detach().clone() for name, p in self.params.items()}

    def state_dict(self) -> dict[str, Any]:
        """Kind, decay, update count, the average and the raw weights (a checkpoint's ``model``
        holds the average when saved inside :meth:`swapped_in`)."""
        return {
            "kind": self.kind,
            "decay": self.decay,
            "updates": self.updates,
            "average": {name: t.clone() for name, t in self.average.items()},
            "raw": self.raw_weights(),
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the average and put the raw weights back into the model (training resumes from
        them, not from the average a checkpoint's ``model`` holds)."""
        if state.get("kind") != self.kind or float(state.get("decay", -1.0)) != self.decay:
            raise ValueError(
                f"averaging state: checkpoint has average={state.get('kind')!r} "
                f"ema_decay={state.get('decay')}, this run {self.kind!r} {self.decay}; "
                "resume with the same optim.average and optim.ema_decay"
            )
        for key in ("average", "raw"):
            names = set(state[key])
            if names != set(self.params):
                raise ValueError(
                    f"averaging state[{key!r}]: parameters {sorted(names ^ set(self.params))} "
                    "differ from the model's"
                )
        for name, p in self.params.items():
            self.average[name].copy_(state["average"][name])
            p.copy_(state["raw"][name])
        self.updates = int(state["updates"])


def build_average(model: nn.Module, *, kind: Any, decay: float) -> WeightAverage | None:
    """A :class:`WeightAverage` of ``model``, or None when ``kind`` is None (no averaging);
    ``kind`` a name or the config's ``Average`` enum."""
    if kind is None:
        return None
    return WeightAverage(model, kind=str(getattr(kind, "value", kind)), decay=float(decay))


def swapped_in(average: WeightAverage | None):
    """``average.swapped_in()``, or a no-op context when there is no average."""
    return nullcontext() if average is None else average.swapped_in()


def restore_average(average: WeightAverage | None, state: dict[str, Any] | None) -> None:
    """Load a checkpoint's averaging ``state`` (its ``"average"`` entry) into ``average``;
    ValueError when one of the two exists without the other."""
    if average is None and state is None:
        return
    if average is None or state is None:
        saved = None if state is None else state.get("kind")
        raise ValueError(
            f"trainer.resume: the checkpoint was trained with optim.average={saved}, this run has "
            f"optim.average={None if average is None else average.kind}; resume with the same"
        )
    average.load_state_dict(state)
