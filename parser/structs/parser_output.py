"""What a scorer hands the objectives and the decoder for one batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from parser.structs.tree_crf import TreeCRF


@dataclass(frozen=True)
class ParserOutput:
    """The distribution over trees, and label logits when labels are not part of it.

    dist:         the tree CRF over arcs; labeled (scores ``[B, dep, head, L]``) when labels are
                  predicted jointly with the tree.
    label_scores: ``[B, dep, head, L]`` logits of a label classifier on arcs when labels are
                  predicted separately from the tree (Dozat & Manning); ``None`` when joint.
    """

    dist: TreeCRF
    label_scores: Tensor | None = None
