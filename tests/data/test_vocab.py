"""Vocabularies: reserved ids, cut-off, lookup, state round trip, universal relations, UNK rates."""

from __future__ import annotations

import json

import pytest
import torch

from parser.data.conllu_io import read_conllu
from parser.data.vocab import N_SPECIAL, PAD, ROOT, UNK, Vocab, Vocabularies


def test_reserved_ids_and_order():
    vocab = Vocab.build({"b": 2, "a": 2, "c": 5, "rare": 1}, min_freq=2)
    assert (PAD, UNK, ROOT, N_SPECIAL) == (0, 1, 2, 3)
    assert vocab.tokens == ["<pad>", "<unk>", "<root>", "c", "a", "b"]  # count desc, then a-z
    assert vocab.index("c") == 3 and vocab.index("rare") == UNK and vocab.index(None) == UNK
    assert vocab.indices(["a", "zzz", "b"]) == [4, UNK, 5]
    assert vocab.token(5) == "b" and len(vocab) == 6 and "a" in vocab and "rare" not in vocab
    assert vocab.count_unknown(["a", "x", "y", "c"]) == (2, 4)


def test_bad_vocab_input():
    with pytest.raises(ValueError, match="min_freq"):
        Vocab.build({"a": 1}, min_freq=0)
    with pytest.raises(ValueError, match="duplicate entry 'a'"):
        Vocab(["a", "a"])
    with pytest.raises(ValueError, match="id 7 out of range"):
        Vocab(["a"]).token(7)
    with pytest.raises(ValueError, match="must start with"):
        Vocab.from_state_dict({"name": "w", "tokens": ["a", "b", "c"]})


def test_vocabularies_from_tiny_train(fixtures):
    train = read_conllu(fixtures / "tiny-train.conllu")
    vocabs = Vocabularies.build(train, min_freq=2)
    forms = [f for s in train for f in s.forms]
    kept = {f for f in forms if forms.count(f) >= 2}
    assert set(vocabs.words.tokens[N_SPECIAL:]) == kept
    assert "The" in vocabs.words and "the" in vocabs.words  # forms keep their case
    assert set(vocabs.chars.tokens[N_SPECIAL:]) == {c for f in forms for c in f}
    assert set(vocabs.upos.tokens[N_SPECIAL:]) == {u for s in train for u in s.upos}
    assert "nmod:poss" in vocabs.rels and "obl:tmod" in vocabs.rels  # relations kept whole
    assert vocabs.rels.tokens[N_SPECIAL] == "punct"  # the most frequent relation


def test_rel_universal_ids_ignore_subtypes():
    vocabs = Vocabularies(Vocab(), Vocab(), Vocab(),
                          Vocab(["nmod", "obl:tmod", "nmod:poss", "obl", "acl:relcl"]))
    ids = vocabs.rel_universal_ids()
    assert ids.dtype == torch.long and ids.shape == (len(vocabs.rels),)
    rel = vocabs.rels.index
    assert ids[rel("nmod")] == ids[rel("nmod:poss")]
    assert ids[rel("obl")] == ids[rel("obl:tmod")]
    assert ids[rel("nmod")] != ids[rel("obl")] and ids[rel("acl:relcl")] != ids[rel("obl")]
    assert ids[:N_SPECIAL].tolist() == [PAD, UNK, ROOT]  # UNK never equals a real relation
    assert int(ids[N_SPECIAL:].min()) >= N_SPECIAL


def test_state_dict_round_trip_through_json(fixtures):
    vocabs = Vocabularies.build(read_conllu(fixtures / "tiny-train.conllu"))
    state = json.loads(json.dumps(vocabs.state_dict()))  # plain lists and dicts only
    again = Vocabularies.from_state_dict(state)
    assert again == vocabs and again.sizes() == vocabs.sizes()
    with pytest.raises(ValueError, match="missing"):
        Vocabularies.from_state_dict({"words": state["words"]})


def test_unknown_rates(fixtures):
    train = read_conllu(fixtures / "tiny-train.conllu")
    dev = read_conllu(fixtures / "tiny-dev.conllu")
    vocabs = Vocabularies.build(train, min_freq=2)
    forms = [f for s in dev for f in s.forms]
    unseen = sum(f not in vocabs.words for f in forms)
    rates = vocabs.unknown_rates(dev)
    assert rates["words"] == pytest.approx(unseen / len(forms))
    assert 0 < rates["words"] < 1 and rates["upos"] == 0.0
    assert vocabs.unknown_rates(train)["rels"] == 0.0


def test_vocab_state_is_one_string_and_the_old_list_still_loads():
    vocab = Vocab(["the", "", "a b", "x\u2028y"], name="words")  # odd but legal tokens survive
    state = vocab.state_dict()
    assert isinstance(state["tokens"], str)
    assert Vocab.from_state_dict(state) == vocab
    assert Vocab.from_state_dict({"name": "words", "tokens": vocab.tokens}) == vocab  # before joining
    with pytest.raises(ValueError, match="holds a newline"):
        Vocab(["a\nb"], name="words").state_dict()
