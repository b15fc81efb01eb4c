"""The one MISC writer (parser.data.misc) and its users: format_sentence, the tokenizer's rows,
confidence, and a token-level layer whose column is MISC (parser.inference.columns)."""

from __future__ import annotations

import pytest

from parser.data.conllu_io import format_sentence, parse_sentences
from parser.data.misc import merged_misc, misc_entries
from parser.inference.columns import misc_of_words, written_columns, written_misc
from parser.inference.parse import Predictions, prediction_blocks

BLOCK = ["# sent_id = a",
         "1\tDogs\tdog\tNOUN\t_\t_\t2\tnsubj\t_\tSpaceAfter=No|Translit=x",
         "2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_"]


def _sentence():
    return next(parse_sentences([(1, list(BLOCK))], "x.conllu", on_invalid="raise",
                                require_trees=True, single_root=True, skipped=[]))


def test_entries_kept_in_place_replaced_keys_follow_in_the_order_given():
    assert merged_misc("A=1|B=2|C=3", {"B": "9", "D": "4"}) == "A=1|C=3|B=9|D=4"
    assert merged_misc("A=1|Bare|C=3", {"A": None}) == "Bare|C=3"
    assert merged_misc("_", {}) == "_" and merged_misc("", {"A": None}) == "_"
    assert misc_entries(merged_misc("_", {"A": "x=y"})) == {"A": "x=y"}


@pytest.mark.parametrize("entries", [{"A|B": "1"}, {"A": "1|2"}, {"": "1"}, {"A=B": "1"},
                                     {"A": "x\ty"}])
def test_entries_that_would_break_the_column_are_refused(entries):
    with pytest.raises(ValueError, match="MISC"):
        merged_misc("_", entries)


def test_same_input_same_bytes():
    entries = {"HeadProb": "0.5000", "DeprelProb": "0.2500"}
    assert len({merged_misc("SpaceAfter=No", dict(entries)) for _ in range(5)}) == 1


def test_format_sentence_writes_through_the_one_writer():
    text = format_sentence(_sentence(), misc=[{"HeadProb": "0.9000"}, {"HeadProb": "1.0000"}])
    rows = text.strip().split("\n")[1:]
    assert rows[0].split("\t")[9] == "SpaceAfter=No|Translit=x|HeadProb=0.9000"
    assert rows[1].split("\t")[9] == "HeadProb=1.0000"


def test_a_misc_layer_adds_its_keys_and_keeps_the_others():
    sentence = _sentence()
    predicted = {"MISC": ["SpaceAfter=Yes|Layer=a", None], "LEMMA": ["dog", "bark"]}
    assert written_misc(sentence, predicted) == [{"SpaceAfter": "Yes", "Layer": "a"}, {}]
    assert written_misc(sentence, predicted, keep_columns="given") == [{"Layer": "a"}, {}]
    assert written_misc(sentence, {"LEMMA": ["dog", "bark"]}) is None
    assert "MISC" not in written_columns(sentence, predicted)  # never written whole over MISC


def test_confidence_wins_over_a_layer_on_the_same_key():
    merged = misc_of_words([{"HeadProb": "layer", "X": "1"}], [{"HeadProb": "0.5000"}])
    assert merged == [{"HeadProb": "0.5000", "X": "1"}]
    with pytest.raises(ValueError, match="2 words"):
        misc_of_words([{}], [{}, {}])


def test_predictions_of_a_misc_layer_are_written_not_dropped():
    sentence = _sentence()
    predictions = Predictions(heads=[[2, 0]], deprels=[["nsubj", "root"]], scores=None,
                              columns=[{"MISC": ["Layer=a", "Layer=b|SpaceAfter=No"]}])
    [block] = prediction_blocks([sentence], predictions)
    misc = [row.split("\t")[9] for row in block.strip().split("\n")[1:]]
    assert misc == ["SpaceAfter=No|Translit=x|Layer=a", "Layer=b|SpaceAfter=No"]
