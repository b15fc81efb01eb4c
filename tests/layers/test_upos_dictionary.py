"""The joint tag head's UPOS decoded through a dictionary of the forms seen in training
(:class:`parser.data.layers.UposColumn`): a seen form gets one of its training tags, an unseen
form the head's own best tag; a parser that reads given tags has no such dictionary."""

from __future__ import annotations

from parser.data.conllu_io import read_conllu
from parser.data.layers import UposColumn
from parser.data.vocab import Vocabularies
from parser.inference import load_parser, parse
from tests.layers.helpers import FIXTURES, train_layers

OWN_TAGS = ("model.upos_input=predicted", "model.tag_loss_weight=1.0")


def test_the_upos_dictionary_holds_seen_forms_only():
    trees = read_conllu(FIXTURES / "tiny-train.conllu").sentences
    vocabs = Vocabularies.build(trees, min_freq=1, tag_dictionary=UposColumn())
    dictionary = vocabs.lexicons["upos"]
    assert dictionary["suffixes"] == {} and dictionary["suffix_length"] == 0
    seen = {(f, t) for s in trees for f, t in zip(s.forms, s.upos)}
    assert {(f, t) for f, tags in dictionary["forms"].items() for t in tags} == seen
    assert "upos" not in Vocabularies.build(trees, min_freq=1).lexicons


def test_seen_forms_take_one_of_their_training_tags(tmp_path):
    train, dev = FIXTURES / "tiny-train.conllu", FIXTURES / "tiny-dev.conllu"
    checkpoint = train_layers(tmp_path / "run", train, dev, "model.layers=[]", *OWN_TAGS, steps=8)
    model, vocabs, _ = load_parser(checkpoint)
    training = vocabs.lexicons["upos"]["forms"]
    sentences = read_conllu(dev).sentences
    predictions = parse(model, sentences, vocabs, tokens_per_batch=500)
    checked = 0
    for sentence, tags in zip(sentences, predictions.upos):
        for form, tag in zip(sentence.forms, tags):
            if form in training:
                assert tag in training[form], (form, tag)
                checked += 1
    assert checked > 0
    # the dictionary changed tags the 8-step head got wrong for seen forms, or the head agreed
    vocabs.lexicons.pop("upos")  # decoding without it: the head's argmax
    vocabs.derived.clear()
    plain = parse(model, sentences, vocabs, tokens_per_batch=500)
    changed = sum(a != b for p, q in zip(predictions.upos, plain.upos) for a, b in zip(p, q))
    outside = sum(form in training and tag not in training[form]
                  for sentence, tags in zip(sentences, plain.upos)
                  for form, tag in zip(sentence.forms, tags))
    assert changed == outside  # exactly the argmax tags a seen form never had moved


def test_a_parser_reading_given_tags_has_no_upos_dictionary(tmp_path):
    train, dev = FIXTURES / "tiny-train.conllu", FIXTURES / "tiny-dev.conllu"
    checkpoint = train_layers(tmp_path / "run", train, dev, "model.layers=[]", steps=2)
    _, vocabs, _ = load_parser(checkpoint)
    assert "upos" not in vocabs.lexicons
