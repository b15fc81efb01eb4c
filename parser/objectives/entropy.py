"""Entropy regularisation (Smith & Eisner 2007; Renyi entropy as an option): the entropy of the
tree distribution, summed over sentences and divided by the number of words. Minimising it makes
the parser confident on unlabeled text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from parser.objectives.base import Output, ParserOutput
from parser.objectives.gold import detached, per_token
from parser.objectives.registry import register

if TYPE_CHECKING:
    from parser.data.batch import Batch


@register("entropy", stream="unlabeled")
@dataclass(frozen=True)
class Entropy:
    """Shannon entropy (``alpha=1``) or Renyi entropy of order ``alpha`` (> 0) of the tree
    distribution, per word; needs no annotation. Logs ``loss`` and ``value`` (equal: the
    entropy per word, in nats)."""

    alpha: float = 1.0

    def __post_init__(self) -> None:
        if not self.alpha > 0:
            raise ValueError(f"Entropy: alpha must be > 0, got {self.alpha}")

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        dist = out.dist
        values = dist.entropy() if self.alpha == 1.0 else dist.renyi_entropy(self.alpha)
        loss = per_token(values.sum(), batch)
        return Output(loss, detached(loss=loss, value=loss))
