"""A character BiLSTM over every word of a batch at once, giving one vector per word form."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
    zero vector. Each distinct form of the batch is encoded once, words bucketed by length; within
    :meth:`remembering`, each distinct form of a whole set of sentences.
    """

    def __init__(self, n_chars: int, *, char_dim: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.lstm = BiLSTM(char_dim, hidden, num_layers=1, dropout=0.0)
        self.project = nn.Linear(2 * hidden, n_out)
        self._memo: tuple[dict[bytes, int], Tensor, int] | None = None  # see remembering

    def forward(self, chars: Tensor, present: Tensor) -> Tensor:
        """chars: ``[B, N+1, C]`` ids; present: ``[B, N+1]`` bool -> ``[B, N+1, n_out]``."""
        n_chars = (chars != 0).sum(-1)
        take = present & (n_chars > 0)
        out = self.project.weight.new_zeros(*chars.shape[:2], self.project.out_features)
        if not bool(take.any()):
            return out
        rows = chars[take]
        known = self._remembered(rows)
        if known is not None:
            out[take] = known
            return out
        # Each distinct row once.
        forms, inverse = torch.unique(rows, dim=0, return_inverse=True)
        out[take] = self._encode(forms)[inverse]
        return out

    @contextmanager
    def remembering(self, chars: Tensor) -> Iterator[None]:
        """Within the block, without autograd: the distinct forms of ``chars`` ``[W, C]`` (rows of
        ids, left-aligned) encoded now, in one set of buckets, and looked up by every call whose
        forms are all among them (others encode their batch as usual). The values are those of
        batch-by-batch encoding up to float rounding (LSTM calls of other sizes). A file's
        batches then cost a few LSTM calls per bucket in all instead of a dozen each: on CPU the
        character LSTM's time is in its calls' steps more than in the forms they hold."""
        if torch.is_grad_enabled():
            raise RuntimeError("CharLSTM.remembering: for prediction only (autograd is on)")
        width = chars.shape[1]
        index: dict[bytes, int] = {}
        first = [index.setdefault(key, row) for row, key in enumerate(_keys(chars, width))]
        distinct = sorted(set(first))  # each distinct row's first occurrence
        forms = chars[torch.tensor(distinct, dtype=torch.long, device=chars.device)]
        non_empty = (forms != 0).any(-1)
        if not bool(non_empty.any()):
            yield
            return
        forms = forms[non_empty]
        vectors = self._encode(forms)
        self._memo = ({key: i for i, key in enumerate(_keys(forms, width))}, vectors, width)
        try:
            yield
        finally:
            self._memo = None

    def _remembered(self, rows: Tensor) -> Tensor | None:
        """The remembered vectors of ``rows`` ``[W, C]``, or None when one of them is not known."""
        if self._memo is None or rows.shape[1] > self._memo[2]:
            return None
        index, vectors, width = self._memo
        try:
            found = [index[key] for key in _keys(rows, width)]
        except KeyError:
            return None
        return vectors[torch.tensor(found, device=vectors.device)]

    def _encode(self, forms: Tensor) -> Tensor:
        """``[F, n_out]`` vectors of ``forms`` ``[F, C]`` (distinct rows with a character each)."""
        lengths = (forms != 0).sum(-1)
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
        return self.project(torch.cat(finals))[rank]


def _keys(rows: Tensor, width: int) -> list[bytes]:
    """One hashable key per row of ids, its PAD tail widened to ``width`` (so that a form's key
    does not depend on the longest word of the tensor it came in)."""
    padded = nn.functional.pad(rows, (0, width - rows.shape[1])).cpu().contiguous().numpy()
    return [row.tobytes() for row in padded]
