"""Supervised likelihood of the gold trees, per word of the batch.

- Joint labels (``dist`` over labeled trees): ``-log p(heads, rels)``.
- Classifier labels (``out.label_scores`` given, ``dist`` unlabeled): ``-log p(heads)`` plus the
  label cross-entropy on the gold arcs.
- Partial annotation (``-1`` heads or rels): ``-(log Z[gold-consistent trees] - log Z)``, the
  restricted partition function from ``dist.restrict`` (or, for unannotated labels of a joint
  model, a distribution with the inconsistent labels removed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from parser.objectives.base import Output, ParserOutput
from parser.objectives.gold import detached, gold_heads, gold_rels, label_cross_entropy, per_token
from parser.objectives.registry import register

if TYPE_CHECKING:
    from parser.data.batch import Batch


@register("likelihood", stream="labeled")
@dataclass(frozen=True)
class Likelihood:
    """Negative log-likelihood of the gold trees (and labels), summed and divided by the
    number of words in the batch. Logs ``loss``, ``tree_nll`` and, with a classifier,
    ``label_nll`` (each per word)."""

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        dist = out.dist
        heads = gold_heads(batch, who="Likelihood", size=dist.scores.shape[1])
        joint = dist.scores.dim() == 4
        if joint and out.label_scores is not None:
            raise ValueError("Likelihood: labels are either joint (labeled scores) or a classifier, not both")
        rels = gold_rels(batch, who="Likelihood", n_labels=dist.scores.shape[-1]) if joint else None
        tree_nll = _tree_nll(dist, batch, heads, rels).sum()
        logs = {}
        loss = tree_nll
        if out.label_scores is not None:
            label_nll = label_cross_entropy(out.label_scores, batch, heads, who="Likelihood")
            loss = loss + label_nll
            logs["label_nll"] = per_token(label_nll, batch)
        loss = per_token(loss, batch)
        return Output(loss, detached(loss=loss, tree_nll=per_token(tree_nll, batch), **logs))


def _tree_nll(dist, batch: Batch, heads: Tensor, rels: Tensor | None) -> Tensor:
    """``[B]`` -log p(gold-consistent trees)."""
    words = batch.word_mask
    complete = bool((heads[words] >= 0).all()) and (rels is None or bool((rels[words] >= 0).all()))
    if complete:
        log_prob = dist.log_prob(heads.clamp(min=0), labels=None if rels is None else rels.clamp(min=0))
        return -log_prob
    size = heads.shape[1]
    positions = torch.arange(size, device=heads.device)
    # [B, dep, head]: an unannotated word may take any head; an annotated one only its gold head.
    allowed = (heads[:, :, None] == -1) | (positions[None, None, :] == heads[:, :, None])
    if rels is None:
        restricted = dist.restrict(allowed)
    else:
        labels = torch.arange(dist.scores.shape[-1], device=heads.device)
        label_ok = (rels[:, :, None] == -1) | (labels == rels[:, :, None])  # [B, dep, L]
        allowed = allowed[..., None] & label_ok[:, :, None, :]  # [B, dep, head, L]
        masked = dist.scores.masked_fill(~allowed, float("-inf"))
        restricted = type(dist)(masked, dist.lengths, single_root=dist.single_root)
    return dist.log_partition - restricted.log_partition

