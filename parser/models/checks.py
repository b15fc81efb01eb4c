"""Input checks shared by the scorers: a bad id fails here, naming the tensor and the position,
instead of deep inside an embedding lookup."""

from __future__ import annotations

import torch
from torch import Tensor

from parser.data.batch import Batch


def check_ids(name: str, ids: Tensor, *, size: int) -> None:
    """Raise ValueError unless every entry of ``ids`` (a long tensor) lies in ``[0, size)``."""
    if ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"batch.{name} has dtype {ids.dtype}; expected an integer (long) tensor")
    bad = (ids < 0) | (ids >= size)
    if bool(bad.any()):
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"batch.{name}{list(where)} = {int(ids[where])} is outside the vocabulary [0, {size})"
        )


def check_batch(batch: Batch, *, n_words: int, n_upos: int, n_chars: int | None = None) -> None:
    """Shapes ``words/upos [B, N+1]``, ``chars [B, N+1, C]``, ``lengths [B]`` with
    ``0 <= lengths <= N``, and ids within their vocabularies (``chars`` only when ``n_chars``)."""
    words, upos, lengths = batch.words, batch.upos, batch.lengths
    if words.dim() != 2:
        raise ValueError(f"batch.words has shape {tuple(words.shape)}; expected [B, N+1]")
    if upos.shape != words.shape:
        raise ValueError(
            f"batch.upos has shape {tuple(upos.shape)}; "
            f"expected {tuple(words.shape)} like batch.words"
        )
    if lengths.shape != words.shape[:1]:
        raise ValueError(
            f"batch.lengths has shape {tuple(lengths.shape)}; expected ({words.shape[0]},)"
        )
    if words.shape[1] == 0 or bool((lengths < 0).any()) or bool((lengths >= words.shape[1]).any()):
        raise ValueError(
            f"batch.lengths = {lengths.tolist()} must lie in [0, {words.shape[1] - 1}] "
            f"(batch.words has {words.shape[1]} positions including ROOT)"
        )
    check_ids("words", words, size=n_words)
    check_ids("upos", upos, size=n_upos)
    if n_chars is not None:
        if batch.chars.dim() != 3 or batch.chars.shape[:2] != words.shape:
            raise ValueError(
                f"batch.chars has shape {tuple(batch.chars.shape)}; "
                f"expected {tuple(words.shape)} + (C,)"
            )
        check_ids("chars", batch.chars, size=n_chars)
