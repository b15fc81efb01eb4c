"""Calibration of a parser's confidence: reliability tables, expected calibration error and
selective-parsing curves, from per-word probabilities and whether the prediction was right.

The probabilities are those ``parser-predict confidence=true`` writes
(:mod:`parser.inference.confidence`): ``HeadProb``, the tree CRF's marginal of the head written,
is right when that head is the gold one; ``DeprelProb``, the probability of the relation written
given its arc, is scored on the words whose head is right, and is right when the relation equals
the gold one exactly (subtype included: the probability is that of the full relation). Which
words count is the caller's choice; the project's convention (CoNLL 2018, as in
:mod:`parser.eval.metrics`) is every syntactic word, punctuation included.

>>> table = reliability_table([0.95, 0.95, 0.55, 0.15], [True, False, True, False])
>>> [(b.low, b.count, b.accuracy) for b in table if b.count]
[(0.1, 1, 0.0), (0.5, 1, 1.0), (0.9, 2, 0.5)]
>>> round(expected_calibration_error(table), 4)  # (2 * 0.45 + 0.45 + 0.15) / 4
0.375
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "FRACTIONS", "ReliabilityBin", "SelectivePoint", "expected_calibration_error",
    "reliability_table", "selective_curve",
]

FRACTIONS = tuple(range(10, 101, 10))  # percent of the most confident items kept


@dataclass(frozen=True)
class ReliabilityBin:
    """Items whose confidence lies in ``[low, high)`` (the last bin also holds 1.0): how many,
    their mean confidence and the share of them that were right (``nan`` when empty)."""

    low: float
    high: float
    count: int
    confidence: float
    accuracy: float


@dataclass(frozen=True)
class SelectivePoint:
    """The ``percent`` most confident items (``kept`` of them, covering ``units`` scored units:
    words, or the words of the sentences kept) and the accuracy over those units, 0..1."""

    percent: int
    kept: int
    units: int
    accuracy: float


def _check(confidence: Sequence[float], correct: Sequence, *, name: str) -> None:
    if len(confidence) != len(correct):
        raise ValueError(f"{name}: {len(confidence)} confidences but {len(correct)} outcomes")
    bad = [c for c in confidence if not 0.0 <= c <= 1.0]  # also catches nan
    if bad:
        raise ValueError(f"{name}: confidence {bad[0]!r} outside 0..1")


def reliability_table(
    confidence: Sequence[float], correct: Sequence[bool], *, bins: int = 10
) -> list[ReliabilityBin]:
    """``bins`` equal-width bins of ``confidence`` (probabilities in 0..1) with the accuracy of
    the items in each (``correct``: one bool per item)."""
    _check(confidence, correct, name="reliability_table")
    if bins < 1:
        raise ValueError(f"reliability_table: bins={bins}, expected >= 1")
    counts, sums, rights = [0] * bins, [0.0] * bins, [0] * bins
    for value, right in zip(confidence, correct):
        index = min(int(value * bins), bins - 1)  # 1.0 joins the last bin
        counts[index] += 1
        sums[index] += value
        rights[index] += bool(right)
    return [ReliabilityBin(low=i / bins, high=(i + 1) / bins, count=counts[i],
                           confidence=sums[i] / counts[i] if counts[i] else math.nan,
                           accuracy=rights[i] / counts[i] if counts[i] else math.nan)
            for i in range(bins)]


def expected_calibration_error(table: Sequence[ReliabilityBin]) -> float:
    """ECE: the mean over bins of |accuracy - mean confidence|, weighted by the bins' counts
    (0..1; ``nan`` for a table without items)."""
    total = sum(b.count for b in table)
    if not total:
        return math.nan
    return sum(b.count * abs(b.accuracy - b.confidence) for b in table if b.count) / total


def selective_curve(
    scores: Sequence[float], correct: Sequence[int], units: Sequence[int] | None = None, *,
    percents: Sequence[int] = FRACTIONS,
) -> list[SelectivePoint]:
    """Accuracy of the most confident items: for each ``percent``, the ``ceil(percent * n /
    100)`` items of highest ``scores`` (ties in input order), and ``sum(correct) / sum(units)``
    over them. Words: ``correct`` 0/1 and ``units`` None (one each); sentences: ``correct`` the
    number of correct heads and ``units`` the number of words of each sentence.

    >>> [(p.kept, p.accuracy) for p in selective_curve([0.9, 0.2, 0.6], [1, 0, 0], percents=[34, 100])]
    [(2, 0.5), (3, 0.3333333333333333)]
    """
    units = [1] * len(scores) if units is None else list(units)
    if not len(scores) == len(correct) == len(units):
        raise ValueError(f"selective_curve: {len(scores)} scores, {len(correct)} outcomes, "
                         f"{len(units)} unit counts")
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep input order
    points = []
    for percent in percents:
        if not 0 < percent <= 100:
            raise ValueError(f"selective_curve: percent={percent}, expected 1..100")
        kept = order[: math.ceil(percent * len(order) / 100)]
        right, total = sum(correct[i] for i in kept), sum(units[i] for i in kept)
        points.append(SelectivePoint(percent=int(percent), kept=len(kept), units=total,
                                     accuracy=right / total if total else math.nan))
    return points
