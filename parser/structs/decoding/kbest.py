"""The k best dependency trees of each sentence, exactly, best first.

Order (a total order, so the answer is unique): tree score descending; equal scores by the sequence
of ``(head, label)`` of words ``1..n`` in lexicographic order, ascending (unlabeled: the heads in
lexicographic order). The score of a labeled tree is the sum of its (dep, head, label) scores, so the
k best labeled trees are the k best arborescences of the multigraph with one parallel arc per label.

Algorithm: Lawler's (1972) partition scheme, the frame of Camerini, Fratta & Maffioli (1980) and of
Zmigrod, Vieira & Cotterell (2021): a priority queue of disjoint tree sets (:class:`.Subspace`),
each with its best tree. The best of the queue is the next answer; its set minus that tree splits
into one set per unfixed word ``d``: the words before ``d`` keep the answer's pair, ``d`` loses it.
The best tree of a set is one maximum spanning tree call (:mod:`.kbest_subspaces`, with the root
constraint handled there as in :mod:`.mst`), and every set produced in one step, for every
sentence of the batch, is decoded in one batched call. Ties: a set's best-scoring tree is made the
first in the order above by descending into the sets of trees that come before it (words before
``d`` fixed, ``d``'s pair below the current one) until none holds a tree of the same score;
a queue entry is only answered once refined, and unrefined entries sort first at equal score.

Cost per sentence: O(k n) maximum spanning tree calls (plus as many for refinement; ties add more),
batched. Scores are compared as exactly rounded float64 sums (``math.fsum``); for scores whose
tree sums are exact (integers, dyadic values) ties are broken exactly, otherwise trees within
rounding of each other may come in either order.
"""

from __future__ import annotations

import heapq
import itertools
from typing import NamedTuple

import torch
from torch import Tensor

from parser.structs.common import NEG_INF, arc_mask, check_scores_and_lengths
from parser.structs.decoding.kbest_subspaces import Solution, Subspace, solve

__all__ = ["KBestTrees", "k_best_trees"]


class KBestTrees(NamedTuple):
    """``heads [k, B, N+1]`` (rank, sentence, dep), ``labels`` alike (None when unlabeled), and
    ``scores [k, B]`` float64. Ranks a sentence does not have (fewer than k trees, or none) are
    rows of -1 with score -inf; other rows have ``heads[:, :, 0] = 0`` and 0 on padding."""

    heads: Tensor
    labels: Tensor | None
    scores: Tensor


class _Sentence:
    """The search state of one sentence: its queue of (set, best tree) entries and its answers."""

    def __init__(self, index: int, n: int) -> None:
        self.index, self.n = index, n
        self.queue: list = []  # (-score, refined, pairs, tie-break counter, subspace)
        self.answers: list[tuple[tuple[int, ...], float]] = []
        self.refining: tuple[Subspace, Subspace, Solution] | None = None  # (entry set, current, best)
        self.counter = itertools.count()

    def push(self, space: Subspace, best: Solution, *, refined: bool) -> None:
        if best.pairs is not None:
            heapq.heappush(self.queue, (-best.score, refined, best.pairs, next(self.counter), space))


def _children(space: Subspace, pairs: tuple[int, ...]) -> list[Subspace]:
    """``space`` minus the tree ``pairs``, as disjoint sets (one per word not fixed in ``space``)."""
    out, fixed = [], list(space.fixed)
    for word in range(1, len(pairs)):
        if space.fixed[word] >= 0:
            continue
        out.append(Subspace(space.sentence, tuple(fixed), (*space.excluded, (word, pairs[word]))))
        fixed[word] = pairs[word]
    return out


def _earlier(space: Subspace, pairs: tuple[int, ...]) -> list[tuple[int, Subspace]]:
    """The trees of ``space`` before ``pairs`` in lexicographic order, as disjoint sets keyed by
    the first word that differs (words before it keep ``pairs``, its own pair is smaller)."""
    out, fixed = [], list(space.fixed)
    bound = list(space.bound) if space.bound is not None else [len(pairs) * 10**9] * len(pairs)
    for word in range(1, len(pairs)):
        if space.fixed[word] < 0:
            below = list(bound)
            below[word] = min(below[word], pairs[word])
            out.append((word, Subspace(space.sentence, tuple(fixed), space.excluded, tuple(below))))
        fixed[word] = pairs[word]
    return out


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
        sentences = [_Sentence(b, n) for b, n in enumerate(lengths.tolist())]
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


def _search(scores: Tensor, lengths: Tensor, sentences: list[_Sentence], *, k: int,
            single_root: bool) -> None:
    """Fills each sentence's ``answers``, one batched oracle call per step."""
    roots = [Subspace(s.index, (-1,) * (s.n + 1)) for s in sentences]
    for sentence, space, best in zip(sentences, roots, solve(scores, lengths, roots,
                                                             single_root=single_root)):
        sentence.push(space, best, refined=False)
    while True:
        requests: list[tuple[_Sentence, str, object, Subspace]] = []
        for sentence in sentences:
            _step(sentence, requests, k=k)
        if not requests:
            return
        solutions = solve(scores, lengths, [space for *_, space in requests], single_root=single_root)
        refinements: dict[int, list] = {}
        for (sentence, kind, tag, space), best in zip(requests, solutions):
            if kind == "child":
                sentence.push(space, best, refined=False)
            else:
                refinements.setdefault(sentence.index, [sentence]).append((tag, space, best))
        for sentence, *found in refinements.values():
            _refine(sentence, found)


def _step(sentence: _Sentence, requests: list, *, k: int) -> None:
    """Answers the sentence's best entry if refined (queueing its children), else starts or goes
    on refining it; adds the sets to decode to ``requests``."""
    while sentence.refining is None and len(sentence.answers) < k and sentence.queue:
        neg_score, refined, pairs, _, space = heapq.heappop(sentence.queue)
        if refined:
            sentence.answers.append((pairs, -neg_score))
            if len(sentence.answers) < k:
                requests.extend((sentence, "child", None, child) for child in _children(space, pairs))
            return
        sentence.refining = (space, space, Solution(pairs, -neg_score))
    if sentence.refining is None:
        return
    entry, current, best = sentence.refining
    earlier = _earlier(current, best.pairs)
    if not earlier:  # nothing can come before it
        sentence.refining = None
        sentence.push(entry, best, refined=True)
        _step(sentence, requests, k=k)
        return
    requests.extend((sentence, "refine", word, space) for word, space in earlier)


def _refine(sentence: _Sentence, found: list[tuple[int, Subspace, Solution]]) -> None:
    """Moves to the first earlier set holding a tree as good as the current one, or settles."""
    entry, _, best = sentence.refining
    for _, space, candidate in sorted(found, key=lambda item: item[0]):
        if candidate.pairs is not None and candidate.score >= best.score:
            sentence.refining = (entry, space, candidate)
            return
    sentence.refining = None
    sentence.push(entry, best, refined=True)
