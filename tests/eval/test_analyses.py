"""parser.eval.analyses on a three-sentence fixture (tests/fixtures/analyses/) whose counts were
worked out by hand: gold.conllu (with a multiword token and an empty node, which are not words)
and pred.conllu (the same words, other heads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parser.eval.analyses import direction_diagnosis, function_word_directions, punct_attachment
from parser.eval.analyses.paired import read_pair, universal_relation

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "analyses"
GOLD, PRED = HERE / "gold.conllu", HERE / "pred.conllu"


def test_pairs_skip_multiword_tokens_and_empty_nodes() -> None:
    pairs = read_pair(GOLD, PRED)
    assert [len(g) for g, _ in pairs] == [5, 5, 5]
    assert pairs[1][0].forms == ["She", "do", "n't", "leave", "."]
    assert [p.heads for _, p in pairs] == [[0, 1, 2, 1, 4], [4, 1, 4, 0, 3], [2, 0, 2, 2, 4]]
    assert universal_relation("nmod:poss") == "nmod" and universal_relation(None) == "_"


def test_a_prediction_of_other_sentences_is_refused_naming_it(tmp_path: Path) -> None:
    blocks = PRED.read_text(encoding="utf-8").split("\n\n")
    short = tmp_path / "short.conllu"
    short.write_text("\n\n".join(blocks[:2]) + "\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"short\.conllu: 2 sentences, .*gold\.conllu has 3"):
        read_pair(GOLD, short)
    lines = blocks[0].split("\n")
    cut = tmp_path / "cut.conllu"  # first sentence without its final punctuation
    cut.write_text("\n".join(lines[:-1]) + "\n\n" + "\n\n".join(blocks[1:]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"cut\.conllu:1: 4 words, .*gold\.conllu:1 has 5"):
        read_pair(GOLD, cut)


def test_direction_diagnosis_counts() -> None:
    c = direction_diagnosis.counts(read_pair(GOLD, PRED))
    assert (c["words"], c["correct"]) == (15, 7)
    assert (c["conj"], c["conj correct"], c["root"], c["root correct"]) == (1, 0, 3, 2)
    assert (c["punct"], c["punct correct"], c["nsubj"], c["nsubj correct"]) == (3, 1, 4, 2)
    # "left" (VERB, head 2 = "said", VERB) is the only VERB<-VERB arc predicted.
    assert (c["VERB<-VERB head before"], c["VERB<-VERB head after"]) == (1, 0)
    # "dogs" follows "and": predicted head "and" itself (not before it), wrong.
    assert c["after-CCONJ NOUN|PROPN"] == 1
    assert c["after-CCONJ NOUN|PROPN head before the CCONJ"] == 0
    assert c["after-CCONJ NOUN|PROPN correct"] == 0
    gold = direction_diagnosis.counts(read_pair(GOLD, GOLD))
    assert gold["correct"] == 15 and gold["after-CCONJ NOUN|PROPN head before the CCONJ"] == 1
    text = direction_diagnosis.format_counts("pred", c)
    assert text.startswith("== pred: UAS 46.67, conj 0/1 (0.0%), root 2/3 (66.7%)")
    assert "punct 33, nsubj 50" in text


def test_function_word_sides() -> None:
    c = function_word_directions.sides(read_pair(GOLD, PRED))
    assert c["CCONJ", "left"] == 1 and c["CCONJ", "correct"] == 0
    assert c["AUX", "left"] == 1 and c["AUX", "correct"] == 0
    assert c["PART", "right"] == 1 and c["PART", "correct"] == 1
    assert sum(c[t, s] for t in ("ADP", "SCONJ", "DET") for s in ("left", "right", "root")) == 0
    gold = function_word_directions.sides(read_pair(GOLD, GOLD))
    assert [gold[t, "right"] for t in ("AUX", "PART", "CCONJ")] == [1, 1, 1]
    assert "CCONJ n=    1  head left     1  right     0  root   0  q=1.000" in (
        function_word_directions.format_sides("pred", c))


def test_punct_attachment() -> None:
    assert punct_attachment.summary(read_pair(GOLD, PRED)) == {
        "punct": 3, "correct": 1, "final": 3, "final_correct": 1, "adjacent": 2,
        "on_root_word": 0, "distance": 4}
    assert punct_attachment.summary(read_pair(GOLD, GOLD)) == {
        "punct": 3, "correct": 3, "final": 3, "final_correct": 3, "adjacent": 2,
        "on_root_word": 3, "distance": 5}


def test_commands_print_gold_then_each_prediction(capsys: pytest.CaptureFixture) -> None:
    assert punct_attachment.main([str(GOLD), str(PRED)]) == 0
    out = capsys.readouterr().out
    assert out.index(f"== gold {GOLD}") < out.index(f"== {PRED}")  # the gold file labelled as such
    assert "PUNCT 3: correct 1 (33.3%), head adjacent 66.7%, head = the root word 0.0%, mean distance 1.33" in out
    assert direction_diagnosis.main([str(GOLD)]) == 2  # usage: no prediction given
