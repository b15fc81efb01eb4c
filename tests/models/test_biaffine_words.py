"""The biaffine scorer without word input (``use_words=False``): the BiLSTM reads UPOS alone."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from parser.models import BiaffineScorer
from tests.models.batches import (
    N_CHARS,
    N_RELS,
    N_UPOS,
    N_WORDS,
    assert_padding_invariant,
    random_batch,
    with_noisy_padding,
)

LENGTHS = [5, 1, 8, 3]


def tags_only(
    *, seed: int = 0, use_words: bool = False, dropout: float = 0.33, word_dropout: float = 0.25
) -> BiaffineScorer:
    torch.manual_seed(seed)
    return BiaffineScorer(
        n_words=N_WORDS, n_chars=N_CHARS, n_upos=N_UPOS, n_rels=N_RELS, word_dim=16, char_dim=8,
        char_hidden=8, upos_dim=8, lstm_hidden=16, lstm_layers=2, arc_mlp=12, rel_mlp=6,
        use_words=use_words, dropout=dropout, word_dropout=word_dropout,
    )  # fmt: skip


def other_words(batch, *, seed: int):
    """The batch with every real word's id and characters replaced by random ones."""
    gen = torch.Generator().manual_seed(seed)
    real = batch.word_mask
    words = torch.where(real, torch.randint(1, N_WORDS, batch.words.shape, generator=gen), batch.words)
    chars = torch.where(
        real[..., None] & (batch.chars != 0),
        torch.randint(3, N_CHARS, batch.chars.shape, generator=gen),
        batch.chars,
    )
    return replace(batch, words=words, chars=chars)


def test_no_word_or_character_parameters() -> None:
    names = {name.split(".")[0] for name, _ in tags_only().named_parameters()}
    assert "word_embed" not in names and "char_encoder" not in names and "upos_embed" in names
    default = {name.split(".")[0] for name, _ in tags_only(use_words=True).named_parameters()}
    assert {"word_embed", "char_encoder", "upos_embed"} <= default


def test_scores_ignore_the_words_and_follow_the_tags() -> None:
    model = tags_only(seed=1).eval()
    batch = random_batch(LENGTHS, seed=2)
    changed = other_words(batch, seed=3)
    assert not torch.equal(changed.words, batch.words)
    with torch.no_grad():
        out, out_changed = model(batch), model(changed)
        torch.testing.assert_close(out_changed.arcs, out.arcs, rtol=0, atol=0)
        torch.testing.assert_close(out_changed.labels, out.labels, rtol=0, atol=0)
        # The same word change moves a model that reads words; a tag change moves this one.
        reader = tags_only(seed=1, use_words=True).eval()
        assert not torch.allclose(reader(changed).arcs, reader(batch).arcs)
        upos = batch.upos.clone()
        upos[0, 2] = 3 if int(upos[0, 2]) != 3 else 4
        moved = model(replace(batch, upos=upos)).arcs
        assert not torch.allclose(moved[0, :6, :6], out.arcs[0, :6, :6])


def test_word_dropout_has_nothing_to_drop_in_training() -> None:
    # No dropout, a word dropout that would drop nearly every word: training reads what
    # evaluation reads, because no word is read at all.
    model = tags_only(seed=4, dropout=0.0, word_dropout=0.999)
    batch = random_batch(LENGTHS, seed=5)
    with torch.no_grad():
        trained = model.train()(batch).arcs
        evaluated = model.eval()(batch).arcs
    torch.testing.assert_close(trained, evaluated)


def test_padding_invariance_without_words() -> None:
    model = tags_only(seed=6).eval()
    tight = random_batch(LENGTHS, seed=7)
    noisy = with_noisy_padding(tight, extra=2, extra_chars=1, seed=8)
    assert_padding_invariant(model, tight, noisy)


def test_reading_nothing_raises() -> None:
    with pytest.raises(ValueError, match="use_words=False and use_upos=False"):
        BiaffineScorer(n_words=N_WORDS, n_chars=N_CHARS, n_upos=N_UPOS, n_rels=0,
                       use_words=False, use_upos=False)  # fmt: skip
