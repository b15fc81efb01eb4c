"""Brute-force enumeration of dependency trees, the reference every structure test compares with.

Only for tiny sentences: there are (N+1)^(N-1) rooted trees on N words.
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor


def is_tree(heads: tuple[int, ...]) -> bool:
    """``heads[d-1]`` is the head of word ``d`` (0 = ROOT); True when every word reaches ROOT."""
    n = len(heads)
    for start in range(1, n + 1):
        seen, node = set(), start
        while node != 0:
            if node in seen:
                return False
            seen.add(node)
            node = heads[node - 1]
    return True


def all_trees(n: int, *, single_root: bool) -> list[tuple[int, ...]]:
    """Every head assignment of ``n`` words that forms a tree rooted at 0."""
    trees = []
    for heads in itertools.product(range(n + 1), repeat=n):
        if any(h == d for d, h in enumerate(heads, start=1)):
            continue
        if single_root and sum(h == 0 for h in heads) != 1:
            continue
        if is_tree(heads):
            trees.append(heads)
    return trees


def tree_log_weights(scores: Tensor, n: int, trees: list[tuple[int, ...]]) -> Tensor:
    """``scores [N+1, N+1]`` (dep, head) of one sentence -> ``[T]`` summed arc scores per tree."""
    deps = torch.arange(1, n + 1)
    return torch.stack([scores[deps, torch.tensor(t)].sum() for t in trees])


def enumerate_distribution(scores: Tensor, n: int, *, single_root: bool):
    """Exact tree distribution of one unlabeled sentence.

    Returns ``(trees, log_weights [T], log_z)``; trees as head tuples over words ``1..n``.
    """
    trees = all_trees(n, single_root=single_root)
    log_weights = tree_log_weights(scores, n, trees)
    return trees, log_weights, torch.logsumexp(log_weights, 0)


def heads_tensor(tree: tuple[int, ...], size: int) -> Tensor:
    """A head tuple as a ``[size]`` heads row (position 0 = ROOT, padding = 0)."""
    heads = torch.zeros(size, dtype=torch.long)
    heads[1 : len(tree) + 1] = torch.tensor(tree)
    return heads
