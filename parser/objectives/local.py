"""Dozat & Manning's (2017) local loss: for each word, a softmax over its candidate heads (no tree
constraint), plus the label cross-entropy at the gold head. The baseline the tree CRF's cost is
measured against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from parser.objectives.base import Output, ParserOutput
from parser.objectives.gold import (
    annotated,
    at_gold_heads,
    detached,
    gold_heads,
    label_cross_entropy,
    per_token,
)
from parser.objectives.registry import register

if TYPE_CHECKING:
    from parser.data.batch import Batch


@register("local", stream="labeled")
@dataclass(frozen=True)
class LocalHeadCrossEntropy:
    """Per-word head cross-entropy over ``dist.scores`` (heads outside the sentence and the word
    itself excluded), summed over annotated words and divided by the number of words. With joint
    labeled scores the head logit is the log-sum-exp over labels and the label term is the
    softmax over labels at the gold head, so the sum is ``-log softmax`` over (head, label) pairs.
    Logs ``loss``, ``head_nll`` and ``label_nll`` (per word)."""

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        scores = out.dist.scores
        heads = gold_heads(batch, who="LocalHeadCrossEntropy", size=scores.shape[1])
        joint = scores.dim() == 4
        arc_scores = scores.logsumexp(-1) if joint else scores  # [B, dep, head]
        head_log_probs = _candidate_heads(arc_scores, batch.lengths).log_softmax(-1)
        mask = annotated(batch, heads)
        head_nll = -torch.where(mask, at_gold_heads(head_log_probs, heads), 0.0).sum()
        loss, logs = head_nll, {"head_nll": per_token(head_nll, batch)}
        # Joint scores are label logits too: softmax over labels at the gold head.
        label_scores = scores if joint else out.label_scores
        if label_scores is not None:
            label_nll = label_cross_entropy(label_scores, batch, heads, who="LocalHeadCrossEntropy")
            loss = loss + label_nll
            logs["label_nll"] = per_token(label_nll, batch)
        loss = per_token(loss, batch)
        return Output(loss, detached(loss=loss, **logs))


def _candidate_heads(arc_scores: Tensor, lengths: Tensor) -> Tensor:
    """``[B, dep, head]`` scores with heads beyond the sentence and self-loops set to -inf."""
    size = arc_scores.shape[1]
    positions = torch.arange(size, device=arc_scores.device)
    invalid = (positions[None, None, :] > lengths[:, None, None]) | (
        positions[:, None] == positions[None, :]
    )
    # Row 0 and padding rows keep head 0 so that their softmax stays finite (they are masked).
    invalid = invalid & (positions[None, None, :] != 0)
    return arc_scores.masked_fill(invalid, float("-inf"))
