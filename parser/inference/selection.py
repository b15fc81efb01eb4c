"""What to annotate next, read from the tree CRF: scores of sentences and words, and the bounded
choice of the best ones under a budget (``parser-select``; docs/annotation.md).

Strategies (:data:`STRATEGIES`), each a score per unit, higher first:

- ``entropy`` (whole sentences): the tree distribution's entropy ``H(p)`` in nats, divided by the
  sentence's words ``n`` when ``normalise`` (a long sentence is not uncertain for being long);
- ``errors`` (whole sentences): the expected number of wrong heads in the tree an annotator is
  shown, ``n - sum_i p(head(i) = written head of i)``, per word when ``normalise``. The written
  tree, not ``sum_i max_j p(head(i) = j)``: the pre-filled tree is the one whose errors the
  annotator corrects, and it is the decoder's (UD rules, projective decoding), which may differ
  from each word's most probable head;
- ``words`` (single words, partial annotation): ``1 - p(head(i) = written head of i)``, the
  probability that the word's pre-filled head is wrong;
- ``random`` (whole sentences) and ``random_words``: a uniform key per unit from ``seed``, drawn in
  pool order (the top-k of uniform keys is a uniform sample without replacement: reservoir
  sampling), so the same seed and pool give the same selection.

Budget (``unit``): ``sentences`` (whole-sentence strategies only) or ``words``. Whole sentences fill
a word budget greedily in rank order, passing over a sentence that no longer fits. ``cap`` bounds
what one sentence can take: a word strategy selects at most ``cap`` words of a sentence, a sentence
strategy passes over sentences of more than ``cap`` words. Ties go to the earlier unit in the pool.

``stratify="length"`` shares the budget among sentence lengths as the pool has them: the bins of
the official by-length breakdown (1-10, 11-20, 21-30, 31-40, 41+ words, :data:`LENGTH_BINS`) get
quotas in proportion to the pool's words in each (its sentences, for ``unit=sentences``; largest
remainders), each quota is filled in rank order with its bin's units, then what a bin could not
use goes to the best units left of any bin. Why: the most uncertain words sit in long sentences,
and a selection of them alone leaves the short sentences, most of a web treebank's test words,
unseen (experiments/results/annotation_sim.md: on en_ewt the marginal-words arm lost 2.8 LAS on
test sentences of 1-10 words to random sentences and gained 1.1 on those of 41+). It did not
mend that arm (-1.1 LAS more after one round): there the budget went to heads the UD rules force,
which selecting with ``ud_rules=none`` avoids (the same file).

Memory is bounded by the budget, not the pool (:class:`Chooser`): a sentence budget of ``k`` keeps
the ``k`` best sentences; a word budget ``B`` of whole sentences keeps, per length ``L``, the best
``B // L`` sentences of that length (a sentence outside them is never taken by the greedy fill:
either ``B // L`` better sentences of its length were taken, leaving under ``L`` words, or one of
them did not fit, and it does not either), about ``B ln B`` entries; a word strategy keeps the
best ``B`` words of the sentences' best ``cap``. Stratified, a sentence budget and a word
strategy keep that many per length bin (five times as many in all); a word budget of whole
sentences keeps the same per-length candidates (the argument above holds for any quota).
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from parser.inference.confidence import SentenceConfidence

__all__ = [
    "LENGTH_BINS", "SENTENCE_STRATEGIES", "STRATEGIES", "STRATIFY", "UNITS", "WORD_STRATEGIES",
    "Chooser", "SelectOptions", "Unit", "asked_words", "length_bin", "quotas", "sentence_score",
    "word_scores",
]

SENTENCE_STRATEGIES = ("entropy", "errors", "random")
WORD_STRATEGIES = ("words", "random_words")
STRATEGIES = (*SENTENCE_STRATEGIES, *WORD_STRATEGIES)
UNITS = ("words", "sentences")
STRATIFY = ("none", "length")
LENGTH_BINS = (10, 20, 30, 40)  # upper bounds: 1-10, 11-20, 21-30, 31-40, then 41+ words


@dataclass(frozen=True)
class SelectOptions:
    """A selection: ``strategy`` (:data:`STRATEGIES`), ``budget`` units of ``unit``
    (:data:`UNITS`), the per-sentence ``cap`` in words (None: none), ``normalise`` (sentence scores
    per word), the ``seed`` of the random strategies and ``stratify`` (:data:`STRATIFY`: the budget
    shared among sentence lengths as in the pool; module docstring)."""

    strategy: str
    budget: int
    unit: str = "words"
    cap: int | None = None
    normalise: bool = True
    seed: int = 0
    stratify: str = "none"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy={self.strategy}: expected one of {', '.join(STRATEGIES)}")
        if self.unit not in UNITS:
            raise ValueError(f"unit={self.unit}: expected words or sentences")
        if self.stratify not in STRATIFY:
            raise ValueError(f"stratify={self.stratify}: expected none or length")
        for name, value in (("budget", self.budget), ("cap", self.cap)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"{name}={value}: expected a positive integer")
        if self.per_word and self.unit == "sentences":
            raise ValueError(f"strategy={self.strategy} selects single words: its budget is in "
                             "words (unit=words)")

    @property
    def per_word(self) -> bool:
        """Whether the units are single words (partial annotation)."""
        return self.strategy in WORD_STRATEGIES

    @property
    def random(self) -> bool:
        """Whether the scores are random keys (no parse needed to rank)."""
        return self.strategy.startswith("random")


@dataclass(frozen=True)
class Unit:
    """One selected unit: ``rank`` (1-based, best first), the sentence's 0-based ``position`` in
    the pool, its ``length`` in words, ``word`` (1-based id; None: the whole sentence), ``score``."""

    rank: int
    position: int
    length: int
    word: int | None
    score: float


def sentence_score(confidence: SentenceConfidence, *, strategy: str, normalise: bool) -> float:
    """The score of a whole sentence under ``entropy`` or ``errors`` (module docstring).

    >>> c = SentenceConfidence([0.9, 0.5], None, -0.8, 0.6)
    >>> sentence_score(c, strategy="errors", normalise=False), sentence_score(c, strategy="entropy", normalise=True)
    (0.6, 0.3)
    """
    n = len(confidence.head_probs)
    if strategy == "entropy":
        total = confidence.tree_entropy
    elif strategy == "errors":
        total = n - confidence.expected_correct
    else:
        raise ValueError(f"strategy={strategy}: not a score of the tree distribution")
    return round(total / n if normalise else total, 12)


def word_scores(confidence: SentenceConfidence) -> list[float]:
    """Per word, the probability that its written head is wrong: ``1 - HeadProb``."""
    return [1.0 - p for p in confidence.head_probs]


def length_bin(length: int) -> int:
    """The index of ``length``'s bin in :data:`LENGTH_BINS` (0: 1-10 words ... 4: 41+)."""
    return bisect.bisect_left(LENGTH_BINS, length)


def quotas(budget: int, amounts: Sequence[int]) -> list[int]:
    """``budget`` shared in proportion to ``amounts``, by largest remainders (ties: the earlier).

    >>> quotas(10, [5, 3, 2, 0, 0]), quotas(7, [1, 1, 1, 0, 0]), quotas(3, [0, 0, 0, 0, 0])
    ([5, 3, 2, 0, 0], [3, 2, 2, 0, 0], [0, 0, 0, 0, 0])
    """
    total = sum(amounts)
    if not total:
        return [0] * len(amounts)
    exact = [budget * amount / total for amount in amounts]
    shares = [int(x) for x in exact]
    by_remainder = sorted(range(len(amounts)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_remainder[: budget - sum(shares)]:
        shares[i] += 1
    return shares


class Chooser:
    """The bounded choice of the best units of a stream of sentences (module docstring): feed
    each sentence once, in pool order (:meth:`add`), then :meth:`chosen`."""

    def __init__(self, options: SelectOptions) -> None:
        self.options = options
        self._rng = random.Random(options.seed)
        self._heaps: dict[int, list[tuple[float, int, int, int]]] = {}  # bin or length -> min-heap
        self._stratified = options.stratify == "length"
        self._pool = [0] * (len(LENGTH_BINS) + 1)  # the pool's words (or sentences) per length bin

    def add(self, position: int, length: int, confidence: SentenceConfidence | None,
            given: Collection[int] = ()) -> None:
        """Sentence ``position`` of ``length`` words, with its tree CRF's ``confidence`` (None: not
        parsed, never selected). The random strategies read no confidence: they draw keys for
        every sentence fed (a caller leaves out those it cannot parse). ``given``: the words
        (1-based) whose head the pool gives (``keep_heads=given``, word strategies): never
        selected, nor counted in the pool's words."""
        options = self.options  # given with a sentence strategy: refused by rank_pool
        self._pool[length_bin(length)] += 1 if options.unit == "sentences" else length - len(given)
        key = length_bin(length) if self._stratified else 0  # the heap of a word or a sentence
        if options.per_word:
            scores = ([self._rng.random() for _ in range(length)] if options.random
                      else None if confidence is None else word_scores(confidence))
            if scores is None:
                return
            free = [i for i in range(length) if i + 1 not in given]
            best = sorted(free, key=lambda i: (-scores[i], i))[: options.cap]
            for i in best:
                self._push(key, options.budget, (scores[i], -position, -(i + 1), length))
            return
        score = (self._rng.random() if options.random else
                 None if confidence is None else
                 sentence_score(confidence, strategy=options.strategy, normalise=options.normalise))
        if score is None:
            return
        if options.cap is not None and length > options.cap:
            return
        if options.unit == "sentences":
            self._push(key, options.budget, (score, -position, 0, length))
        elif length <= options.budget:
            self._push(length, options.budget // length, (score, -position, 0, length))

    def _push(self, key: int, size: int, item: tuple[float, int, int, int]) -> None:
        heap = self._heaps.setdefault(key, [])
        if len(heap) < size:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)

    @property
    def kept(self) -> int:
        """Candidates held now (the memory bound: see the module docstring)."""
        return sum(len(heap) for heap in self._heaps.values())

    def chosen(self) -> list[Unit]:
        """The selected units, best first, within the budget, the cap and (stratified) the
        length bins' quotas."""
        options = self.options
        ranked = sorted((item for heap in self._heaps.values() for item in heap),
                        key=lambda item: (-item[0], -item[1], -item[2]))

        def size(item) -> int:
            return 1 if options.per_word or options.unit == "sentences" else item[3]

        taken = [False] * len(ranked)
        left = options.budget
        if self._stratified:  # first each bin's quota, then the best of what is left
            quota = quotas(options.budget, self._pool)
            for i, item in enumerate(ranked):
                bin_ = length_bin(item[3])
                if size(item) <= min(quota[bin_], left):
                    taken[i], quota[bin_], left = True, quota[bin_] - size(item), left - size(item)
        for i, item in enumerate(ranked):
            if not taken[i] and size(item) <= left:
                taken[i], left = True, left - size(item)
        units: list[Unit] = []
        for (score, position, word, length), chosen in zip(ranked, taken):
            if chosen:
                units.append(Unit(len(units) + 1, -position, length, -word or None, score))
        return units


def asked_words(units: Sequence[Unit]) -> int:
    """The words an annotator is asked for."""
    return sum(1 if unit.word is not None else unit.length for unit in units)
