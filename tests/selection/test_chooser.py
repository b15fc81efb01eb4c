"""The bounded chooser of parser-select against a full sort of every unit (the naive selection),
the budget and the cap obeyed exactly, and memory bounded by the budget, not the pool."""

from __future__ import annotations

import random

import pytest

from parser.inference.confidence import SentenceConfidence
from parser.inference.selection import (
    LENGTH_BINS,
    Chooser,
    SelectOptions,
    asked_words,
    length_bin,
    quotas,
    sentence_score,
    word_scores,
)


def _pool(count: int, *, seed: int, longest: int = 12) -> list[SentenceConfidence]:
    rng = random.Random(seed)
    pool = []
    for _ in range(count):
        n = rng.randint(1, longest)
        # scores on a coarse grid, so that ties occur and their order is tested
        probs = [rng.choice([0.2, 0.5, 0.8, 1.0]) for _ in range(n)]
        pool.append(SentenceConfidence(probs, None, -1.0, rng.choice([0.1, 0.5, 1.0, 2.0])))
    return pool


def _naive(pool: list[SentenceConfidence], options: SelectOptions) -> list[tuple[int, int | None]]:
    """Every unit scored and sorted, then the greedy fill (stratified: each length bin's quota
    first, then the rest): ``(position, word or None)``, best first."""
    units = []
    for position, sure in enumerate(pool):
        n = len(sure.head_probs)
        if options.per_word:
            scores = word_scores(sure)
            best = sorted(range(n), key=lambda i: (-scores[i], i))[: options.cap]
            units += [(scores[i], position, i + 1, 1) for i in best]
        elif options.cap is None or n <= options.cap:
            size = 1 if options.unit == "sentences" else n
            units.append((sentence_score(sure, strategy=options.strategy,
                                         normalise=options.normalise), position, None, size))
    units.sort(key=lambda u: (-u[0], u[1], u[2] or 0))
    chosen, left = set(), options.budget
    if options.stratify == "length":
        amounts = [0] * (len(LENGTH_BINS) + 1)
        for sure in pool:
            n = len(sure.head_probs)
            amounts[length_bin(n)] += 1 if options.unit == "sentences" else n
        quota = quotas(options.budget, amounts)
        for _, position, word, size in units:
            bin_ = length_bin(len(pool[position].head_probs))
            if size <= min(quota[bin_], left):
                chosen.add((position, word))
                quota[bin_], left = quota[bin_] - size, left - size
    for _, position, word, size in units:
        if (position, word) not in chosen and size <= left:
            chosen.add((position, word))
            left -= size
    return [(position, word) for _, position, word, _ in units if (position, word) in chosen]


def _chosen(pool, options):
    chooser = Chooser(options)
    for position, sure in enumerate(pool):
        chooser.add(position, len(sure.head_probs), sure)
    return chooser.chosen()


@pytest.mark.parametrize("strategy, unit, cap, normalise", [
    ("entropy", "sentences", None, True), ("errors", "sentences", 6, False),
    ("entropy", "words", None, True), ("errors", "words", 8, True), ("errors", "words", None, False),
    ("words", "words", None, True), ("words", "words", 2, True), ("words", "words", 1, True),
])
@pytest.mark.parametrize("budget", [1, 7, 40, 300])
def test_the_bounded_choice_is_the_full_sort_and_obeys_budget_and_cap(strategy, unit, cap,
                                                                      normalise, budget):
    pool = _pool(120, seed=budget)
    options = SelectOptions(strategy, budget, unit=unit, cap=cap, normalise=normalise)
    units = _chosen(pool, options)
    assert [(u.position, u.word) for u in units] == _naive(pool, options)
    assert [u.rank for u in units] == list(range(1, len(units) + 1))
    assert [u.score for u in units] == sorted((u.score for u in units), reverse=True)
    eligible = [len(s.head_probs) for s in pool if cap is None or len(s.head_probs) <= cap]
    if unit == "sentences":
        assert len(units) == min(budget, len(eligible))  # exactly the budget, when there is enough
    else:
        assert asked_words(units) <= budget
    if strategy == "words":  # single words fill a word budget exactly, when there are enough
        words = sum(min(len(s.head_probs), cap or 12) for s in pool)
        assert asked_words(units) == min(budget, words)
        per_sentence = {}
        for u in units:
            per_sentence[u.position] = per_sentence.get(u.position, 0) + 1
        assert max(per_sentence.values()) <= (cap or 12)
    elif cap is not None:
        assert all(u.length <= cap for u in units)


@pytest.mark.parametrize("strategy, unit, cap", [
    ("entropy", "sentences", None), ("errors", "words", None), ("entropy", "words", 30),
    ("words", "words", None), ("words", "words", 2),
])
@pytest.mark.parametrize("budget", [1, 9, 60, 400])
def test_a_stratified_choice_is_the_full_sort_filled_bin_by_bin(strategy, unit, cap, budget):
    pool = _pool(150, seed=budget + 1, longest=55)
    options = SelectOptions(strategy, budget, unit=unit, cap=cap, stratify="length")
    units = _chosen(pool, options)
    assert [(u.position, u.word) for u in units] == _naive(pool, options)
    assert [u.score for u in units] == sorted((u.score for u in units), reverse=True)
    assert (len(units) if unit == "sentences" else asked_words(units)) <= budget


@pytest.mark.parametrize("strategy", ["words", "random_words"])
def test_single_words_fill_each_length_bins_quota_exactly(strategy):
    """With candidates enough in every bin, each bin gets its share of the pool's words."""
    pool = _pool(400, seed=11, longest=60)
    budget = 200
    units = _chosen(pool, SelectOptions(strategy, budget, stratify="length"))
    amounts = [0] * (len(LENGTH_BINS) + 1)
    for sure in pool:
        amounts[length_bin(len(sure.head_probs))] += len(sure.head_probs)
    taken = [0] * len(amounts)
    for u in units:
        taken[length_bin(u.length)] += 1
    assert taken == quotas(budget, amounts) and sum(taken) == budget
    plain = _chosen(pool, SelectOptions(strategy, budget))
    assert [u.position for u in plain] != [u.position for u in units]


def test_memory_holds_candidates_of_the_budget_not_the_pool():
    budget = 50
    bound = sum(budget // length for length in range(1, budget + 1))
    for options in (SelectOptions("entropy", budget), SelectOptions("errors", budget, unit="sentences"),
                    SelectOptions("words", budget, cap=3)):
        chooser = Chooser(options)
        most = 0
        for position, sure in enumerate(_pool(20_000, seed=5, longest=60)):
            chooser.add(position, len(sure.head_probs), sure)
            most = max(most, chooser.kept)
        assert most <= (budget if options.unit == "sentences" or options.per_word else bound)
    bins = len(LENGTH_BINS) + 1
    for options in (SelectOptions("entropy", budget, stratify="length"),
                    SelectOptions("errors", budget, unit="sentences", stratify="length"),
                    SelectOptions("words", budget, cap=3, stratify="length")):
        chooser = Chooser(options)
        most = 0
        for position, sure in enumerate(_pool(20_000, seed=5, longest=60)):
            chooser.add(position, len(sure.head_probs), sure)
            most = max(most, chooser.kept)
        assert most <= (bins * budget if options.unit == "sentences" or options.per_word else bound)


def test_random_strategies_are_reproducible_samples():
    pool = _pool(200, seed=3)

    def draw(strategy, seed, unit="sentences"):
        chooser = Chooser(SelectOptions(strategy, 20, unit=unit, seed=seed, cap=2))
        for position, sure in enumerate(pool):
            chooser.add(position, len(sure.head_probs), None)  # random keys read no parse
        return [(u.position, u.word) for u in chooser.chosen()]

    assert draw("random", 1) == draw("random", 1) != draw("random", 2)
    assert len(set(draw("random", 1))) == 20
    words = draw("random_words", 4, unit="words")
    assert len(words) == 20 and words == draw("random_words", 4, unit="words")


def test_a_sentence_not_parsed_is_never_chosen():
    chooser = Chooser(SelectOptions("entropy", 5, unit="sentences"))
    chooser.add(0, 3, None)
    chooser.add(1, 2, SentenceConfidence([0.5, 0.5], None, -1.0, 0.3))
    assert [u.position for u in chooser.chosen()] == [1]


@pytest.mark.parametrize("options, message", [
    ({"strategy": "words", "budget": 3, "unit": "sentences"}, "budget is in words"),
    ({"strategy": "margin", "budget": 3}, "strategy=margin"),
    ({"strategy": "entropy", "budget": 0}, "budget=0"),
    ({"strategy": "entropy", "budget": 3, "cap": 0}, "cap=0"),
    ({"strategy": "words", "budget": 3, "stratify": "genre"}, "stratify=genre"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        SelectOptions(**options)
