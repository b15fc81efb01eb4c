"""Pretrained word vectors as an input of the biaffine scorer's encoder (``model.vectors``).

The rows (``[R, D]``, R counting the vocabulary's PAD, UNK and ROOT, which are zero) are the
ones :func:`parser.data.vectors.read_vectors` kept; the words are ``Vocabularies.vectors``, and
``Batch.vectors`` holds each word's row id. A trained linear map takes a row to the word
embedding's width, where it is added to the word and character embeddings. Frozen
(``finetune=False``) the rows are a parameter without gradient: stored in the checkpoint, left
out of the optimiser, the weight average and DDP's per-step buffer broadcast.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["WordVectors"]


class WordVectors(nn.Module):
    """Row ids ``[B, N+1]`` -> ``[B, N+1, n_out]``: ``project(rows[ids])``.

    >>> vectors = WordVectors(n_rows=5, dim=3, n_out=2, finetune=False)
    >>> vectors(torch.tensor([[2, 4, 0]])).shape
    torch.Size([1, 3, 2])
    >>> vectors.rows.requires_grad
    False
    """

    def __init__(self, *, n_rows: int, dim: int, n_out: int, finetune: bool,
                 rows: Tensor | None = None) -> None:
        super().__init__()
        if n_rows < 3 or dim < 1:
            raise ValueError(f"model.vectors: {n_rows} rows of dimension {dim}; need at least "
                             "PAD, UNK and ROOT and dimension >= 1")
        if rows is None:
            rows = torch.zeros(n_rows, dim)
        elif tuple(rows.shape) != (n_rows, dim):
            raise ValueError(f"model.vectors: rows of shape {tuple(rows.shape)}, the vocabulary "
                             f"says ({n_rows}, {dim})")
        self.finetune = bool(finetune)
        self.rows = nn.Parameter(rows.float(), requires_grad=self.finetune)
        self.project = nn.Linear(dim, n_out)

    def forward(self, ids: Tensor) -> Tensor:
        if ids is None:
            raise ValueError("batch.vectors is None but the parser reads pretrained vectors: "
                             "encode the sentences with the checkpoint's vocabularies")
        if bool(((ids < 0) | (ids >= self.rows.shape[0])).any()):
            raise ValueError(f"batch.vectors holds ids outside [0, {self.rows.shape[0]})")
        return self.project(nn.functional.embedding(ids, self.rows, padding_idx=0))
