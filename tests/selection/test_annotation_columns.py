"""An annotation file's token columns are not annotation: the LEMMA, UPOS, XPOS and FEATS that
parser-select pre-filled (the pool's or the parser's values) never become training targets, on
the asked-for words either, unless ``data.annotated_columns`` names the column."""

from __future__ import annotations

import pytest

from parser.data.batching import encode
from parser.data.layers import layer_of
from parser.data.vocab import UNK, Vocabularies
from parser.train.training_data import load_training_data
from tests.train.helpers import tiny_config

LAYERS = [layer_of(name) for name in ("xpos", "feats", "lemma")]

# Word 2 is asked for; words 1 and 3 are the parser's guesses with the pool's values, which are
# marked POOL* so that a class learned from them would show.
ANNOTATION = """\
# pool_position = 1
# selected_words = 2
# text = Dogs bark loudly
1\tDogs\tPOOLLEMMA\tPOOLUPOS\tPOOLXPOS\tPool=Yes\t2\tnsubj\t_\t_
2\tbark\tbark\tVERB\tVBP\tMood=Ind\t0\troot\t_\t_
3\tloudly\tPOOLLEMMA\tPOOLUPOS\tPOOLXPOS\tPool=Yes\t2\tadvmod\t_\t_

"""
# A complete tree of the seed: every column is annotation.
SEED = """\
# text = Cats sleep
1\tCats\tcat\tNOUN\tNNS\tNumber=Plur\t2\tnsubj\t_\t_
2\tsleep\tsleep\tVERB\tVBP\tMood=Ind\t0\troot\t_\t_

"""


def _labeled(tmp_path, *overrides):
    path = tmp_path / "train.conllu"
    path.write_text(SEED + ANNOTATION, encoding="utf-8")
    cfg = tiny_config(f"data.train_file={path}", "data.partial_trees=true", *overrides).data
    return load_training_data(cfg, seed=0).labeled


def _targets(sentences):
    vocabs = Vocabularies.build(sentences, min_freq=1, layers=LAYERS)
    classes = {name: set(vocab.tokens) for name, vocab in vocabs.layers.items()}
    encoded = encode(sentences[1], vocabs)
    return vocabs, classes, encoded


def test_prefilled_columns_are_never_targets(tmp_path):
    sentences = _labeled(tmp_path)
    annotation = sentences[1]
    assert annotation.heads == [-1, 0, -1]  # the tree: the asked-for word only
    vocabs, classes, encoded = _targets(sentences)
    # no class was built from the pre-filled values, on any word
    assert not any(token.startswith(("POOL", "Pool")) for tokens in classes.values()
                   for token in tokens)
    assert "Mood=Ind" in classes["feats"] and "NNS" in classes["xpos"]  # the seed's are
    for name, ids in encoded.layers.items():  # the annotation sentence: no word is a target
        assert ids.tolist() == [-1, -1, -1, -1], name
    assert encoded.upos[1:].tolist() == [UNK, UNK, UNK]  # the UPOS head learns nothing there
    seed = encode(sentences[0], vocabs)
    assert all(ids[1:].ge(0).all() for ids in seed.layers.values())
    assert seed.upos[1:].tolist() == vocabs.upos.indices(["NOUN", "VERB"])


def test_annotated_columns_are_targets_on_the_asked_for_words_only(tmp_path):
    sentences = _labeled(tmp_path, "data.annotated_columns=[UPOS,FEATS]")
    vocabs, classes, encoded = _targets(sentences)
    feats = encoded.layers["feats"].tolist()
    assert feats[2] == vocabs.layers["feats"].index("Mood=Ind")
    assert feats[1] == feats[3] == -1  # the unasked words stay the pool's values
    assert "xpos" not in encoded.layers  # not named: no XPOS target on any word
    assert encoded.upos.tolist() == [encoded.upos[0].item(), UNK,
                                     vocabs.upos.index("VERB"), UNK]
    assert "Pool=Yes" not in classes["feats"]


def test_an_unknown_annotated_column_is_refused(tmp_path):
    with pytest.raises(ValueError, match="data.annotated_columns: HEAD"):
        _labeled(tmp_path, "data.annotated_columns=[HEAD]")
