"""Token-level layers without training: classes built from training data (bounded, all-``_``
columns left out), targets, the loss, vocabulary state with and without layers."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest
import torch

from parser.data.batching import collate, encode
from parser.data.conllu_io import read_conllu, tokenized_sentence
from parser.data.layers import LAYERS, Dictionary, FeatsLayer, LemmaLayer, XposLayer, layer_of
from parser.data.vocab import UNK, Vocabularies
from parser.models.layers import LinearScores
from tests.layers.helpers import FIXTURES


@pytest.fixture()
def morph(morph_files):
    return read_conllu(morph_files[0]).sentences


def test_the_built_in_layers_are_registered_by_name():
    assert {"xpos", "feats", "lemma"} <= set(LAYERS)
    assert (layer_of("xpos").column, layer_of("feats").column, layer_of("lemma").column) == (
        "XPOS", "FEATS", "LEMMA")
    with pytest.raises(ValueError, match="unknown layer 'lemmas'.*registered: .*lemma"):
        layer_of("lemmas")


def test_classes_are_the_column_values_most_frequent_first(morph):
    vocab = XposLayer().classes(morph, max_classes=1000)
    counts = {}
    for sentence in morph:
        for tag in sentence.column("XPOS"):
            counts[tag] = counts.get(tag, 0) + 1
    real = vocab.tokens[3:]
    assert sorted(real) == sorted(counts)
    assert [counts[t] for t in real] == sorted(counts.values(), reverse=True)


def test_a_column_with_thousands_of_values_keeps_a_bounded_class_count(caplog):
    # XPOS holding a sentence id (a leak seen in real treebanks): 3,000 distinct values.
    sentences = [tokenized_sentence(["a", "b", "c"], path="x", stem="x", line=i) for i in range(1000)]
    sentences = [_with_column(s, "XPOS", [f"id{i}-{w}" for w in range(3)]) for i, s in enumerate(sentences)]
    with caplog.at_level(logging.WARNING):
        vocab = XposLayer().classes(sentences, max_classes=50)
    assert len(vocab) == 53  # PAD, UNK, ROOT and the 50 kept
    [record] = [r for r in caplog.records if "xpos" in r.getMessage()]
    assert "3000 distinct XPOS classes" in record.getMessage()
    assert "kept the 50 most frequent" in record.getMessage()
    assert "other 2950 are never predicted" in record.getMessage()
    # a word of a class not kept has UNK: out of the loss, never predicted
    encoded = encode(sentences[-1], _vocabs(sentences, xpos=vocab), index=0)
    assert encoded.layers["xpos"][1:].tolist() == [UNK, UNK, UNK]


def test_an_all_underscore_column_has_no_classes_and_says_so_once(caplog):
    sentences = read_conllu(FIXTURES / "tiny-train.conllu").sentences  # XPOS and FEATS all '_'
    with caplog.at_level(logging.INFO):
        vocabs = Vocabularies.build(sentences, min_freq=1,
                                    layers=[XposLayer(), FeatsLayer(), LemmaLayer()])
    assert set(vocabs.layers) == {"lemma"}
    said = [r.getMessage() for r in caplog.records if "'_' on every training word" in r.getMessage()]
    assert len(said) == 2 and any("XPOS" in m for m in said) and any("FEATS" in m for m in said)


def test_targets_of_a_sentence_and_its_batch(morph):
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[XposLayer(), LemmaLayer()])
    sentence = morph[0]
    encoded = encode(sentence, vocabs, index=0)
    assert encoded.layers["xpos"][0] == -1  # ROOT
    names = [vocabs.layers["xpos"].token(i) for i in encoded.layers["xpos"][1:].tolist()]
    assert names == sentence.column("XPOS")
    lemma = LemmaLayer()
    gold = encoded.layers["lemma"][1:]
    scores = torch.nn.functional.one_hot(gold, len(vocabs.layers["lemma"])).float()
    assert _decode(lemma, sentence.forms, scores, vocabs.layers["lemma"]) == sentence.column("LEMMA")
    assert encode(sentence, vocabs, index=0, layer_targets=False).layers == {}
    longer = encode(morph[1], vocabs, index=1)
    batch = collate([encoded, longer], labeled=True)
    assert batch.layers["xpos"].shape == batch.words.shape
    assert batch.layers["xpos"][0, len(sentence) + 1:].eq(-1).all()  # padding
    assert collate([encoded, longer], labeled=False).layers is None
    assert batch.without_annotation().layers is None
    assert batch.to("cpu").layers["lemma"].equal(batch.layers["lemma"])


def test_the_loss_is_the_cross_entropy_of_the_kept_classes():
    torch.manual_seed(0)
    scores = torch.randn(2, 4, 7)
    gold = torch.tensor([[-1, 3, UNK, 6], [-1, 4, -1, -1]])
    kept = gold >= 3
    expected = torch.nn.functional.cross_entropy(scores[kept], gold[kept])
    torch.testing.assert_close(XposLayer().loss(scores, gold), expected)
    assert XposLayer().predict(scores).min() >= 3  # never PAD, UNK or ROOT


def test_a_lemma_script_that_cannot_apply_gives_the_form():
    lemma = LemmaLayer()
    script = lemma.target("walking", "walk")  # drops four letters
    assert lemma.value("walking", script) == "walk"
    assert lemma.value("go", script) == "go"  # too short: the form itself


def test_vocabulary_state_round_trips_and_a_state_from_before_layers_loads(morph):
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[XposLayer(), FeatsLayer(), LemmaLayer()])
    state = vocabs.state_dict()
    assert Vocabularies.from_state_dict(state) == vocabs
    assert Vocabularies.from_state_dict(state).layers["feats"] == vocabs.layers["feats"]
    old = {name: value for name, value in state.items() if name != "layers"}
    restored = Vocabularies.from_state_dict(old)
    assert restored.layers == {} and restored.words == vocabs.words
    # a model without layers writes the state it wrote before layers existed
    plain = Vocabularies.build(morph, min_freq=1)
    assert "layers" not in plain.state_dict()


def _with_column(sentence, column, values):
    from dataclasses import replace

    from parser.data.conllu_io import COLUMNS
    index = COLUMNS.index(column)
    lines = list(sentence.lines)
    for row, value in zip(sentence.word_rows, values):
        cols = lines[row].split("\t")
        cols[index] = value
        lines[row] = "\t".join(cols)
    return replace(sentence, lines=lines, heads=[0] + [1] * (len(sentence) - 1),
                   deprels=["root"] + ["dep"] * (len(sentence) - 1))


def _vocabs(sentences, **layers):
    base = Vocabularies.build(sentences, min_freq=1)
    return Vocabularies(base.words, base.chars, base.upos, base.rels, layers)


def test_the_dictionary_holds_each_training_forms_classes_and_their_suffixes(morph):
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[XposLayer(), LemmaLayer()])
    assert set(vocabs.lexicons) == {"xpos", "lemma"}
    lemma, dictionary = LemmaLayer(), vocabs.lexicons["lemma"]
    pairs = {(f, lemma.target(f, l)) for s in morph for f, l in zip(s.forms, s.column("LEMMA"))}
    assert {(f, t) for f, ts in dictionary["forms"].items() for t in ts} == pairs
    for suffix, targets in dictionary["suffixes"].items():
        assert 1 <= len(suffix) <= dictionary["suffix_length"]
        assert set(targets) == {t for f, t in pairs if f.endswith(suffix) and len(f) > len(suffix)}
    state = vocabs.state_dict()
    assert all(isinstance(lexicon["forms"], str) for lexicon in state["lexicons"].values())
    assert Vocabularies.from_state_dict(state).lexicons == vocabs.lexicons
    # 4de1925-b6b1d8b saved the tables as dicts of lists
    unpacked = {name: {key: dict(value) if isinstance(value, Mapping) else value
                       for key, value in lexicon.items()} for name, lexicon in vocabs.lexicons.items()}
    assert Vocabularies.from_state_dict({**state, "lexicons": unpacked}).lexicons == vocabs.lexicons
    old = {k: v for k, v in state.items() if k not in ("layers", "lexicons")}
    assert Vocabularies.from_state_dict(old).lexicons == {}


def _decode(layer, forms, scores, classes, lexicon=None):
    """One sentence's column: ``scores [n, C]`` as a batch of one."""
    return layer.decode([forms], scores[None], classes, lexicon)[0]


def test_a_batch_decodes_as_its_sentences_alone(morph):
    feats = FeatsLayer()
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[feats])
    classes, dictionary = vocabs.layers["feats"], vocabs.lexicons["feats"]
    forms = [s.forms for s in morph[:4]] + [["Unseenly", "zzq"]]
    width = max(len(f) for f in forms) + 2  # padding beyond every sentence
    scores = torch.randn(len(forms), width, len(classes), generator=torch.Generator().manual_seed(3))
    for lexicon in (None, dictionary):
        together = feats.decode(forms, scores, classes, lexicon)
        alone = [_decode(feats, f, scores[b, : len(f)], classes, lexicon) for b, f in enumerate(forms)]
        assert together == alone


def test_ties_go_to_the_first_class_as_the_heads_argmax(morph):
    # scores of few values: most words have several best classes, allowed or not
    feats = FeatsLayer()
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[feats])
    classes, dictionary = vocabs.layers["feats"], vocabs.lexicons["feats"]
    forms = [f for s in morph for f in s.forms] + ["Unseenly", "zzq"]
    generator = torch.Generator().manual_seed(1)
    for _ in range(10):
        scores = torch.randint(0, 2, (len(forms), len(classes)), generator=generator).float()
        expected = []
        for word, form in enumerate(forms):
            allowed = sorted(c for c in (classes.index(t) for t in feats.allowed(form, dictionary) or ())
                             if c >= 3) or range(3, len(classes))
            top = max(float(scores[word, c]) for c in allowed)
            first = min(c for c in allowed if float(scores[word, c]) == top)
            expected.append(feats.value(form, classes.token(first)))
        assert _decode(feats, forms, scores, classes, dictionary) == expected


def _brute_force_decode(layer, forms, scores, classes, lexicon):
    """The best class of each word among those the dictionary allows, by a loop over classes."""
    values = []
    for word, form in enumerate(forms):
        allowed = [classes.index(t) for t in (layer.allowed(form, lexicon) or ())]
        allowed = [c for c in allowed if c >= 3] or range(3, len(classes))
        best = max(allowed, key=lambda c: float(scores[word, c]))
        values.append(layer.value(form, classes.token(best)))
    return values


def test_decoding_picks_the_best_class_the_dictionary_allows(morph):
    feats = FeatsLayer()
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[feats])
    classes, dictionary = vocabs.layers["feats"], vocabs.lexicons["feats"]
    forms = [f for s in morph for f in s.forms] + ["Unseenly", "zzq", "x"]  # suffix, none, 1 char
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        scores = torch.randn(len(forms), len(classes), generator=generator)
        assert _decode(feats, forms, scores, classes, dictionary) == _brute_force_decode(
            feats, forms, scores, classes, dictionary)
    # a seen form never gets a class it was not seen with, whatever the head prefers
    form = morph[0].forms[0]
    scores = torch.zeros(1, len(classes))
    banned = [c for c in range(3, len(classes)) if classes.token(c) not in dictionary["forms"][form]]
    scores[0, banned] = 10.0
    assert _decode(feats, [form], scores, classes) != _decode(feats, [form], scores, classes, dictionary)
    assert _decode(feats, [form], scores, classes, dictionary)[0] in (
        None if t == "_" else t for t in dictionary["forms"][form])


def test_an_unseen_form_takes_the_classes_of_its_longest_known_suffix():
    lemma = LemmaLayer()
    trees = [_with_column(tokenized_sentence(["walked", "talks", "sing"], path="x", stem="x", line=1),
                          "LEMMA", ["walk", "talk", "sing"])]
    dictionary = lemma.lexicon(trees)
    assert lemma.allowed("barked", dictionary) == [lemma.target("walked", "walk")]  # -ked
    assert lemma.allowed("ring", dictionary) == [lemma.target("sing", "sing")]  # -ing
    assert lemma.allowed("qqq", dictionary) is None  # no suffix known: any class
    assert lemma.allowed("d", dictionary) is None  # a suffix must be shorter than the form
    assert lemma.lexicon([]) is None


def test_a_dictionary_class_the_head_lacks_is_passed_over(morph):
    # a class cut by layer_max_classes is in the dictionary but not a head output: ignored
    xpos = XposLayer()
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[xpos], max_classes=1)
    classes, dictionary = vocabs.layers["xpos"], vocabs.lexicons["xpos"]
    form = next(f for f, ts in dictionary["forms"].items() if classes.token(3) not in ts)
    scores = torch.randn(1, len(classes))
    assert _decode(xpos, [form], scores, classes, dictionary) == [classes.token(3)]


def test_a_lemma_lexicon_of_the_earlier_form_still_decodes():
    # dc4d0bd wrote the LEMMA lexicon as form -> lemma
    lemma = LemmaLayer()
    trees = [_with_column(tokenized_sentence(["dogs", "sing"], path="x", stem="x", line=1),
                          "LEMMA", ["dog", "sing"])]
    classes = lemma.classes(trees, max_classes=10)
    scores = torch.zeros(2, len(classes))
    scores[:, classes.index(lemma.target("x", "x"))] = 5.0  # the head says: the form itself
    assert _decode(lemma, ["dogs", "cats"], scores, classes) == ["dogs", "cats"]
    assert _decode(lemma, ["dogs", "cats"], scores, classes, {"dogs": "dog"}) == ["dog", "cats"]


def test_a_lazy_head_reads_as_its_computed_scores():
    generator = torch.Generator().manual_seed(4)
    head = torch.nn.Linear(6, 9).double()
    states = torch.randn(3, 5, 6, dtype=torch.float64, generator=generator)
    lazy, dense = LinearScores(head, states), head(states)
    b, t, c = torch.tensor([0, 2, 2, 1]), torch.tensor([4, 0, 3, 3]), torch.tensor([8, 0, 5, 5])
    with torch.no_grad():
        torch.testing.assert_close(lazy.full(), dense)
        torch.testing.assert_close(lazy.rows(b, t), dense[b, t])
        torch.testing.assert_close(lazy.cells(b, t, c), dense[b, t, c])
        # [:, k:] reads the same states from position k: positions t >= 2 seen through two offsets
        later = t >= 2
        b2, t2, c2 = b[later], t[later], c[later]
        for tail, shift in ((lazy[:, 1:], 1), (lazy[:, 2:], 2), (lazy[:, 1:][:, 1:], 2)):
            torch.testing.assert_close(tail.full(), dense[:, shift:])
            torch.testing.assert_close(tail.rows(b2, t2 - shift), dense[b2, t2])
            torch.testing.assert_close(tail.cells(b2, t2 - shift, c2), dense[b2, t2, c2])
    with pytest.raises(IndexError, match=r"only \[:, k:\]"):
        lazy[0:1, 1:]


@pytest.mark.parametrize("layer", [FeatsLayer(), LemmaLayer()])
def test_a_lazy_head_decodes_as_the_whole_product(morph, layer):
    # Restricted words read their few classes' cells, unrestricted ones ("zzq") whole rows.
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[layer])
    classes, lexicon = vocabs.layers[layer.name], vocabs.lexicons[layer.name]
    forms = [s.forms for s in morph[:4]] + [["Unseenly", "zzq"]]
    width = max(len(f) for f in forms) + 2
    restricts = Dictionary(layer, lexicon, classes).ids
    assert {bool(restricts(form)) for words in forms for form in words} == {True, False}
    generator = torch.Generator().manual_seed(5)
    head = torch.nn.Linear(7, len(classes)).double()
    for _ in range(5):
        states = torch.randn(len(forms), width, 7, dtype=torch.float64, generator=generator)
        with torch.no_grad():
            for dictionary in (None, lexicon):
                expected = layer.decode(forms, head(states), classes, dictionary)
                assert layer.decode(forms, LinearScores(head, states), classes, dictionary) == expected


@pytest.mark.parametrize("layer", [FeatsLayer(), LemmaLayer()])
def test_new_words_never_grow_the_dictionary_memory(morph, layer):
    # A service reads new words for days: only the lexicon's own forms are remembered, and a form
    # decodes the same whether it was remembered or not.
    vocabs = Vocabularies.build(morph, min_freq=1, layers=[layer])
    classes, lexicon = vocabs.layers[layer.name], vocabs.lexicons[layer.name]
    dictionary = Dictionary(layer, lexicon, classes)
    known = [s.forms for s in morph[:4]]
    unseen = [[f"Unseen{i}ly", f"zz{i}q", f"{i}"] for i in range(300)]
    head = torch.nn.Linear(7, len(classes)).double()
    generator = torch.Generator().manual_seed(3)
    for forms in (known, unseen, known):
        width = max(len(f) for f in forms) + 2
        states = torch.randn(len(forms), width, 7, dtype=torch.float64, generator=generator)
        with torch.no_grad():
            remembered = layer.decode(forms, head(states), classes, dictionary)
            fresh = layer.decode(forms, head(states), classes, Dictionary(layer, lexicon, classes))
        assert remembered == fresh
    lexicon_forms = {form for words in known for form in words if form in dictionary.lexicon["forms"]}
    assert lexicon_forms and set(dictionary._ids) == lexicon_forms
    assert {form for form, _ in dictionary._values} <= lexicon_forms
