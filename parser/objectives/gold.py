"""Gold annotation checks and gathers shared by the supervised objectives.

Convention: ``heads[b, dep]`` / ``rels[b, dep]`` are ``-1`` where a word is unannotated; position
0 (ROOT) and padding are ignored. Losses are normalised by the number of words of the batch
(``batch.n_tokens``), annotated or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from parser.data.batch import Batch


def per_token(total: Tensor, batch: Batch) -> Tensor:
    """A summed quantity divided by the number of words in the batch (at least 1)."""
    return total / max(batch.n_tokens, 1)


def detached(**values: Tensor) -> dict[str, Tensor]:
    """Scalars for the logs, detached from the graph."""
    return {key: value.detach() for key, value in values.items()}


def gold_heads(batch: Batch, *, who: str, size: int) -> Tensor:
    """Validated ``[B, N+1]`` gold heads of a labeled batch whose scores have ``size = N+1``."""
    if batch.heads is None:
        raise ValueError(f"{who} needs a labeled batch, but batch.heads is None (unlabeled text)")
    heads = batch.heads
    if heads.shape != (batch.size, size):
        raise ValueError(f"{who}: batch.heads has shape {tuple(heads.shape)}, expected {(batch.size, size)}")
    words = batch.word_mask
    bad = words & ((heads < -1) | (heads > batch.lengths[:, None]) | (heads == _positions(heads)))
    if bool(bad.any()):
        b, dep = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"{who}: batch.heads[{b}, {dep}] = {int(heads[b, dep])} is not a head of word {dep} "
            f"(sentence length {int(batch.lengths[b])}; -1 marks an unannotated word)"
        )
    return heads


def gold_rels(batch: Batch, *, who: str, n_labels: int) -> Tensor:
    """Validated ``[B, N+1]`` gold relation ids (``-1`` unannotated) for ``n_labels`` labels."""
    if batch.rels is None:
        raise ValueError(f"{who} needs relation labels, but batch.rels is None")
    rels = batch.rels
    if rels.shape != batch.heads.shape:
        raise ValueError(f"{who}: batch.rels has shape {tuple(rels.shape)}, heads {tuple(batch.heads.shape)}")
    bad = batch.word_mask & ((rels < -1) | (rels >= n_labels))
    if bool(bad.any()):
        b, dep = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{who}: batch.rels[{b}, {dep}] = {int(rels[b, dep])} not in [-1, {n_labels})")
    return rels


def annotated(batch: Batch, heads: Tensor) -> Tensor:
    """``[B, N+1]`` True on real words whose head is annotated."""
    return batch.word_mask & (heads >= 0)


def at_gold_heads(values: Tensor, heads: Tensor) -> Tensor:
    """``values [B, dep, head, ...]`` taken at each word's gold head -> ``[B, dep, ...]``
    (unannotated words read head 0; mask them afterwards)."""
    index = heads.clamp(min=0)
    index = index.view(*index.shape, 1, *([1] * (values.dim() - 3)))
    index = index.expand(*heads.shape, 1, *values.shape[3:])
    return values.gather(2, index).squeeze(2)


def at_labels(values: Tensor, rels: Tensor) -> Tensor:
    """``values [B, dep, L]`` at each word's gold label -> ``[B, dep]`` (-1 reads label 0)."""
    return values.gather(-1, rels.clamp(min=0).unsqueeze(-1)).squeeze(-1)


def gold_label_log_probs(
    label_scores: Tensor, batch: Batch, heads: Tensor, *, who: str
) -> tuple[Tensor, Tensor]:
    """Label logits ``label_scores [B, dep, head, L]`` -> ``[B, dep]`` log-softmax (over labels)
    of each word's gold label at its gold head, and the validated ``[B, N+1]`` gold rels
    (unannotated heads or labels read index 0; mask them with ``annotated`` and ``rels >= 0``)."""
    if label_scores.dim() != 4 or label_scores.shape[:3] != (*heads.shape, heads.shape[1]):
        raise ValueError(
            f"{who}: label_scores must be [B, dep, head, L] matching heads {tuple(heads.shape)}, "
            f"got {tuple(label_scores.shape)}"
        )
    rels = gold_rels(batch, who=who, n_labels=label_scores.shape[-1])
    log_probs = at_gold_heads(label_scores, heads).log_softmax(-1)  # [B, dep, L]
    return at_labels(log_probs, rels), rels


def label_cross_entropy(label_scores: Tensor, batch: Batch, heads: Tensor, *, who: str) -> Tensor:
    """Summed cross-entropy of the label logits ``label_scores [B, dep, head, L]`` on the gold
    arcs of words whose head and label are both annotated (a scalar)."""
    log_probs, rels = gold_label_log_probs(label_scores, batch, heads, who=who)
    mask = annotated(batch, heads) & (rels >= 0)
    return -torch.where(mask, log_probs, 0.0).sum()


def _positions(heads: Tensor) -> Tensor:
    return torch.arange(heads.shape[1], device=heads.device).expand_as(heads)
