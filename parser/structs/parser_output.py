"""What a scorer hands the objectives and the decoder for one batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from torch import Tensor

from parser.structs.distribution import TreeDistribution


@dataclass(frozen=True)
class ParserOutput:
    """The distribution over trees, and label logits when labels are not part of it.

    dist:         the tree distribution over arcs (:class:`~parser.structs.TreeCRF`, labeled
                  (scores ``[B, dep, head, L]``) when labels are predicted jointly with the tree,
                  or :class:`~parser.structs.ProjectiveTreeCRF`).
    label_scores: ``[B, dep, head, L]`` logits of a label classifier on arcs when labels are
                  predicted separately from the tree (Dozat & Manning); ``None`` when joint.
    label_at:     ``heads [B, N+1] -> [B, N+1, L]``: the label classifier's logits on the arcs
                  of the trees ``heads`` only, where the grid was not computed
                  (``label_scores`` None; ``model.label_grid=false``).
    """

    dist: TreeDistribution
    label_scores: Tensor | None = None
    label_at: Callable[[Tensor], Tensor] | None = None

    def labels_on(self, heads: Tensor) -> Tensor | None:
        """``[B, N+1, L]`` the label classifier's logits on the arcs of ``heads [B, N+1]`` (a
        head < 0 reads as 0), from the grid or ``label_at``; None for joint labels."""
        if self.label_scores is not None:
            index = heads.clamp(min=0)[..., None, None].expand(*heads.shape, 1, self.label_scores.shape[-1])
            return self.label_scores.gather(2, index).squeeze(2)
        return None if self.label_at is None else self.label_at(heads.clamp(min=0))


def divided_label_at(label_at: Callable[[Tensor], Tensor], temperature: float) -> Callable[[Tensor], Tensor]:
    """``label_at`` (:attr:`ParserOutput.label_at`) with its logits divided by ``temperature``,
    as a grid's ``label_scores / temperature``."""
    return partial(_divided, label_at, temperature)


def _divided(label_at: Callable[[Tensor], Tensor], temperature: float, heads: Tensor) -> Tensor:
    return label_at(heads) / temperature
