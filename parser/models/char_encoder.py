"""A character BiLSTM over every word of a batch at once, giving one vector per word form."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence


class CharLSTM(nn.Module):
    """Embeds each word's characters, runs a BiLSTM over them (packed, so character padding never
    matters) and projects the final forward and backward states to ``n_out``.

    Character ids are left-aligned with ``PAD = 0`` after the last character; a word with no
    characters, and every position the caller marks absent, gets a zero vector.
    """

    def __init__(self, n_chars: int, *, char_dim: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.lstm = nn.LSTM(char_dim, hidden, batch_first=True, bidirectional=True)
        self.project = nn.Linear(2 * hidden, n_out)

    def forward(self, chars: Tensor, present: Tensor) -> Tensor:
        """chars: ``[B, N+1, C]`` ids; present: ``[B, N+1]`` bool -> ``[B, N+1, n_out]``."""
        n_chars = (chars != 0).sum(-1)
        take = present & (n_chars > 0)
        out = self.project.weight.new_zeros(*chars.shape[:2], self.project.out_features)
        if not bool(take.any()):
            return out
        # Only the real words of the batch go through the LSTM, all in one packed call.
        rows = chars[take]
        packed = pack_padded_sequence(
            self.embed(rows), n_chars[take].cpu(), batch_first=True, enforce_sorted=False
        )
        _, (final, _) = self.lstm(packed)  # final: [2 directions, words, hidden]
        out[take] = self.project(final.transpose(0, 1).reshape(rows.shape[0], -1))
        return out
