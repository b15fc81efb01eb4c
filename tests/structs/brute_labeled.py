"""Brute-force enumeration of labeled dependency trees (one label per arc), for tiny sentences."""

from __future__ import annotations

import itertools

import torch
from torch import Tensor

from tests.structs.brute import all_trees


def enumerate_labeled(scores: Tensor, n: int, *, single_root: bool):
    """``scores [N+1, N+1, L]`` (dep, head, label) of one sentence.

    Returns ``(structures, log_weights [T], log_z)``; structures as ``(heads, labels)`` tuples over
    words ``1..n``.
    """
    n_labels = scores.shape[-1]
    deps = torch.arange(1, n + 1)
    structures, weights = [], []
    for heads in all_trees(n, single_root=single_root):
        for labels in itertools.product(range(n_labels), repeat=n):
            structures.append((heads, labels))
            weights.append(scores[deps, torch.tensor(heads), torch.tensor(labels)].sum())
    log_weights = torch.stack(weights)
    return structures, log_weights, torch.logsumexp(log_weights, 0)
