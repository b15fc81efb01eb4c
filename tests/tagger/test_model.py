"""Tagger shapes, the chain-score layout, masking and padding invariance."""

from __future__ import annotations

import pytest
import torch

from parser.data.vocab import N_SPECIAL
from parser.tagger.model import Tagger, upos_ids_to_tags
from tests.tagger.helpers import batch_of, corpus, vocabs_of


def small_tagger(vocabs, **options) -> Tagger:
    torch.manual_seed(0)
    return Tagger(n_words=len(vocabs.words), n_chars=len(vocabs.chars),
                  n_tags=len(vocabs.upos) - N_SPECIAL, word_dim=8, char_dim=6, char_hidden=5,
                  char_out=7, lstm_hidden=9, lstm_layers=2, **options)


@pytest.fixture(scope="module")
def setting():
    sentences = corpus()
    vocabs = vocabs_of(sentences)
    return sentences, vocabs, batch_of(sentences, vocabs)


def test_shapes_and_the_chain_score_layout(setting):
    _, vocabs, batch = setting
    model = small_tagger(vocabs).eval()
    with torch.no_grad():
        model.transitions.normal_()
        emissions = model.emissions(batch)
        scores = model.scores(batch)
        out = model(batch)
    assert emissions.shape == (3, 4, 3) and scores.shape == (3, 4, 3, 3)
    trans = model.transitions
    for prev in range(3):  # position 0: the start row, whatever the prev row
        torch.testing.assert_close(scores[:, 0, prev], trans[0] + emissions[:, 0])
    torch.testing.assert_close(scores[:, 1:], trans[1:][None, None] + emissions[:, 1:, None, :])
    torch.testing.assert_close(out.dist.scores, scores)
    assert torch.equal(out.dist.lengths, batch.lengths)
    assert torch.isfinite(scores).all()


def test_padding_invariance_batched_equals_one_at_a_time(setting):
    sentences, vocabs, batch = setting
    model = small_tagger(vocabs).eval()
    with torch.no_grad():
        together = model(batch)
        for b, s in enumerate(sentences):
            alone = model(batch_of([s], vocabs))
            n = len(s)
            torch.testing.assert_close(alone.emissions[0, :n], together.emissions[b, :n])
            torch.testing.assert_close(alone.dist.log_partition[0], together.dist.log_partition[b])
            assert torch.equal(alone.dist.argmax()[0, :n], together.dist.argmax()[b, :n])
    marginals = together.dist.unary_marginals
    for b, s in enumerate(sentences):
        assert (marginals[b, len(s):] == 0).all()


def test_word_dropout_leaves_the_batch_untouched_and_eval_is_deterministic(setting):
    _, vocabs, batch = setting
    model = small_tagger(vocabs, word_dropout=0.9)
    words = batch.words.clone()
    model.train()
    model(batch)
    assert torch.equal(batch.words, words)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model.emissions(batch), model.emissions(batch))


def test_gradient_reaches_every_parameter(setting):
    _, vocabs, batch = setting
    model = small_tagger(vocabs)
    out = model(batch)
    out.dist.log_partition.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert missing == []


def test_upos_ids_to_tags_marks_specials():
    upos = torch.tensor([[2, 3, 5, 1, 0]])
    assert upos_ids_to_tags(upos).tolist() == [[0, 2, -1, -1]]


def test_bad_input_raises(setting):
    _, vocabs, batch = setting
    model = small_tagger(vocabs)
    from dataclasses import replace
    with pytest.raises(ValueError, match="batch.words"):
        model(replace(batch, words=batch.words + 1000))
    with pytest.raises(ValueError, match="batch.lengths"):
        model(replace(batch, lengths=batch.lengths + 5))
    with pytest.raises(ValueError, match="dropout"):
        Tagger(n_words=5, n_chars=5, n_tags=2, dropout=1.0)
    with pytest.raises(ValueError, match="n_words"):
        Tagger(n_words=2, n_chars=5, n_tags=2)


def test_char_vectors_once_per_form_equal_the_encoder_on_every_word(setting):
    _, vocabs, batch = setting
    model = small_tagger(vocabs)
    present = torch.arange(batch.words.shape[1] - 1) < batch.lengths[:, None]
    direct = model.char_encoder(batch.chars[:, 1:], present)
    torch.testing.assert_close(model.char_vectors(batch), direct)
    assert (direct[~present] == 0).all()
