"""Self-training on the arcs the teacher is sure of: a partial pseudo-gold tree.

Per unlabeled sentence, the teacher's best tree (``tree``: its maximum spanning tree by default)
is scored arc by arc with the teacher's exact marginal ``mu(dep, head)`` (the tree CRF's, not a
local softmax); the arcs kept are those with ``mu >= threshold`` and, with ``top_share``, among the
``round(top_share * n)`` most confident of the sentence's ``n`` (half up; ties by word position);
given both, an arc must pass both. The student is trained on the marginal likelihood of every
tree containing the kept arcs, the partial-tree likelihood ``restrict`` computes:

    loss_b = -log sum_{trees y with A_b in y} p_model(y) = log Z - log Z(restricted to A_b),

summed over sentences and divided by the batch's words. The kept arcs lie on one tree, so some
tree always contains them. A sentence with no kept arc contributes exactly 0; with every arc kept,
the loss is plain hard self-training's ``-log p_model(1-best)`` (``kl`` with ``tree``). A labeled
model sums labels out (the arcs are unlabeled), as ``kl`` with ``tree`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from parser.objectives.base import Output, ParserOutput
from parser.objectives.gold import detached, per_token
from parser.objectives.registry import Resources, register
from parser.objectives.teacher import TREES, teacher_pass, teacher_tree

if TYPE_CHECKING:
    from parser.data.batch import Batch

__all__ = ["ConfidentArcs", "ConfidentArcsOptions", "kept_arcs"]


@dataclass(frozen=True)
class ConfidentArcsOptions:
    """The options of a ``confident_arcs`` term: ``threshold``, ``top_share``, ``tree`` (see
    ``ConfidentArcs``) and ``checkpoint``, the teacher the trainer loads and passes as ``teacher=``."""

    threshold: float | None = 0.9
    top_share: float | None = None
    tree: str = "mst"
    checkpoint: str | None = None


@register("confident_arcs", stream="unlabeled", needs=("teacher",), options=ConfidentArcsOptions)
@dataclass(frozen=True)
class ConfidentArcs:
    """Partial-tree self-training on the teacher's confident arcs (module docstring).

    ``teacher`` maps a batch to the teacher's ``ParserOutput`` (called under ``torch.no_grad``;
    its arcs must have the model's shape); ``threshold`` in ``[0, 1]`` and/or ``top_share`` in
    ``[0, 1]`` (None: not applied; at least one given). Logs ``loss``, ``kept`` (the share of the
    batch's words whose arc is kept) and ``confidence`` (the mean teacher marginal of the 1-best
    arcs)."""

    teacher: Callable[[Batch], ParserOutput]
    threshold: float | None = 0.9
    top_share: float | None = None
    tree: str = "mst"

    def __post_init__(self) -> None:
        if self.threshold is None and self.top_share is None:
            raise ValueError("ConfidentArcs: give threshold and/or top_share")
        for name in ("threshold", "top_share"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"ConfidentArcs: {name} must be in [0, 1], got {value}")
        if self.tree not in TREES:
            raise ValueError(f"ConfidentArcs: tree must be one of {TREES}, got {self.tree!r}")
        if not callable(self.teacher):
            raise ValueError(f"ConfidentArcs: teacher must be callable Batch -> ParserOutput, got {self.teacher!r}")  # noqa: TRY004 (project convention: bad input is a ValueError)

    @classmethod
    def from_options(cls, options: ConfidentArcsOptions, resources: Resources) -> ConfidentArcs:
        return cls(resources.teacher, threshold=options.threshold, top_share=options.top_share, tree=options.tree)

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        model = out.dist
        teacher_out, teacher = teacher_pass(self.teacher, batch, model, who="ConfidentArcs", whole=False)
        heads = teacher_tree(self.teacher, teacher_out, teacher, batch, tree=self.tree, who="ConfidentArcs")
        words = batch.word_mask.to(heads.device)
        confidence = teacher.arc_marginals.detach().gather(2, heads.clamp(min=0)[:, :, None]).squeeze(2)
        keep = kept_arcs(confidence, words, threshold=self.threshold, top_share=self.top_share)  # [B, N+1]
        positions = torch.arange(heads.shape[1], device=heads.device)
        # [B, dep, head]: a kept word takes only its teacher head; any other word any head.
        allowed = ~keep[:, :, None] | (positions[None, None, :] == heads[:, :, None])
        values = model.log_partition - model.restrict(allowed).log_partition  # [B]
        if bool(torch.isinf(values).any()):
            raise ValueError(
                f"ConfidentArcs: tree={self.tree!r} kept arcs of {int(torch.isinf(values).sum())} sentences "
                f"that no tree of the model's {type(model).__name__} contains (a crossing tree under "
                "model.crf=projective): use tree=projective"
            )
        values = torch.where(keep.any(-1), values, torch.zeros_like(values))  # exactly 0 when nothing is kept
        loss = per_token(values.sum(), batch)
        n_words = max(batch.n_tokens, 1)
        return Output(loss, detached(
            loss=loss,
            kept=keep.sum().to(loss.dtype) / n_words,
            confidence=torch.where(words, confidence, 0.0).sum().to(loss.dtype) / n_words,
        ))


def kept_arcs(confidence: Tensor, words: Tensor, *, threshold: float | None, top_share: float | None) -> Tensor:
    """``[B, N+1]`` bool: the words whose arc is kept, from ``confidence [B, N+1]`` (each word's
    arc marginal) and ``words [B, N+1]`` (real words): ``confidence >= threshold`` and, with
    ``top_share``, a rank below ``round(top_share * n)`` (half up) by decreasing confidence, ties
    by position."""
    keep = words.clone()
    if threshold is not None:
        keep &= confidence >= threshold
    if top_share is not None:
        ranked = torch.where(words, confidence, -1.0)
        order = torch.argsort(ranked, dim=1, descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
        quota = torch.floor(top_share * words.sum(1).to(torch.float64) + 0.5).to(torch.long)  # [B]
        keep &= rank < quota[:, None]
    return keep
