"""What a scorer hands the objectives and the decoder for one batch."""

from __future__ import annotations

from dataclasses import dataclass

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
    """

    dist: TreeDistribution
    label_scores: Tensor | None = None
