"""The k best dependency trees of each sentence, exactly, best first.

Order (a total order, so the answer is unique): tree score descending; equal scores by the sequence
of ``(head, label)`` of words ``1..n`` in lexicographic order, ascending (unlabeled: the heads in
lexicographic order). The score of a labeled tree is the sum of its (dep, head, label) scores, so the
k best labeled trees are the k best arborescences of the multigraph with one parallel arc per label.

Rank 1 is the maximum spanning tree; it is ``argmax()``'s tree whenever the best tree is unique.
Under ties :func:`.mst.maximum_spanning_tree` returns some best tree by its own rule, rank 1 the
first best tree in the order above (same score).

Algorithm: Lawler's (1972) partition scheme, the frame of Camerini, Fratta & Maffioli (1980) and of
Zmigrod, Vieira & Cotterell (2021): a priority queue of disjoint tree sets (:class:`.Subspace`).
Opening the best set queues its best tree on its own and splits the rest by the first word ``d``
that differs from that tree (Lawler's split) and, to keep ties exact, by whether ``d``'s
(head, label) is below or above the tree's: two sets per unfixed word, each an interval of pair
codes per word. Sets are queued with an upper bound of their score and a lexicographic lower bound
of their trees, and decoded (one maximum spanning tree call, the root constraint handled as in
:mod:`.mst`) only when they reach the top (:mod:`.kbest_search`); the sets of one step, for every
sentence of the batch, are decoded in one batched call (:mod:`.kbest_subspaces`).

Cost per sentence: at most 2 n sets queued per answer, of which those whose bound reaches the top
are decoded, each an O(n^2)-per-round tensor Chu-Liu/Edmonds plus an O(n^3 log n) feasibility test;
about k batched steps (more with ties, where sets are opened until the first of the equal trees is
known). Scores are compared as exactly rounded float64 sums (``math.fsum``); for scores whose
tree sums are exact (integers, dyadic values) ties are broken exactly, otherwise trees within
rounding of each other may come in either order.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from parser.structs.common import NEG_INF, arc_mask, check_scores_and_lengths
from parser.structs.decoding.kbest_search import SentenceSearch
from parser.structs.decoding.kbest_subspaces import solve

__all__ = ["KBestTrees", "k_best_trees"]


class KBestTrees(NamedTuple):
    """``heads [k, B, N+1]`` (rank, sentence, dep), ``labels`` alike (None when unlabeled), and
    ``scores [k, B]`` float64. Ranks a sentence does not have (fewer than k trees, or none) are
    rows of -1 with score -inf; other rows have ``heads[:, :, 0] = 0`` and 0 on padding."""

    heads: Tensor
    labels: Tensor | None
    scores: Tensor


def k_best_trees(scores: Tensor, lengths: Tensor, *, k: int, single_root: bool) -> KBestTrees:
    """The ``k`` best trees of each sentence, best first (order in the module docstring).

    scores: ``[B, dep, head]`` or labeled ``[B, dep, head, L]``, index 0 is ROOT; ``-inf`` forbids
    an arc (or an arc's label). lengths: ``[B]`` words per sentence. single_root: exactly one word
    attaches to ROOT when True. A sentence with no allowed tree gets only -1 rows.

    >>> import torch
    >>> best = k_best_trees(torch.zeros(1, 3, 3), torch.tensor([2]), k=3, single_root=True)
    >>> best.heads[:, 0].tolist()  # two trees of two words; the third rank does not exist
    [[0, 0, 1], [0, 2, 0], [-1, -1, -1]]
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k = {k!r}: expected an integer >= 1")
    check_scores_and_lengths(scores, lengths, labeled=True)
    labeled = scores.dim() == 4
    with torch.no_grad():
        pair_scores = scores.detach().to(torch.float64)
        if not labeled:
            pair_scores = pair_scores[..., None]
        lengths = lengths.to(device=scores.device, dtype=torch.long)
        size, n_labels = pair_scores.shape[1], pair_scores.shape[3]
        real = arc_mask(lengths, size)
        pair_scores = pair_scores.masked_fill(~real[..., None], NEG_INF)
        table = pair_scores.reshape(*pair_scores.shape[:2], -1).cpu().numpy()
        sentences = [SentenceSearch(b, n, table[b]) for b, n in enumerate(lengths.tolist())]
        _search(pair_scores, lengths, sentences, k=k, single_root=single_root)
    heads = torch.full((k, len(sentences), size), -1, dtype=torch.long)
    labels = torch.full_like(heads, -1)
    tree_scores = torch.full((k, len(sentences)), NEG_INF, dtype=torch.float64)
    for sentence in sentences:
        for rank, (pairs, score) in enumerate(sentence.answers):
            row = torch.zeros(size, dtype=torch.long)
            row[: len(pairs)] = torch.tensor(pairs)
            heads[rank, sentence.index] = row // n_labels
            labels[rank, sentence.index] = row % n_labels
            tree_scores[rank, sentence.index] = score
    device = scores.device
    return KBestTrees(heads.to(device), labels.to(device) if labeled else None, tree_scores.to(device))


def _search(scores: Tensor, lengths: Tensor, searches: list[SentenceSearch], *, k: int,
            single_root: bool) -> None:
    """Fills each sentence's ``answers``; each step decodes, in one batched call, the sets that
    reached the top of every sentence's queue."""
    roots = [search.root() for search in searches]
    for search, space, best in zip(searches, roots, solve(scores, lengths, roots,
                                                          single_root=single_root)):
        search.push_decoded(space, best)
    active = list(searches)
    while active:
        requests = [(search, space) for search in active
                    for space in search.advance(k, width=max(2, search.n // 2))]
        solutions = solve(scores, lengths, [space for _, space in requests], single_root=single_root)
        for (search, space), best in zip(requests, solutions):
            search.push_decoded(space, best)
        active = [s for s in active if len(s.answers) < k and s.queue]
