"""From subwords to words: windows over long sentences, and a word's vector from its subwords.

A sentence of ``n`` subwords (special tokens not counted) runs through the transformer in
windows of at most ``size`` subwords that overlap by ``overlap``; each subword takes its state
from the window where it sits farthest from an edge (most context on both sides). Pure index
arithmetic, no transformer: tested against hand-worked examples.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from parser.config import Pooling

__all__ = ["ScalarMix", "pool_words", "split_windows"]


def split_windows(n: int, *, size: int, overlap: int) -> tuple[list[tuple[int, int]], list[int]]:
    """``(windows, chosen)``: the ``[start, end)`` windows over ``n`` subwords and, per subword,
    the index of the window it is read from.

    >>> split_windows(5, size=8, overlap=2)
    ([(0, 5)], [0, 0, 0, 0, 0])
    >>> split_windows(10, size=6, overlap=4)
    ([(0, 6), (2, 8), (4, 10)], [0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"window size={size}, overlap={overlap}: need size >= 1, 0 <= overlap < size")
    if n <= size:
        return [(0, n)], [0] * n
    step = size - overlap
    starts = list(range(0, n - size, step)) + [n - size]
    windows = [(start, start + size) for start in starts]
    chosen = []
    for i in range(n):
        margins = [min(i - s, e - 1 - i) if s <= i < e else -1 for s, e in windows]
        chosen.append(max(range(len(windows)), key=lambda w: (margins[w], -w)))
    return windows, chosen


def pool_words(pieces: Tensor, owner: Sequence[int], n_words: int, *, pooling: Pooling | str) -> Tensor:
    """Word vectors ``[n_words, ...]`` from subword vectors ``pieces`` ``[n_pieces, ...]``;
    ``owner[k]`` is the word (0-based) of subword ``k``, every word owning at least one.

    >>> pieces = torch.tensor([[1.0], [3.0], [5.0]])
    >>> pool_words(pieces, [0, 0, 1], 2, pooling="first").tolist()
    [[1.0], [5.0]]
    >>> pool_words(pieces, [0, 0, 1], 2, pooling="mean").tolist()
    [[2.0], [5.0]]
    """
    owner_t = torch.as_tensor(list(owner), dtype=torch.long, device=pieces.device)
    if owner_t.numel() != pieces.shape[0]:
        raise ValueError(f"owner has {owner_t.numel()} entries for {pieces.shape[0]} subwords")
    counts = torch.bincount(owner_t, minlength=n_words)
    if counts.numel() != n_words or bool((counts == 0).any()):
        raise ValueError(f"owner {list(owner)}: every one of the {n_words} words needs a subword")
    if Pooling(pooling) is Pooling.first:
        first = torch.cumsum(counts, 0) - counts  # owner is sorted: a word's pieces are contiguous
        return pieces[first]
    sums = pieces.new_zeros(n_words, *pieces.shape[1:]).index_add(0, owner_t, pieces)
    return sums / counts.to(pieces.dtype).view(-1, *[1] * (pieces.dim() - 1))


class ScalarMix(torch.nn.Module):
    """``gamma * sum_l softmax(w)_l h_l`` over the layer axis of ``[..., L, H]`` (Peters et al.
    2018; the weights start equal, so the mix starts as the mean of the layers)."""

    def __init__(self, n_layers: int) -> None:
        super().__init__()
        self.weights = torch.nn.Parameter(torch.zeros(n_layers))
        self.gamma = torch.nn.Parameter(torch.ones(()))

    def forward(self, layers: Tensor) -> Tensor:
        """layers: ``[..., L, H]`` -> ``[..., H]``."""
        if layers.shape[-2] != self.weights.shape[0]:
            raise ValueError(f"ScalarMix of {self.weights.shape[0]} layers got shape {tuple(layers.shape)}")
        mix = torch.softmax(self.weights, 0).to(layers.dtype)
        return self.gamma * torch.einsum("...lh,l->...h", layers, mix)
