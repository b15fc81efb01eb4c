"""Minimum-risk training: the expected number of attachment errors under the tree CRF, per word.

Unlabeled: ``sum_d 1 - mu[d, gold_head(d)]`` (expected UAS errors). Labeled: ``sum_d 1 -
p(gold head and gold label of d)`` (expected LAS errors) from the labeled marginals of a joint
model or ``mu[d, h] * softmax(label_scores[d, h])[l]`` with a label classifier. Words without an
annotated head are left out; a word with a head but no label counts its unlabeled error. The
gradient is exact: autograd through the marginals (which are themselves a gradient of log Z).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from parser.objectives.base import Output, ParserOutput
from parser.objectives.gold import (
    annotated,
    at_gold_heads,
    at_labels,
    detached,
    gold_heads,
    gold_label_log_probs,
    gold_rels,
    per_token,
)
from parser.objectives.registry import register

if TYPE_CHECKING:
    from parser.data.batch import Batch


@register("risk", stream="labeled")
@dataclass(frozen=True)
class Risk:
    """Expected attachment errors per word of the batch; ``labeled=True`` for LAS errors.
    Logs ``loss`` and ``expected_errors`` (the same number, per word)."""

    labeled: bool = False

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        dist = out.dist
        heads = gold_heads(batch, who="Risk", size=dist.scores.shape[1])
        marginals = dist.marginals
        joint = marginals.dim() == 4
        arc_marginals = marginals.sum(-1) if joint else marginals  # [B, dep, head]
        correct = at_gold_heads(arc_marginals, heads)  # [B, dep]
        if self.labeled:
            if joint:
                rels = gold_rels(batch, who="Risk", n_labels=marginals.shape[-1])
                labeled = at_labels(at_gold_heads(marginals, heads), rels)
            elif out.label_scores is not None:
                label_log_probs, rels = gold_label_log_probs(
                    out.label_scores, batch, heads, who="Risk"
                )
                labeled = correct * label_log_probs.exp()
            else:
                raise ValueError("Risk(labeled=True) needs labeled scores or out.label_scores")
            correct = torch.where(rels >= 0, labeled, correct)
        errors = torch.where(annotated(batch, heads), 1.0 - correct, 0.0).sum()
        loss = per_token(errors, batch)
        return Output(loss, detached(loss=loss, expected_errors=loss))
