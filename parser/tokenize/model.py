"""The character tagger behind the tokenizer: characters -> BiLSTM -> per-character tag scores ->
a :class:`~parser.structs.LinearChainCRF` over the tags of :mod:`parser.tokenize.text`.

Each character is read as an embedding of its id (characters seen fewer than ``min_freq`` times in
training share UNK) plus an embedding of its class (space, upper, lower, other letter, digit,
punctuation, symbol, other), so an unseen character still reads as, say, punctuation.

Hard rules are folded into the scores (``-1e4``, not ``-inf``, so gradients stay finite):
whitespace is ``O`` and only whitespace is; ``I`` and ``E`` follow only ``B`` or ``I``.

Shapes: ``chars``, ``classes`` ``[B, pos]`` long; ``lengths [B]``; scores ``[B, pos, prev, cur]``.
"""

from __future__ import annotations

import unicodedata

import torch
from torch import Tensor, nn

from parser.structs import LinearChainCRF
from parser.tokenize.text import TAGS, E, I, O, S

__all__ = ["CLASSES", "CharTagger", "char_class"]

CLASSES = ("pad", "space", "upper", "lower", "letter", "digit", "punct", "symbol", "other")
FORBID = -1e4


def char_class(char: str) -> int:
    """Index in :data:`CLASSES` of one character."""
    if char.isspace():
        return 1
    category = unicodedata.category(char)
    if category == "Lu":
        return 2
    if category == "Ll":
        return 3
    if category[0] == "L":
        return 4
    if category[0] == "N":
        return 5
    if category[0] == "P":
        return 6
    if category[0] == "S":
        return 7
    return 8


def _transition_rules() -> Tensor:
    """``[prev, cur]`` 0 where allowed, ``FORBID`` where not; position 0 uses row ``O`` (as if a
    space preceded the text)."""
    rules = torch.zeros(len(TAGS), len(TAGS))
    for prev in (O, E, S):
        rules[prev, I] = FORBID
        rules[prev, E] = FORBID
    return rules


class CharTagger(nn.Module):
    """Scores of the tags of every character of a batch of text segments."""

    def __init__(self, *, n_chars: int, char_dim: int = 32, class_dim: int = 8, hidden: int = 64,
                 layers: int = 2, dropout: float = 0.2) -> None:
        super().__init__()
        self.hparams = {"n_chars": n_chars, "char_dim": char_dim, "class_dim": class_dim,
                        "hidden": hidden, "layers": layers, "dropout": dropout}
        self.chars = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.classes = nn.Embedding(len(CLASSES), class_dim, padding_idx=0)
        self.lstm = nn.LSTM(char_dim + class_dim, hidden, num_layers=layers, batch_first=True,
                            bidirectional=True, dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.emit = nn.Linear(2 * hidden, len(TAGS))
        self.transitions = nn.Parameter(torch.zeros(len(TAGS), len(TAGS)))
        self.register_buffer("rules", _transition_rules(), persistent=False)

    def forward(self, chars: Tensor, classes: Tensor, lengths: Tensor) -> LinearChainCRF:
        x = torch.cat([self.chars(chars), self.classes(classes)], dim=-1)
        packed = nn.utils.rnn.pack_padded_sequence(self.dropout(x), lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=chars.shape[1])
        emissions = self.emit(self.dropout(out))  # [B, pos, cur]
        space = classes == 1
        allowed = torch.where(space[..., None], torch.arange(len(TAGS), device=chars.device) == O,
                              torch.arange(len(TAGS), device=chars.device) != O)
        emissions = emissions + torch.where(allowed, 0.0, FORBID)
        # position 0 reads row 0 of the prev axis, the start state: O's row, as after a space
        scores = (self.transitions + self.rules)[None, None] + emissions[:, :, None, :]
        return LinearChainCRF(scores, lengths)
