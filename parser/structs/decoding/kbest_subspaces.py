"""The best tree of many constrained tree sets at once: the oracle of the k-best search.

A tree of ``n`` words is a sequence of ``(head, label)`` *pairs*, one per word, each pair coded as
``head * L + label`` (``L = 1`` when unlabeled). A :class:`Subspace` is a set of trees given by
an interval of pair codes for each word (a fixed word has an interval of one). Its best tree is the maximum spanning tree (Chu-Liu/Edmonds with
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
    """Trees of one sentence whose word ``d`` has a pair code in ``low[d] <= pair < high[d]``
    (index 0 = ROOT, unused)."""

    sentence: int
    low: tuple[int, ...]
    high: tuple[int, ...]

    def lower_key(self) -> tuple[int, ...]:
        """A lexicographic lower bound of the pair sequences of the trees in the set: the leading
        fixed words, then the first free word's ``low``, then -1."""
        key = []
        for word in range(1, len(self.low)):
            key.append(self.low[word])
            if self.high[word] != self.low[word] + 1:
                break
        return (*key, *(-1,) * (len(self.low) - 1 - len(key)))


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
    word without ROOT. Reachability between words by boolean matrix squaring, O(n^3 log n); paths
    only get longer, so a set found to have a tree is dropped from the next squarings (most are
    after one or two).
    """
    size = arcs.shape[1]
    words = word_mask(lengths, size)[:, 1:]  # [P, word]
    root_child = arcs[:, 1:, 0] & words  # [P, word]
    # reach[p, a, b]: word b is a descendant (or a itself) of word a, by paths of length <= 2**i.
    reach = arcs[:, 1:, 1:].transpose(1, 2).float()
    reach = reach + torch.eye(size - 1, dtype=reach.dtype, device=reach.device)
    found = torch.zeros(arcs.shape[0], dtype=torch.bool, device=arcs.device)
    todo = torch.arange(arcs.shape[0], device=arcs.device)
    for step in range(max(1, (size - 2).bit_length()) + 1):
        if step:
            reach = torch.bmm(reach, reach).clamp_(max=1.0)
        known = reach > 0
        if single_root:
            spans = (known | ~words[todo, None, :]).all(dim=2)  # [P', word]: reaches every word
            now = (root_child[todo] & spans).any(dim=1)
        else:
            reached = (root_child[todo, :, None] & known).any(dim=1)  # [P', word]
            now = (reached | ~words[todo]).all(dim=1)
        found[todo[now]] = True
        todo, reach = todo[~now], reach[~now]
        if not len(todo):
            break
    return found


def _allowed_pairs(subspaces: list[Subspace], size: int, n_labels: int, device) -> Tensor:
    """``[P, dep, pair]`` bool: what each subspace's constraints allow (scores not consulted)."""
    low = torch.tensor([(*space.low, *(0,) * (size - len(space.low))) for space in subspaces],
                       dtype=torch.long, device=device)
    high = torch.tensor([(*space.high, *(0,) * (size - len(space.high))) for space in subspaces],
                        dtype=torch.long, device=device)
    codes = torch.arange(size * n_labels, device=device)
    return (codes >= low[:, :, None]) & (codes < high[:, :, None])


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
    for ok, n, row, value in zip(feasible.tolist(), sub_lengths.tolist(), pairs.tolist(),
                                 values.tolist()):
        if not ok:
            solutions.append(Solution(None, NEG_INF))
            continue
        solutions.append(Solution((0, *row[1 : n + 1]), math.fsum(value[1 : n + 1])))
    return solutions
