"""Confidence of predicted trees, from the model's tree CRF: per word the marginal probability of
the head written and of its relation given that head, per sentence the tree's log-probability,
the distribution's entropy and the expected number of correct heads.

The head written may differ from the maximum spanning tree (projective decoding, the punct/cc
re-attachment): the marginals are read at the head actually written, never at the MST's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from parser.data.misc import DEPREL_PROB, HEAD_PROB
from parser.models.decoder import N_SPECIAL_RELS
from parser.structs import ParserOutput

__all__ = ["SentenceConfidence", "batch_confidence", "confidence_annotations"]

DECIMALS = 4


@dataclass(frozen=True)
class SentenceConfidence:
    """``head_probs``: per word p(head(word) = written head); ``deprel_probs``: per word
    p(written relation | written arc) (None for a model without relations); ``tree_logprob``:
    log p(written heads) with relations summed out; ``tree_entropy``: the CRF's entropy (nats,
    over labeled trees for joint labels)."""

    head_probs: list[float]
    deprel_probs: list[float] | None
    tree_logprob: float
    tree_entropy: float

    @property
    def expected_correct(self) -> float:
        """Expected number of correct heads of the written tree: the sum of its arcs' marginals."""
        return float(sum(self.head_probs))


@torch.no_grad()
def batch_confidence(out: ParserOutput, heads: Tensor, rels: Tensor | None) -> list[SentenceConfidence]:
    """One :class:`SentenceConfidence` per row of the batch, for the decoded ``heads [B, N+1]``
    and ``rels [B, N+1]`` (None when unlabeled) of ``out`` (``ParserModel.decode``)."""
    dist = out.dist
    index = heads.clamp(min=0)
    arc = dist.arc_marginals.gather(2, index[..., None]).squeeze(2)  # [B, dep]
    label = None
    if rels is not None:
        scores = out.labels_on(index)
        if scores is not None:  # classifier: softmax over the relations it may predict
            scores = scores.clone()
            scores[..., :N_SPECIAL_RELS] = float("-inf")
            label = scores.softmax(-1).gather(2, rels[..., None]).squeeze(2)
        else:  # joint: p(label | arc) = labeled marginal / arc marginal
            marginals = dist.marginals
            rows = marginals.gather(2, index[..., None, None].expand(
                *index.shape, 1, marginals.shape[-1])).squeeze(2)
            joint = rows.gather(2, rels[..., None]).squeeze(2)
            label = torch.where(arc > 0, joint / arc.clamp(min=torch.finfo(arc.dtype).tiny),
                                torch.zeros_like(joint))
    log_prob = dist.log_prob(heads).tolist()
    entropy = dist.entropy().tolist()
    result = []
    for b, n in enumerate(dist.lengths.tolist()):
        result.append(SentenceConfidence(
            head_probs=arc[b, 1 : n + 1].tolist(),
            deprel_probs=None if label is None else label[b, 1 : n + 1].tolist(),
            tree_logprob=log_prob[b], tree_entropy=entropy[b]))
    return result


def confidence_annotations(
    confidence: Sequence[SentenceConfidence],
) -> tuple[list[list[dict[str, str]]], list[dict[str, str]]]:
    """``(misc, comments)`` for :func:`parser.data.conllu_io.write_conllu`: per word
    ``HeadProb`` / ``DeprelProb`` and per sentence ``tree_logprob``, ``tree_entropy`` and
    ``expected_correct``, with 4 decimals.

    >>> c = SentenceConfidence([0.97, 0.5], [0.91, 1.0], -0.7, 0.25)
    >>> misc, comments = confidence_annotations([c])
    >>> misc[0][0], comments[0]["expected_correct"]
    ({'HeadProb': '0.9700', 'DeprelProb': '0.9100'}, '1.4700')
    """
    misc, comments = [], []
    for sentence in confidence:
        words = []
        for i, head in enumerate(sentence.head_probs):
            entry = {HEAD_PROB: _fixed(head)}
            if sentence.deprel_probs is not None:
                entry[DEPREL_PROB] = _fixed(sentence.deprel_probs[i])
            words.append(entry)
        misc.append(words)
        comments.append({"tree_logprob": _fixed(sentence.tree_logprob),
                         "tree_entropy": _fixed(sentence.tree_entropy),
                         "expected_correct": _fixed(sentence.expected_correct)})
    return misc, comments


def _fixed(value: float) -> str:
    text = f"{value:.{DECIMALS}f}"
    return "0.0000" if text == "-0.0000" else text  # rounding noise around an exact 0
