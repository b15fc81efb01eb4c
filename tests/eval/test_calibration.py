"""Reliability tables, ECE and selective-parsing curves on inputs computed by hand."""

from __future__ import annotations

import math

import pytest

from parser.eval.calibration import (
    FRACTIONS,
    expected_calibration_error,
    reliability_table,
    selective_curve,
)


def test_reliability_table_and_ece_by_hand():
    confidence = [0.05, 0.15, 0.15, 0.95, 1.0, 0.1]
    correct = [False, True, False, True, True, True]
    table = reliability_table(confidence, correct)
    assert len(table) == 10
    assert [(b.low, b.high) for b in table][::9] == [(0.0, 0.1), (0.9, 1.0)]
    assert [b.count for b in table] == [1, 3, 0, 0, 0, 0, 0, 0, 0, 2]  # 0.1 opens bin 1, 1.0 joins bin 9
    assert table[0].confidence == pytest.approx(0.05) and table[0].accuracy == 0.0
    assert table[1].confidence == pytest.approx(0.4 / 3) and table[1].accuracy == pytest.approx(2 / 3)
    assert table[9].confidence == pytest.approx(0.975) and table[9].accuracy == 1.0
    assert math.isnan(table[4].confidence) and math.isnan(table[4].accuracy)
    # (1 * 0.05 + 3 * |2/3 - 0.4/3| + 2 * 0.025) / 6
    expected = (0.05 + 3 * (2 / 3 - 0.4 / 3) + 2 * 0.025) / 6
    assert expected_calibration_error(table) == pytest.approx(expected)


def test_ece_is_zero_when_confidence_matches_accuracy_and_counts_weigh():
    # Bin 7 (conf 0.75): 3 of 4 right; bin 2 (0.25): 1 of 4 right.
    table = reliability_table([0.75] * 4 + [0.25] * 4, [1, 1, 1, 0, 1, 0, 0, 0])
    assert expected_calibration_error(table) == pytest.approx(0.0)
    # One overconfident bin of 9 items (0.9, all wrong) and one exact bin of 1 item.
    table = reliability_table([0.9] * 9 + [0.5], [False] * 9 + [True])
    assert expected_calibration_error(table) == pytest.approx((9 * 0.9 + 0.5) / 10)
    assert math.isnan(expected_calibration_error(reliability_table([], [])))


def test_reliability_table_other_bin_counts():
    table = reliability_table([0.2, 0.6, 0.7], [True, False, True], bins=2)
    assert [(b.count, b.accuracy) for b in table] == [(1, 1.0), (2, 0.5)]


@pytest.mark.parametrize(("confidence", "correct", "message"), [
    ([0.5, 0.2], [True], "2 confidences but 1 outcomes"),
    ([1.5], [True], "confidence 1.5 outside 0..1"),
    ([math.nan], [True], "confidence nan outside 0..1"),
])
def test_reliability_table_refuses_bad_input(confidence, correct, message):
    with pytest.raises(ValueError, match=message):
        reliability_table(confidence, correct)


def test_selective_curve_for_words_by_hand():
    scores = [0.9, 0.1, 0.8, 0.3, 0.95, 0.5, 0.6, 0.2, 0.7, 0.4]
    correct = [1, 0, 1, 0, 1, 1, 0, 0, 1, 1]
    curve = selective_curve(scores, correct)
    assert [p.percent for p in curve] == list(FRACTIONS)
    assert [p.kept for p in curve] == list(range(1, 11))
    # Ranked: .95(1) .9(1) .8(1) .7(1) .6(0) .5(1) .4(1) .3(0) .2(0) .1(0)
    running = [1, 2, 3, 4, 4, 5, 6, 6, 6, 6]
    assert [p.accuracy for p in curve] == pytest.approx([r / k for r, k in zip(running, range(1, 11))])
    assert curve[-1].accuracy == pytest.approx(sum(correct) / len(correct))


def test_selective_curve_for_sentences_weighs_by_words_and_rounds_up():
    # Three sentences: mean HeadProb, correct heads, words.
    scores, correct, words = [0.5, 0.99, 0.7], [2, 3, 9], [4, 3, 10]
    curve = selective_curve(scores, correct, words, percents=[30, 34, 67, 100])
    assert [p.kept for p in curve] == [1, 2, 3, 3]  # ceil(0.9) = 1, ceil(1.02) = 2, ceil(2.01) = 3
    assert [p.units for p in curve] == [3, 13, 17, 17]
    assert [p.accuracy for p in curve] == pytest.approx([1.0, 12 / 13, 14 / 17, 14 / 17])


def test_selective_curve_ties_keep_input_order_and_checks():
    curve = selective_curve([0.5, 0.5], [0, 1], percents=[50])
    assert curve[0].accuracy == 0.0
    with pytest.raises(ValueError, match="percent=0"):
        selective_curve([0.5], [1], percents=[0])
    with pytest.raises(ValueError, match="2 scores, 1 outcomes"):
        selective_curve([0.5, 0.4], [1])
