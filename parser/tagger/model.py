"""The UPOS tagger: word embeddings and a character BiLSTM feed a BiLSTM whose states give emission
scores ``[B, T, S]``; with a transition matrix ``[S+1, S]`` (row 0: the start state) they become the
scores ``[B, pos, prev, cur]`` of a :class:`~parser.structs.LinearChainCRF`.

Positions: the parser's :class:`~parser.data.batch.Batch` holds ROOT at position 0 and words at
``1..n``; the tagger drops ROOT, so chain position ``i`` is word ``i + 1`` and ``T = N``.
Tags: tag ``k`` is UPOS vocabulary id ``k + N_SPECIAL`` (PAD, UNK and ROOT are never tags), so
``S = len(vocabs.upos) - N_SPECIAL``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from parser.data.batch import Batch
from parser.data.vocab import N_SPECIAL, UNK
from parser.models.char_encoder import CharLSTM
from parser.models.layers import BiLSTM
from parser.structs import LinearChainCRF

__all__ = ["Tagger", "TaggerOutput", "tags_to_upos_ids", "upos_ids_to_tags"]


@dataclass(frozen=True)
class TaggerOutput:
    """What the tagger hands its objectives: the chain CRF over tag sequences (``dist``; the name
    the parser's ``WeightedSum`` expects) and the emission scores ``[B, T, S]``."""

    dist: LinearChainCRF
    emissions: Tensor


def upos_ids_to_tags(upos: Tensor) -> Tensor:
    """``[B, N+1]`` UPOS vocabulary ids -> ``[B, N]`` tags, ``-1`` where the id is a special
    (unannotated ``_`` or a tag unseen in training) or padding."""
    tags = upos[:, 1:] - N_SPECIAL
    return torch.where(tags >= 0, tags, torch.full_like(tags, -1))


def tags_to_upos_ids(tags: Tensor) -> Tensor:
    """``[B, T]`` tags -> ``[B, T]`` UPOS vocabulary ids."""
    return tags + N_SPECIAL


class Tagger(nn.Module):
    """BiLSTM-CRF tagger (see the module docstring).

    ``word_dropout`` replaces real words by UNK during training so the UNK embedding learns to
    stand for rare words; ``lstm_hidden`` is per direction.
    """

    def __init__(
        self,
        *,
        n_words: int,
        n_chars: int,
        n_tags: int,
        word_dim: int = 100,
        char_dim: int = 50,
        char_hidden: int = 100,
        char_out: int = 100,
        lstm_hidden: int = 200,
        lstm_layers: int = 2,
        dropout: float = 0.33,
        word_dropout: float = 0.25,
    ) -> None:
        super().__init__()
        for name, value in (("n_words", n_words), ("n_chars", n_chars)):
            if value < N_SPECIAL:
                raise ValueError(f"{name}={value}: a vocabulary holds at least PAD, UNK and ROOT")
        if n_tags < 1 or lstm_layers < 1:
            raise ValueError(f"n_tags={n_tags}, lstm_layers={lstm_layers}: both must be >= 1")
        for name, value in (("dropout", dropout), ("word_dropout", word_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value}: expected a probability in [0, 1)")
        self.hparams = {
            "n_words": n_words, "n_chars": n_chars, "n_tags": n_tags, "word_dim": word_dim,
            "char_dim": char_dim, "char_hidden": char_hidden, "char_out": char_out,
            "lstm_hidden": lstm_hidden, "lstm_layers": lstm_layers, "dropout": dropout,
            "word_dropout": word_dropout,
        }
        self.n_words, self.n_chars, self.n_tags = n_words, n_chars, n_tags
        self.word_dropout = word_dropout
        self.word_embed = nn.Embedding(n_words, word_dim, padding_idx=0)
        self.char_encoder = CharLSTM(n_chars, char_dim=char_dim, hidden=char_hidden, n_out=char_out)
        self.input_dropout = nn.Dropout(dropout)
        self.lstm = BiLSTM(
            word_dim + char_out, lstm_hidden, num_layers=lstm_layers,
            dropout=dropout if lstm_layers > 1 else 0.0,
        )
        self.lstm_dropout = nn.Dropout(dropout)
        self.emit = nn.Linear(2 * lstm_hidden, n_tags)
        # transitions[0, cur]: start -> cur; transitions[1 + prev, cur]: prev -> cur
        self.transitions = nn.Parameter(torch.zeros(n_tags + 1, n_tags))

    def _check(self, batch: Batch) -> None:
        words, lengths = batch.words, batch.lengths
        if words.dim() != 2 or lengths.dim() != 1 or lengths.shape[0] != words.shape[0]:
            raise ValueError(
                f"batch.words must be [B, N+1] and batch.lengths [B]; got "
                f"{tuple(words.shape)} and {tuple(lengths.shape)}"
            )
        if bool((lengths < 1).any()) or int(lengths.max()) + 1 > words.shape[1]:
            raise ValueError(
                f"batch.lengths {lengths.tolist()} must be in 1..{words.shape[1] - 1} (N of words)"
            )
        for name, ids, size in (("words", words, self.n_words), ("chars", batch.chars, self.n_chars)):
            if bool((ids < 0).any()) or bool((ids >= size).any()):
                raise ValueError(
                    f"batch.{name} holds ids outside 0..{size - 1} (max {int(ids.max())}): "
                    "vocabularies and model do not match"
                )

    def emissions(self, batch: Batch) -> Tensor:
        """``[B, T, S]`` emission scores of each word (ROOT dropped); finite on padding."""
        self._check(batch)
        words, lengths = batch.words[:, 1:], batch.lengths
        width = words.shape[1]
        present = torch.arange(width, device=words.device) < lengths[:, None]
        if self.training and self.word_dropout > 0:
            drop = (torch.rand(words.shape, device=words.device) < self.word_dropout) & present
            words = words.masked_fill(drop, UNK)  # a new tensor: the caller's batch is untouched
        x = self.input_dropout(torch.cat([self.word_embed(words), self.char_vectors(batch)], dim=-1))
        states, _ = self.lstm(x, lengths)
        return self.emit(self.lstm_dropout(states))

    def char_vectors(self, batch: Batch) -> Tensor:
        """``[B, T, char_out]`` character-BiLSTM vectors of the words (0 on padding), computed
        once per distinct form of the batch: the same result, about half the work on text."""
        chars = batch.chars[:, 1:]
        present = torch.arange(chars.shape[1], device=chars.device) < batch.lengths[:, None]
        forms, which = torch.unique(chars[present], dim=0, return_inverse=True)
        vectors = self.char_encoder(forms[None], torch.ones_like(forms[None, :, 0], dtype=torch.bool))
        out = vectors.new_zeros(*chars.shape[:2], vectors.shape[-1])
        out[present] = vectors[0, which]
        return out

    def scores_from(self, emissions: Tensor) -> Tensor:
        """``emissions [B, T, S]`` -> ``[B, pos, prev, cur]`` chain scores: position 0 takes the
        start row in every ``prev`` row (only row 0 counts), later positions the transitions."""
        batch, _positions, states = emissions.shape
        later = self.transitions[1:][None, None] + emissions[:, :, None, :]
        first = (self.transitions[0] + emissions[:, 0])[:, None, None, :]
        return torch.cat([first.expand(batch, 1, states, states), later[:, 1:]], dim=1)

    def scores(self, batch: Batch) -> Tensor:
        """``[B, pos, prev, cur]`` scores of the batch's words in the LinearChainCRF convention."""
        return self.scores_from(self.emissions(batch))

    def forward(self, batch: Batch) -> TaggerOutput:
        emissions = self.emissions(batch)
        return TaggerOutput(LinearChainCRF(self.scores_from(emissions), batch.lengths), emissions)

    @torch.no_grad()
    def predict(self, batch: Batch) -> Tensor:
        """``[B, T]`` Viterbi tags (0 on padding), in eval mode."""
        was_training = self.training
        self.eval()
        try:
            return self(batch).dist.argmax()
        finally:
            self.train(was_training)
