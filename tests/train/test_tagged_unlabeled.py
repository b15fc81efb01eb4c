"""Unlabeled text tagged by ``data.tagger`` before encoding (GE on predicted tags): the unlabeled
batches carry the tagger's predictions; missing UPOS with a GE term and no tagger is an error."""

from __future__ import annotations

import logging

import pytest
import torch

from parser.config import DataConfig
from parser.data.conllu_io import read_conllu
from parser.data.streams import UNLABELED
from parser.runtime.checkpoint import CheckpointError
from parser.tagger.predict import load_tagger, tag_sentences
from parser.train.training_data import load_training_data, upos_term_names
from tests.tagger.helpers import train_tiny_tagger

GE = {"ge": {"weight": 1.0, "constraints": "ud_universal"}}


@pytest.fixture(scope="module")
def tagger_path(tmp_path_factory):
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_tiny_tagger(tmp_path_factory.mktemp("tagger"), epochs=2)
    finally:
        torch.set_num_threads(previous)


def _config(fixtures, **options) -> DataConfig:
    options = {"train_file": str(fixtures / "tiny-train.conllu"), "labeled_size": 0, **options}
    return DataConfig(dev_split=None, test_split=None, min_freq=1, tokens_per_batch=60, **options)


def _unlabeled_upos(data, n_batches: int) -> dict[int, list[str]]:
    """UPOS strings of the unlabeled batches, by sentence index into ``data.unlabeled``."""
    seen: dict[int, list[str]] = {}
    names = data.vocabs.upos.tokens
    for _ in range(n_batches):
        kind, batch = data.stream.next()
        assert kind == UNLABELED and batch.heads is None
        for row, index in enumerate(batch.index.tolist()):
            n = int(batch.lengths[row])
            seen[index] = [names[i] for i in batch.upos[row, 1 : n + 1].tolist()]
    return seen


def _check_batches_carry(data, expected: list[list[str]]) -> None:
    seen = _unlabeled_upos(data, n_batches=40)
    assert len(seen) == len(expected)
    for index, tags in seen.items():
        assert tags == expected[index], index


def test_text_file_is_tagged_with_the_taggers_predictions(fixtures, tmp_path, tagger_path, caplog):
    text = tmp_path / "raw.txt"
    text.write_text("The cat sleeps .\nDogs bark loudly .\n")
    with caplog.at_level(logging.INFO, logger="parser.train.training_data"):
        data = load_training_data(
            _config(fixtures, train_split=None, train_file=None, treebank="none",
                    unlabeled_file=str(text), tagger=str(tagger_path)),
            seed=0, objective_terms=GE,
        )
    predicted = tag_sentences(load_tagger(tagger_path), [["The", "cat", "sleeps", "."],
                                                         ["Dogs", "bark", "loudly", "."]])
    assert [s.upos for s in data.unlabeled] == predicted
    assert all(tag is not None for s in data.unlabeled for tag in s.upos)
    _check_batches_carry(data, predicted)
    assert "tagged 2 of 2 unlabeled sentences" in caplog.text


def test_retag_replaces_gold_upos_of_the_unlabeled_part_only(fixtures, tagger_path):
    gold = read_conllu(fixtures / "tiny-train.conllu").sentences
    data = load_training_data(
        _config(fixtures, labeled_size=5, tagger=str(tagger_path), retag_unlabeled=True),
        seed=0, objective_terms=GE,
    )
    predicted = tag_sentences(load_tagger(tagger_path), data.unlabeled)
    assert [s.upos for s in data.unlabeled] == predicted
    by_forms = {tuple(s.forms): s.upos for s in gold}
    assert all(s.upos == by_forms[tuple(s.forms)] for s in data.labeled)  # labeled keep gold
    # The tiny tagger is not perfect: retagging changed something, so the test can tell.
    assert any(s.upos != by_forms[tuple(s.forms)] for s in data.unlabeled)
    assert data.stream.unlabeled is not None
    seen = {}
    for _ in range(60):
        kind, batch = data.stream.next()
        if kind != UNLABELED:
            continue
        for row, index in enumerate(batch.index.tolist()):
            n = int(batch.lengths[row])
            seen[index] = [data.vocabs.upos.tokens[i] for i in batch.upos[row, 1 : n + 1].tolist()]
    assert seen and all(tags == predicted[index] for index, tags in seen.items())


def test_gold_upos_kept_without_retag(fixtures, tagger_path):
    gold = read_conllu(fixtures / "tiny-train.conllu").sentences
    data = load_training_data(_config(fixtures, tagger=str(tagger_path)), seed=0, objective_terms=GE)
    assert [s.upos for s in data.unlabeled] == [s.upos for s in gold]


def test_missing_upos_with_ge_and_no_tagger_is_an_error(fixtures, tmp_path, tagger_path):
    text = tmp_path / "raw.txt"
    text.write_text("The cat sleeps .\n")
    config = _config(fixtures, unlabeled_file=str(text))
    with pytest.raises(ValueError, match=r"data\.tagger: 4 of \d+ unlabeled words have no UPOS.*'ge'"):
        load_training_data(config, seed=0, objective_terms=GE)
    # No GE term: the text is used as it is (UPOS unknown).
    data = load_training_data(config, seed=0, objective_terms={"entropy": {"weight": 1.0}})
    assert data.unlabeled[-1].upos == [None] * 4
    with pytest.raises(ValueError, match="retag_unlabeled=true needs data.tagger"):
        load_training_data(_config(fixtures, retag_unlabeled=True), seed=0)
    with pytest.raises(ValueError, match="data.tagger=.*missing.pt: no such file"):
        load_training_data(_config(fixtures, unlabeled_file=str(text), tagger=str(tmp_path / "missing.pt")),
                           seed=0)
    not_a_tagger = tmp_path / "parser.pt"
    torch.save({"kind": "parser"}, not_a_tagger)
    with pytest.raises(CheckpointError, match=r"data\.tagger: checkpoint .*parser\.pt"):
        load_training_data(_config(fixtures, unlabeled_file=str(text), tagger=str(not_a_tagger)),
                           seed=0)


def test_upos_term_names_follow_the_registry():
    assert upos_term_names(None) == []
    assert upos_term_names({"ge": {"weight": 1.0}, "gold": {"type": "likelihood"}}) == ["ge"]
    assert upos_term_names({"mine": {"type": "ge", "weight": 0.5}, "ge": {"weight": 0.0}}) == ["mine"]
