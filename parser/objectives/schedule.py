"""Annealing schedules of a term's weight and temperature, and the tempered distribution.

A :class:`Schedule` moves a value from ``start`` to ``end`` over the first ``steps`` training
steps, then holds ``end``: ``constant`` (always ``end``), ``linear``, ``cosine`` (half a cosine:
flat at both ends) or ``exponential`` (geometric: ``start * (end / start) ** (step / steps)``, for
positive values, e.g. a temperature).

>>> [Schedule(end=1.0, start=0.0, shape="linear", steps=4).at(s) for s in (0, 1, 2, 4, 9)]
[0.0, 0.25, 0.5, 1.0, 1.0]
>>> [round(Schedule(end=0.1, start=1.0, shape="exponential", steps=2).at(s), 6) for s in (0, 1, 2)]
[1.0, 0.316228, 0.1]

A temperature ``T`` replaces the tree distribution ``p`` by ``p^(1/T)``, renormalised: every score
divided by ``T`` (label logits too: the joint distribution over trees and labels is tempered), the
deterministic annealing of Smith & Eisner (2004, 2006): with ``T`` annealed from above 1 towards
0, the risk under ``p^(1/T)`` goes from a smooth average towards the loss of the best tree
(Smith & Eisner 2006, minimum risk annealing), and an entropy under it from a broad to a peaked
distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from parser.objectives.base import ParserOutput
from parser.structs import divided_label_at

__all__ = ["SHAPES", "Schedule", "tempered"]

SHAPES = ("constant", "linear", "cosine", "exponential")


@dataclass(frozen=True)
class Schedule:
    """``end`` after ``steps`` steps, from ``start`` (None: ``end``) along ``shape``."""

    end: float
    start: float | None = None
    shape: str = "constant"
    steps: int = 0

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"schedule must be one of {SHAPES}, got {self.shape!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"schedule steps must be an integer >= 0, got {self.steps!r}")
        if self.shape != "constant" and self.steps == 0:
            raise ValueError(f"schedule {self.shape!r} needs steps > 0 (the steps from start to end)")
        if self.shape == "constant" and self.start is not None and self.start != self.end:
            raise ValueError(
                f"a start value {self.start} differing from {self.end} needs a schedule: linear, cosine or exponential"
            )
        if self.shape == "exponential" and not (self.first > 0 and self.end > 0):
            raise ValueError(f"schedule 'exponential' needs positive start and end, got {self.first} and {self.end}")

    @property
    def first(self) -> float:
        """The value at step 0."""
        return self.end if self.start is None else float(self.start)

    @property
    def varies(self) -> bool:
        return self.shape != "constant" and self.first != self.end

    def at(self, step: int) -> float:
        """The value at training step ``step``."""
        if not self.varies:
            return float(self.end)
        done = min(1.0, max(step, 0) / self.steps)
        start, end = self.first, float(self.end)
        if self.shape == "linear":
            return start + (end - start) * done
        if self.shape == "cosine":
            return end + (start - end) * (1.0 + math.cos(math.pi * done)) / 2.0
        return start * (end / start) ** done


def tempered(out: ParserOutput, temperature: float) -> ParserOutput:
    """``out`` with its tree distribution (and label logits) at ``temperature``: scores divided by
    it, a distribution of the same class; ``out`` itself when the temperature is 1."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if temperature == 1.0:
        return out
    dist = out.dist
    scaled = type(dist)(dist.scores / temperature, dist.lengths, single_root=dist.single_root)
    labels = None if out.label_scores is None else out.label_scores / temperature
    label_at = None if out.label_at is None else divided_label_at(out.label_at, temperature)
    return replace(out, dist=scaled, label_scores=labels, label_at=label_at)
