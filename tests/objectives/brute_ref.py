"""Brute-force references for the objective tests: every (tree, labels) structure of one small
sentence with its differentiable log-weight. Independent of TreeCRF."""

from __future__ import annotations

import itertools

import torch
from torch import Tensor

from tests.structs.brute import all_trees


def structures(scores: Tensor, n: int, *, single_root: bool):
    """``scores [N+1, N+1]`` or labeled ``[N+1, N+1, L]`` of one sentence ->
    ``(list of (heads, labels or None), log_weights [T])``; heads/labels over words 1..n."""
    trees = all_trees(n, single_root=single_root)
    deps = torch.arange(1, n + 1)
    items, weights = [], []
    for tree in trees:
        heads = torch.tensor(tree)
        if scores.dim() == 2:
            items.append((tree, None))
            weights.append(scores[deps, heads].sum())
            continue
        for labels in itertools.product(range(scores.shape[-1]), repeat=n):
            items.append((tree, labels))
            weights.append(scores[deps, heads, torch.tensor(labels)].sum())
    return items, torch.stack(weights)


def probabilities(scores: Tensor, n: int, *, single_root: bool):
    """``(items, p [T])`` for one sentence."""
    items, log_weights = structures(scores, n, single_root=single_root)
    return items, log_weights.softmax(0)
