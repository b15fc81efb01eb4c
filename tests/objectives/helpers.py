"""Small batches and scores for the objective tests."""

from __future__ import annotations

import torch

from parser.data.batch import Batch
from parser.structs import TreeCRF

__all__ = ["TreeCRF", "make_batch", "random_scores"]


def make_batch(lengths, *, heads=None, rels=None, upos=None, index=None) -> Batch:
    """A batch of ``len(lengths)`` sentences, ``N = max(lengths)``; heads/rels/upos given as
    per-sentence lists over words 1..n (padded with 0, ROOT position 0)."""
    lengths = torch.tensor(lengths)
    size, width = len(lengths), int(lengths.max()) + 1

    def pad(rows, fill=0):
        out = torch.full((size, width), fill, dtype=torch.long)
        for b, row in enumerate(rows):
            out[b, 1 : len(row) + 1] = torch.tensor(row, dtype=torch.long)
        return out

    words = (torch.arange(width)[None, :] <= lengths[:, None]).long() * 5
    return Batch(
        words=words,
        chars=torch.zeros(size, width, 1, dtype=torch.long),
        upos=pad(upos) if upos is not None else words.clone(),
        lengths=lengths,
        heads=None if heads is None else pad(heads),
        rels=None if rels is None else pad(rels),
        index=None if index is None else torch.tensor(index),
    )


def random_scores(lengths, *, labels=None, seed=0, dtype=torch.float64, scale=1.0):
    """``[B, N+1, N+1]`` (or ``[..., L]``) Gaussian scores requiring grad."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths) + 1
    shape = (len(lengths), width, width) + (() if labels is None else (labels,))
    return (scale * torch.randn(shape, generator=generator, dtype=dtype)).requires_grad_()
