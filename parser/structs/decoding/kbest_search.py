"""The best-first search behind :func:`.kbest.k_best_trees`: one queue of tree sets per sentence.

Each queue entry stands for trees of one sentence and carries a key that no tree it stands for
beats in the output order (score descending, then pair sequence ascending):

- kind 0, a single tree: its score and its pairs;
- kind 1, a decoded set: its best tree's score, and a lexicographic lower bound of its trees;
- kind 2, a set not decoded yet: an upper bound of its best score (the exactly rounded sum of each
  word's best allowed pair, ignoring the tree constraint, capped by the score of the set it was
  split from) and the same lower bound.

So a single tree at the top of a queue comes before every tree not answered yet. A decoded set at
the top is opened: its best tree is queued alone, the rest is split (:func:`split`) into sets that
are queued undecoded. Sets not decoded at the top are decoded in one batched call per step for all
sentences; most split sets never reach the top, which is what the bound saves.
"""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np

from parser.structs.decoding.kbest_subspaces import Solution, Subspace

__all__ = ["SentenceSearch", "split"]

_TREE, _DECODED, _UNDECODED = 0, 1, 2


class SentenceSearch:
    """The queue and the answers of one sentence.

    pair_scores: float64 array ``[N+1, (N+1) * L]`` (dep, pair code) with -inf off arcs.
    """

    def __init__(self, index: int, n: int, pair_scores: np.ndarray) -> None:
        self.index, self.n = index, n
        self.pair_scores = pair_scores
        self.queue: list = []
        self.answers: list[tuple[tuple[int, ...], float]] = []
        self.counter = itertools.count()

    def root(self) -> Subspace:
        codes = self.pair_scores.shape[1]
        return Subspace(self.index, (0,) * (self.n + 1), (codes,) * (self.n + 1))

    def push_decoded(self, space: Subspace, best: Solution) -> None:
        if best.pairs is not None:
            self._push(-best.score, space.lower_key(), _DECODED, space, best.pairs)

    def _push(self, neg_score: float, key: tuple[int, ...], kind: int, space, pairs) -> None:
        heapq.heappush(self.queue, (neg_score, key, kind, next(self.counter), space, pairs))

    def advance(self, k: int, *, width: int) -> list[Subspace]:
        """Answers trees and opens sets from the top of the queue until the top is undecoded;
        returns up to ``width`` undecoded sets taken from the top (to decode and push back)."""
        todo: list[Subspace] = []
        while len(self.answers) < k and self.queue:
            kind = self.queue[0][2]
            if kind == _UNDECODED:
                if len(todo) == width:
                    break
                todo.append(heapq.heappop(self.queue)[4])
                continue
            if todo:  # the decoded sets may come before this entry
                break
            neg_score, _, kind, _, space, pairs = heapq.heappop(self.queue)
            if kind == _TREE:
                self.answers.append((pairs, -neg_score))
                continue
            self._push(neg_score, pairs[1:], _TREE, None, pairs)
            for child, bound in split(space, pairs, self.pair_scores):
                # A subset: its trees score at most the opened set's best (which is exact).
                self._push(max(-bound, neg_score), child.lower_key(), _UNDECODED, child, None)
        return todo


def split(space: Subspace, pairs: tuple[int, ...],
          pair_scores: np.ndarray) -> list[tuple[Subspace, float]]:
    """``space`` minus its tree ``pairs`` as disjoint sets, each with an upper bound of its scores.

    For each free word ``d`` (the words before it fixed to their pair in ``pairs``): the trees
    where ``d``'s pair is below its pair in ``pairs`` (they come before it at equal score) and those
    where it is above. Sets where some word has no finite pair left are dropped.
    """
    n = len(pairs) - 1
    best = [float(pair_scores[d, space.low[d] : space.high[d]].max()) for d in range(1, n + 1)]
    fixed = [float(pair_scores[d, pairs[d]]) for d in range(1, n + 1)]
    out, low, high = [], list(space.low), list(space.high)
    for word in range(1, n + 1):
        pair = pairs[word]
        if high[word] != low[word] + 1:
            for lo, hi in ((low[word], pair), (pair + 1, high[word])):
                if lo >= hi:
                    continue
                top = float(pair_scores[word, lo:hi].max())
                if top == -math.inf:
                    continue
                bound = math.fsum((*fixed[: word - 1], top, *best[word:]))
                out.append((Subspace(space.sentence, (*low[:word], lo, *low[word + 1 :]),
                                     (*high[:word], hi, *high[word + 1 :])), bound))
        low[word], high[word] = pair, pair + 1
    return out
