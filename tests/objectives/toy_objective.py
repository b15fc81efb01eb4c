"""A toy objective kind, registered from outside the package: all that a new objective takes
besides its YAML file (tests/objectives/test_registry.py composes it through the trainer's builder).

The expected dependency length per word, ``sum_{dep, head} mu[dep, head] |dep - head|^power / T``:
a short-arc prior that reads no annotation, so any batch may feed it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from parser.objectives import Output, ParserOutput, register
from parser.objectives.gold import detached, per_token


@register("toy_length", stream="any")
@dataclass(frozen=True)
class ExpectedLength:
    """Expected ``|dep - head| ** power`` per word; logs ``loss``."""

    power: float = 1.0

    def __post_init__(self) -> None:
        if not self.power > 0:
            raise ValueError(f"ExpectedLength: power must be > 0, got {self.power}")

    def __call__(self, out: ParserOutput, batch) -> Output:
        marginals = out.dist.marginals
        arcs = marginals.sum(-1) if marginals.dim() == 4 else marginals  # [B, dep, head]
        positions = torch.arange(arcs.shape[1], device=arcs.device, dtype=arcs.dtype)
        length = (positions[:, None] - positions[None, :]).abs() ** self.power  # [dep, head]
        loss = per_token((arcs * length).sum(), batch)
        return Output(loss, detached(loss=loss))
