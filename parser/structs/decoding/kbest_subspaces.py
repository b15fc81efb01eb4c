"""The best tree of many constrained tree sets at once: the oracle of the k-best search.

A tree of ``n`` words is a sequence of ``(head, label)`` *pairs*, one per word, each pair coded as
``head * L + label`` (``L = 1`` when unlabeled). A :class:`Subspace` is a set of trees given by
constraints on the pairs: some words' pairs fixed, some pairs excluded, and an exclusive upper
bound on each word's pair code. Its best tree is the maximum spanning tree (Chu-Liu/Edmonds with
the root constraint, :func:`.mst.maximum_spanning_tree`) over the best allowed label of each arc.

:func:`solve` takes subspaces of several sentences, batches them (chunked to bound memory), first
decides exactly which ones hold a tree at all (reachability from ROOT by transitive closure), and
decodes only those, so an empty subspace is an answer, not an exception.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from parser.structs.common import NEG_INF, word_mask
from parser.structs.decoding.mst import maximum_spanning_tree

__all__ = ["Subspace", "has_tree", "solve"]

# Elements of one chunk's ``[P, N+1, N+1, L]`` score copy (float64: 8 bytes each).
_CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Subspace:
    """Trees of one sentence obeying constraints on its pairs (index = word, 0 = ROOT, unused).

    fixed: per word, the only pair allowed, or -1. bound: per word, pairs must be below it (None:
    no bound). excluded: ``(word, pair)`` pairs forbidden.
    """

    sentence: int
    fixed: tuple[int, ...]
    excluded: tuple[tuple[int, int], ...] = ()
    bound: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Solution:
    """A subspace's best tree: ``pairs`` per word (position 0 unused, 0) and its score, or
    ``pairs = None`` and score ``-inf`` when the subspace holds no tree."""

    pairs: tuple[int, ...] | None
    score: float


def has_tree(arcs: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor:
    """``[P]`` whether the allowed arcs ``arcs [P, dep, head]`` (bool) contain a spanning tree
    rooted at 0 (with exactly one root child when ``single_root``).

    Multi-root: every word is reached from ROOT. Single-root: some allowed root child reaches every
    word without ROOT. Reachability between words by boolean matrix squaring, O(n^3 log n).
    """
    size = arcs.shape[1]
    words = word_mask(lengths, size)[:, 1:]  # [P, word]
    # reach[p, a, b]: word b is a descendant (or a itself) of word a.
    reach = arcs[:, 1:, 1:].transpose(1, 2).float()
    reach = reach + torch.eye(size - 1, dtype=reach.dtype, device=reach.device)
    for _ in range(max(1, (size - 2).bit_length())):
        reach = torch.bmm(reach, reach).clamp_(max=1.0)
    reach = reach > 0
    root_child = arcs[:, 1:, 0] & words  # [P, word]
    if single_root:
        spans = (reach | ~words[:, None, :]).all(dim=2)  # [P, word]: reaches every word
        return (root_child & spans).any(dim=1)
    reached = (root_child[:, :, None] & reach).any(dim=1)  # [P, word]
    return (reached | ~words).all(dim=1)


def _allowed_pairs(subspaces: list[Subspace], size: int, n_labels: int, device) -> Tensor:
    """``[P, dep, pair]`` bool: what each subspace's constraints allow (scores not consulted)."""
    count = len(subspaces)
    fixed = torch.full((count, size), -1, dtype=torch.long)
    bound = torch.full((count, size), size * n_labels, dtype=torch.long)
    excluded = []
    for p, space in enumerate(subspaces):
        fixed[p, : len(space.fixed)] = torch.tensor(space.fixed)
        if space.bound is not None:
            bound[p, : len(space.bound)] = torch.tensor(space.bound)
        excluded.extend((p, word, pair) for word, pair in space.excluded)
    fixed, bound = fixed.to(device), bound.to(device)
    codes = torch.arange(size * n_labels, device=device)
    allowed = ((fixed[:, :, None] < 0) | (codes == fixed[:, :, None])) & (codes < bound[:, :, None])
    if excluded:
        p, word, pair = torch.tensor(excluded, device=device).unbind(1)
        allowed[p, word, pair] = False
    return allowed


def solve(scores: Tensor, lengths: Tensor, subspaces: list[Subspace], *,
          single_root: bool) -> list[Solution]:
    """Best tree of each subspace, ties broken as :func:`maximum_spanning_tree` breaks them.

    scores: float64 ``[B, dep, head, L]`` with -inf off arcs and on forbidden pairs; lengths
    ``[B]``. Tree scores are exactly rounded sums (``math.fsum``) of the float64 pair scores.
    """
    size, n_labels = scores.shape[1], scores.shape[3]
    step = max(1, _CHUNK_ELEMENTS // (size * size * n_labels))
    solutions = []
    for start in range(0, len(subspaces), step):
        solutions.extend(_solve_chunk(scores, lengths, subspaces[start : start + step],
                                      single_root=single_root))
    return solutions


def _solve_chunk(scores: Tensor, lengths: Tensor, subspaces: list[Subspace], *,
                 single_root: bool) -> list[Solution]:
    size, n_labels = scores.shape[1], scores.shape[3]
    sentence = torch.tensor([space.sentence for space in subspaces], device=scores.device)
    allowed = _allowed_pairs(subspaces, size, n_labels, scores.device)
    pair_scores = scores[sentence].reshape(len(subspaces), size, size * n_labels)
    pair_scores = pair_scores.masked_fill(~allowed, NEG_INF).reshape(-1, size, size, n_labels)
    best, label = pair_scores.max(dim=-1)  # first maximum: the lowest label
    sub_lengths = lengths[sentence]
    feasible = has_tree(torch.isfinite(best), sub_lengths, single_root=single_root)
    heads = torch.zeros(len(subspaces), size, dtype=torch.long, device=scores.device)
    if bool(feasible.any()):
        heads[feasible] = maximum_spanning_tree(best[feasible], sub_lengths[feasible],
                                                single_root=single_root)
    pairs = heads * n_labels + label.gather(2, heads[:, :, None]).squeeze(2)
    values = best.gather(2, heads[:, :, None]).squeeze(2)
    solutions = []
    for p, (ok, row, value) in enumerate(zip(feasible.tolist(), pairs.tolist(), values.tolist())):
        n = int(sub_lengths[p])
        if not ok:
            solutions.append(Solution(None, NEG_INF))
            continue
        solutions.append(Solution((0, *row[1 : n + 1]), math.fsum(value[1 : n + 1])))
    return solutions
