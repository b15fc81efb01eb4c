"""Tagging objectives against brute-force enumeration of tag sequences."""

from __future__ import annotations

import math

import pytest
import torch

from parser.data.vocab import N_SPECIAL
from parser.tagger.features import TagConstraints, TagFeature, estimate_targets, frequent_forms
from parser.tagger.objectives import (
    TagEntropy,
    TagGE,
    TagLikelihood,
    build_tag_objective,
    gold_tags,
)
from tests.structs.brute_chain import brute_quantities, enumerate_chain
from tests.tagger.helpers import batch_of, brute_unary, corpus, random_output, sentence, vocabs_of


@pytest.fixture(scope="module")
def setting():
    sentences = corpus()
    vocabs = vocabs_of(sentences)
    return sentences, vocabs, batch_of(sentences, vocabs)


def grad(loss, scores):
    return torch.autograd.grad(loss, scores)[0]


def test_gold_tags_drop_root_and_mark_padding(setting):
    sentences, vocabs, batch = setting
    tags = gold_tags(batch, n_tags=len(vocabs.upos) - N_SPECIAL, who="test")
    assert tags.shape == (3, 4)
    for b, s in enumerate(sentences):
        assert tags[b, : len(s)].tolist() == [vocabs.upos.index(t) - N_SPECIAL for t in s.upos]
        assert (tags[b, len(s):] == -1).all()


def test_likelihood_matches_enumeration(setting):
    sentences, vocabs, batch = setting
    out, scores = random_output(batch, 3, seed=0)
    result = TagLikelihood()(out, batch)
    expected = 0.0
    for b, s in enumerate(sentences):
        seqs, _, log_weights, log_z = enumerate_chain(scores[b], len(s))
        gold = tuple(vocabs.upos.index(t) - N_SPECIAL for t in s.upos)
        expected = expected - (log_weights[seqs.index(gold)] - log_z)
    expected = expected / batch.n_tokens
    torch.testing.assert_close(result.loss, expected)
    torch.testing.assert_close(grad(result.loss, scores), grad(expected, scores))


def test_likelihood_with_unannotated_words_marginalises_them(setting):
    _sentences, vocabs, _ = setting
    partial = [sentence(["the", "dog", "barks"], ["DET", None, "VERB"]),
               sentence(["Dogs", "bark"], [None, None])]
    batch = batch_of(partial, vocabs)
    out, scores = random_output(batch, 3, seed=1)
    result = TagLikelihood()(out, batch)
    expected = 0.0
    for b, s in enumerate(partial):
        seqs, _, log_weights, log_z = enumerate_chain(scores[b], len(s))
        gold = [None if t is None else vocabs.upos.index(t) - N_SPECIAL for t in s.upos]
        keep = [k for k, seq in enumerate(seqs)
                if all(g is None or g == y for g, y in zip(gold, seq))]
        expected = expected - (torch.logsumexp(log_weights[keep], 0) - log_z)
    expected = expected / batch.n_tokens
    torch.testing.assert_close(result.loss, expected)
    torch.testing.assert_close(grad(result.loss, scores), grad(expected, scores))


@pytest.mark.parametrize("method", ["mann_mccallum", "autograd"])
def test_entropy_value_and_gradient_match_enumeration(setting, method):
    sentences, _, batch = setting
    out, scores = random_output(batch, 3, seed=2)
    result = TagEntropy(method=method)(out, batch)
    expected = sum(brute_quantities(scores[b], len(s))["entropy"] for b, s in enumerate(sentences))
    expected = expected / batch.n_tokens
    torch.testing.assert_close(result.loss, expected)
    torch.testing.assert_close(grad(result.loss, scores), grad(expected, scores))
    assert result.logs["value"] == result.loss.detach()


def brute_ge(sentences, scores, features, targets, criterion):
    """GE loss from enumerated marginals and string matching, one Python loop per word."""
    states = targets.shape[1]
    expected = [torch.zeros(states, dtype=torch.float64) for _ in features]
    counts = [0] * len(features)
    for b, s in enumerate(sentences):
        unary = brute_unary(scores[b], len(s))
        for i, form in enumerate(s.forms):
            for k, feature in enumerate(features):
                if feature.fires(form):
                    expected[k] = expected[k] + unary[i]
                    counts[k] += 1
    loss = torch.zeros((), dtype=torch.float64)
    for k in range(len(features)):
        if counts[k] == 0:
            continue
        model = expected[k] / counts[k]
        if criterion == "squared":
            loss = loss + ((targets[k] - model) ** 2).sum()
        else:
            t = targets[k]
            loss = loss + sum(t[s] * math.log(t[s]) - t[s] * model[s].log() for s in range(states) if t[s] > 0)
    return loss


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_ge_value_and_gradient_match_enumeration(setting, criterion):
    sentences, vocabs, batch = setting
    features = [TagFeature("form", "the"), TagFeature("suffix", "s"), TagFeature("suffix", "ed"),
                TagFeature("form", "bark"), TagFeature("form", "unseen"),
                TagFeature("suffix", "ly")]
    targets, _ = estimate_targets(sentences, features, vocabs.upos, smoothing=0.5)
    targets[0] = torch.tensor([0.0, 0.25, 0.75], dtype=torch.float64)  # a zero target entry
    constraints = TagConstraints(features, targets, vocabs.chars)
    out, scores = random_output(batch, 3, seed=3)
    result = TagGE(constraints, criterion=criterion)(out, batch)
    expected = brute_ge(sentences, scores, features, targets, criterion)
    torch.testing.assert_close(result.loss, expected)
    torch.testing.assert_close(grad(result.loss, scores), grad(expected, scores))
    assert float(result.logs["active"]) == 5  # "unseen" never fires


def test_features_fire_like_the_string_rule(setting):
    sentences, vocabs, batch = setting
    features = [TagFeature("form", "the"), TagFeature("form", "dogs"), TagFeature("suffix", "s"),
                TagFeature("suffix", "barks"), TagFeature("suffix", "ed"),
                TagFeature("form", "thé")]  # a character outside the vocabulary never fires
    fires = TagConstraints(features, torch.full((6, 3), 1 / 3), vocabs.chars).fires(
        batch.chars, batch.lengths)
    assert fires.shape == (3, 4, 6)
    for b, s in enumerate(sentences):
        for i in range(4):
            want = [i < len(s) and f.fires(s.forms[i]) for f in features]
            assert fires[b, i].tolist() == want
    assert fires[0, 0, 0] and fires[1, 0, 0]  # "The" and "the": case-insensitive
    assert not fires[0, 2, 3]  # a suffix must be shorter than the form


def test_estimate_targets_by_hand(setting):
    sentences, vocabs, _ = setting
    features = [TagFeature("suffix", "s"), TagFeature("form", "none")]
    targets, counts = estimate_targets(sentences, features, vocabs.upos, smoothing=1.0)
    # words ending in s: barks (VERB), Cats (NOUN), Dogs (NOUN)
    tag = {t: vocabs.upos.index(t) - N_SPECIAL for t in ("DET", "NOUN", "VERB")}
    want = torch.zeros(3, dtype=torch.float64)
    want[tag["VERB"]], want[tag["NOUN"]], want[tag["DET"]] = 2 / 6, 3 / 6, 1 / 6
    torch.testing.assert_close(targets[0], want)
    torch.testing.assert_close(targets[1], torch.full((3,), 1 / 3, dtype=torch.float64))
    assert counts.tolist() == [3, 0]
    assert [f.name for f in frequent_forms(sentences, top_k=2)] == ["form=the", "form=bark"]


def test_constraints_and_objectives_reject_bad_input(setting):
    _, vocabs, _ = setting
    with pytest.raises(ValueError, match="kind"):
        TagFeature("prefix", "un")
    with pytest.raises(ValueError, match="lowercase"):
        TagFeature("form", "The")
    with pytest.raises(ValueError, match=r"targets\[0\] \(form=the\)"):
        TagConstraints([TagFeature("form", "the")], torch.tensor([[0.5, 0.6, 0.0]]), vocabs.chars)
    with pytest.raises(ValueError, match="criterion"):
        TagGE(TagConstraints([TagFeature("form", "the")], torch.full((1, 3), 1 / 3), vocabs.chars),
              criterion="l1")
    with pytest.raises(ValueError, match="method"):
        TagEntropy(method="jiao")


def test_build_tag_objective_composes_weighted_terms(setting):
    _sentences, vocabs, batch = setting
    constraints = TagConstraints([TagFeature("form", "the")],
                                 torch.full((1, 3), 1 / 3, dtype=torch.float64), vocabs.chars)
    objective = build_tag_objective(
        {"likelihood": {"weight": 1.0}, "entropy": {"weight": 0.5, "stream": "any"},
         "ge": {"weight": 2.0, "criterion": "squared", "stream": "any", "top_forms": 3},
         "off": {"type": "entropy", "weight": 0}},
        constraints=constraints,
    )
    assert objective.names == ["likelihood", "entropy", "ge"]
    out, _scores = random_output(batch, 3, seed=4)
    # an unlabeled batch (no heads): likelihood is skipped, entropy and ge apply
    result = objective(out, batch)
    want = 0.5 * TagEntropy()(out, batch).loss + 2.0 * TagGE(constraints, criterion="squared")(out, batch).loss
    torch.testing.assert_close(result.loss, want)
    assert "likelihood/loss" not in result.logs and "ge/active" in result.logs
    with pytest.raises(ValueError, match="unknown kind"):
        build_tag_objective({"risk": {}})
    with pytest.raises(ValueError, match="unknown options"):
        build_tag_objective({"entropy": {"alpha": 2}})
    with pytest.raises(ValueError, match="needs constraints"):
        build_tag_objective({"ge": {}})


def test_enumeration_helper_is_a_distribution():
    scores = torch.randn(3, 2, 2, dtype=torch.float64)
    unary = brute_unary(scores, 3)
    torch.testing.assert_close(unary.sum(-1), torch.ones(3, dtype=torch.float64))
