from __future__ import annotations

import pytest
import torch

from parser.data.batch import Batch
from parser.models import BiaffineScorer
from parser.models.char_encoder import CharLSTM
from tests.models.batches import (
    N_CHARS,
    N_RELS,
    N_UPOS,
    N_WORDS,
    assert_padding_invariant,
    random_batch,
    with_noisy_padding,
)

LENGTHS = [4, 1, 7, 3]


def small_model(
    *,
    n_rels: int = N_RELS,
    seed: int = 0,
    dropout: float = 0.33,
    word_dropout: float = 0.25,
    use_upos: bool = True,
) -> BiaffineScorer:
    torch.manual_seed(seed)
    return BiaffineScorer(
        n_words=N_WORDS,
        n_chars=N_CHARS,
        n_upos=N_UPOS,
        n_rels=n_rels,
        word_dim=16,
        char_dim=8,
        char_hidden=8,
        use_upos=use_upos,
        upos_dim=8,
        lstm_hidden=16,
        lstm_layers=2,
        arc_mlp=12,
        rel_mlp=6,
        dropout=dropout,
        word_dropout=word_dropout,
    )


@pytest.mark.parametrize("n_rels", [N_RELS, 0])
@pytest.mark.parametrize("use_upos", [True, False])
def test_shapes_and_finite(n_rels: int, use_upos: bool) -> None:
    model = small_model(n_rels=n_rels, use_upos=use_upos)
    batch = with_noisy_padding(random_batch(LENGTHS, seed=1), extra=2, extra_chars=1, seed=2)
    for training in (True, False):
        model.train(training)
        out = model(batch)
        assert out.arcs.shape == (4, 10, 10)
        assert out.arcs.dtype == torch.float32 and torch.isfinite(out.arcs).all()
        if n_rels:
            assert out.labels.shape == (4, 10, 10, n_rels) and torch.isfinite(out.labels).all()
        else:
            assert out.labels is None


def test_padding_invariance_and_batched_equals_single() -> None:
    model = small_model().eval()
    tight = random_batch(LENGTHS, seed=3)
    noisy = with_noisy_padding(tight, extra=3, extra_chars=2, seed=4)
    assert_padding_invariant(model, tight, noisy)


def test_eval_is_deterministic_and_training_is_not() -> None:
    model = small_model()
    batch = random_batch(LENGTHS, seed=5)
    model.eval()
    torch.testing.assert_close(model(batch).arcs, model(batch).arcs, rtol=0, atol=0)
    model.train()
    assert not torch.equal(model(batch).arcs, model(batch).arcs)


def test_word_dropout_replaces_real_words_by_unk_and_leaves_the_batch_alone() -> None:
    model = small_model(dropout=0.0, word_dropout=0.5)
    batch = random_batch(LENGTHS, seed=6)
    words_before = batch.words.clone()
    torch.manual_seed(11)
    trained = model.train()(batch).arcs
    assert torch.equal(batch.words, words_before)
    torch.manual_seed(11)
    drop = (torch.rand(batch.words.shape) < 0.5) & batch.word_mask
    assert drop.any()
    dropped = Batch(
        words=batch.words.masked_fill(drop, 1),
        chars=batch.chars,
        upos=batch.upos,
        lengths=batch.lengths,
    )
    with torch.no_grad():
        expected = model.eval()(dropped).arcs
    torch.testing.assert_close(trained.detach(), expected)


def test_gradient_reaches_every_parameter() -> None:
    model = small_model().train()
    batch = random_batch(LENGTHS, seed=7)
    out = model(batch)
    gen = torch.Generator().manual_seed(0)
    loss = (out.arcs * torch.randn(out.arcs.shape, generator=gen)).sum()
    loss = loss + (out.labels * torch.randn(out.labels.shape, generator=gen)).sum()
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


def test_char_encoder_ignores_padding_and_zeroes_empty_words() -> None:
    torch.manual_seed(0)
    encoder = CharLSTM(N_CHARS, char_dim=4, hidden=5, n_out=3)
    chars = torch.tensor([[[4, 5, 0], [0, 0, 0], [6, 0, 0]]])
    present = torch.tensor([[True, True, False]])
    out = encoder(chars, present)
    assert out.shape == (1, 3, 3)
    assert out[0, 0].abs().sum() > 0
    assert torch.equal(out[0, 1:], torch.zeros(2, 3))  # no characters; absent position
    longer = torch.cat([chars, torch.zeros(1, 3, 4, dtype=torch.long)], dim=-1)
    torch.testing.assert_close(encoder(longer, present), out)


def test_bad_input_names_the_tensor() -> None:
    model = small_model().eval()
    batch = random_batch([3, 2], seed=8)
    words = batch.words.clone()
    words[1, 2] = N_WORDS
    with pytest.raises(ValueError, match=r"batch\.words\[1, 2\] = 30"):
        model(Batch(words=words, chars=batch.chars, upos=batch.upos, lengths=batch.lengths))
    with pytest.raises(ValueError, match="batch.lengths"):
        model(
            Batch(
                words=batch.words, chars=batch.chars, upos=batch.upos, lengths=torch.tensor([4, 2])
            )
        )
    with pytest.raises(ValueError, match="batch.chars"):
        model(
            Batch(
                words=batch.words,
                chars=batch.chars[:, :, 0],
                upos=batch.upos,
                lengths=batch.lengths,
            )
        )
    with pytest.raises(ValueError, match="n_words"):
        BiaffineScorer(n_words=2, n_chars=5, n_upos=5, n_rels=1)
