"""The deep biaffine edge scorer of Dozat & Manning (2017)."""

from __future__ import annotations

import torch
from torch import nn

from parser.data.batch import Batch
from parser.models.char_encoder import CharLSTM
from parser.models.checks import check_batch
from parser.models.edge_scores import EdgeScores
from parser.models.layers import MLP, Biaffine, Bilinear, BiLSTM, dropped_words

UNK = 1  # id 0 = PAD, 1 = UNK, 2 = ROOT in every vocabulary (the data layer's convention)


class BiaffineScorer(nn.Module):
    """Word embeddings (+ character BiLSTM vectors, summed) and optional UPOS embeddings feed a
    multi-layer BiLSTM; four MLPs project its states to arc-dep, arc-head, rel-dep and rel-head
    spaces; a biaffine layer scores arcs ``[B, dep, head]`` and a bilinear layer labels
    ``[B, dep, head, L]`` (``None`` when ``n_rels == 0``).

    ``word_dropout`` replaces real words (not ROOT, not padding) by UNK during training, so the UNK
    embedding learns to stand for rare words. ``lstm_hidden`` is per direction. Defaults are
    Dozat & Manning's.

    ``use_words=False`` drops the word and character input: the BiLSTM reads the UPOS embeddings
    alone (``use_upos`` must then be True), so every decision generalises across all words with
    the same tag sequence (for training without trees, where constraints speak about tags only).
    """

    def __init__(
        self,
        *,
        n_words: int,
        n_chars: int,
        n_upos: int,
        n_rels: int,
        word_dim: int = 100,
        char_dim: int = 50,
        char_hidden: int = 100,
        use_upos: bool = True,
        upos_dim: int = 50,
        lstm_hidden: int = 400,
        lstm_layers: int = 3,
        arc_mlp: int = 500,
        rel_mlp: int = 100,
        dropout: float = 0.33,
        word_dropout: float = 0.25,
        use_words: bool = True,
    ) -> None:
        super().__init__()
        if not (use_words or use_upos):
            raise ValueError("use_words=False and use_upos=False: the scorer would read nothing")
        for name, value in (("n_words", n_words), ("n_chars", n_chars), ("n_upos", n_upos)):
            if value < 3:
                raise ValueError(f"{name}={value}: a vocabulary holds at least PAD, UNK and ROOT")
        if n_rels < 0 or lstm_layers < 1:
            raise ValueError(
                f"n_rels={n_rels}, lstm_layers={lstm_layers}: need n_rels >= 0, lstm_layers >= 1"
            )
        for name, value in (("dropout", dropout), ("word_dropout", word_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value}: expected a probability in [0, 1)")
        self.n_words, self.n_chars, self.n_upos, self.n_rels = n_words, n_chars, n_upos, n_rels
        self.use_upos, self.use_words = use_upos, use_words
        self.word_dropout = word_dropout

        self.word_embed, self.char_encoder = None, None
        if use_words:
            self.word_embed = nn.Embedding(n_words, word_dim, padding_idx=0)
            self.char_encoder = CharLSTM(
                n_chars, char_dim=char_dim, hidden=char_hidden, n_out=word_dim
            )
        self.upos_embed = nn.Embedding(n_upos, upos_dim, padding_idx=0) if use_upos else None
        n_input = (word_dim if use_words else 0) + (upos_dim if use_upos else 0)
        self.input_dropout = nn.Dropout(dropout)
        self.lstm = BiLSTM(n_input, lstm_hidden, num_layers=lstm_layers, dropout=dropout)
        self.lstm_dropout = nn.Dropout(dropout)
        self.arc_dep = MLP(2 * lstm_hidden, arc_mlp, dropout=dropout)
        self.arc_head = MLP(2 * lstm_hidden, arc_mlp, dropout=dropout)
        self.arc = Biaffine(arc_mlp)
        if n_rels > 0:
            self.rel_dep = MLP(2 * lstm_hidden, rel_mlp, dropout=dropout)
            self.rel_head = MLP(2 * lstm_hidden, rel_mlp, dropout=dropout)
            self.rel = Bilinear(rel_mlp, n_rels)

    def forward(self, batch: Batch) -> EdgeScores:
        """arcs ``[B, dep, head]``; labels ``[B, dep, head, L]`` or ``None``."""
        check_batch(batch, n_words=self.n_words, n_upos=self.n_upos, n_chars=self.n_chars)
        words, lengths = batch.words, batch.lengths
        width = words.shape[1]
        present = torch.arange(width, device=words.device) <= lengths[:, None]  # ROOT and words
        inputs = []
        if self.word_embed is not None and self.char_encoder is not None:
            if self.training and self.word_dropout > 0:
                # a new tensor: the caller's batch is untouched
                words = words.masked_fill(dropped_words(batch.word_mask, self.word_dropout), UNK)
            inputs.append(self.word_embed(words) + self.char_encoder(batch.chars, present))
        if self.upos_embed is not None:
            inputs.append(self.upos_embed(batch.upos))
        x = torch.cat(inputs, dim=-1)
        states, _ = self.lstm(self.input_dropout(x), lengths + 1)  # ROOT and the words
        states = self.lstm_dropout(states)  # [B, N+1, 2 * lstm_hidden], zero beyond each length

        arcs = self.arc(self.arc_dep(states), self.arc_head(states))
        labels = self.rel(self.rel_dep(states), self.rel_head(states)) if self.n_rels > 0 else None
        return EdgeScores(arcs=arcs, labels=labels)
