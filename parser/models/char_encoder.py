"""A character BiLSTM over every word of a batch at once, giving one vector per word form."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from parser.models.layers import BiLSTM

# Upper ends of the character-length buckets: each bucket runs padded to its own longest word,
# so padding costs a few steps per word while the number of LSTM calls stays small.
BUCKETS = (3, 5, 7, 9, 12, 16)


class CharLSTM(nn.Module):
    """Embeds each word's characters, runs a BiLSTM over them and projects the final forward and
    backward states to ``n_out``.

    Character ids are left-aligned with ``PAD = 0`` after the last character; character padding
    never matters. A word with no characters, and every position the caller marks absent, gets a
    zero vector. Each distinct form of the batch is encoded once, words bucketed by length.
    """

    def __init__(self, n_chars: int, *, char_dim: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.lstm = BiLSTM(char_dim, hidden, num_layers=1, dropout=0.0)
        self.project = nn.Linear(2 * hidden, n_out)

    def forward(self, chars: Tensor, present: Tensor) -> Tensor:
        """chars: ``[B, N+1, C]`` ids; present: ``[B, N+1]`` bool -> ``[B, N+1, n_out]``."""
        n_chars = (chars != 0).sum(-1)
        take = present & (n_chars > 0)
        out = self.project.weight.new_zeros(*chars.shape[:2], self.project.out_features)
        if not bool(take.any()):
            return out
        # Each distinct row once; equal rows have equal n_chars (the length a packed LSTM used).
        forms, inverse = torch.unique(chars[take], dim=0, return_inverse=True)
        lengths = n_chars.new_zeros(forms.shape[0]).scatter(0, inverse, n_chars[take])
        bucket = torch.bucketize(lengths, torch.tensor(BUCKETS, device=lengths.device))
        order, finals = [], []
        for b in torch.unique(bucket).tolist():
            members = (bucket == b).nonzero()[:, 0]
            width = int(lengths[members].max())
            finals.append(self.lstm(self.embed(forms[members, :width]), lengths[members])[1])
            order.append(members)
        # rank[form] = its row in the concatenated buckets
        rank = torch.empty_like(lengths).scatter(
            0, torch.cat(order), torch.arange(len(lengths), device=lengths.device)
        )
        out[take] = self.project(torch.cat(finals))[rank[inverse]]
        return out
