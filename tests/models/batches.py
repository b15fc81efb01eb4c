"""Random Batches built directly (no data layer): id 0 = PAD, 1 = UNK, 2 = ROOT everywhere."""

from __future__ import annotations

import torch

from parser.data.batch import Batch
from parser.models import LogLinearScorer

ROOT = 2
N_WORDS, N_CHARS, N_UPOS, N_RELS = 30, 12, 8, 5


def random_loglinear(*, seed: int = 0, **options) -> LogLinearScorer:
    """A log-linear scorer over the vocabularies above with N(0, 1) weights. Small tables keep the
    reference loops cheap (collisions are fine: both sides share them)."""
    options = {"n_rels": N_RELS, "n_buckets": 4099, "n_label_buckets": 1031, **options}
    model = LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, **options)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=gen))
    return model


def random_batch(lengths: list[int], *, seed: int, max_chars: int = 5) -> Batch:
    """Sentences of the given lengths, tight padding, PAD (0) beyond each length."""
    gen = torch.Generator().manual_seed(seed)
    batch, width = len(lengths), max(lengths) + 1
    words = torch.zeros(batch, width, dtype=torch.long)
    upos = torch.zeros(batch, width, dtype=torch.long)
    chars = torch.zeros(batch, width, max_chars, dtype=torch.long)
    for b, n in enumerate(lengths):
        words[b, 0], upos[b, 0], chars[b, 0, 0] = ROOT, ROOT, ROOT
        words[b, 1 : n + 1] = torch.randint(1, N_WORDS, (n,), generator=gen)
        upos[b, 1 : n + 1] = torch.randint(3, N_UPOS, (n,), generator=gen)
        for i in range(1, n + 1):
            k = int(torch.randint(1, max_chars + 1, (1,), generator=gen))
            chars[b, i, :k] = torch.randint(3, N_CHARS, (k,), generator=gen)
    return Batch(words=words, chars=chars, upos=upos, lengths=torch.tensor(lengths))


def with_noisy_padding(batch: Batch, *, extra: int, extra_chars: int, seed: int) -> Batch:
    """The same sentences with ``extra`` more positions and ``extra_chars`` more character slots;
    every position beyond a sentence's length filled with random valid ids (not PAD)."""
    gen = torch.Generator().manual_seed(seed)
    size, width, n_chars = batch.chars.shape
    new_width = width + extra
    words = torch.randint(1, N_WORDS, (size, new_width), generator=gen)
    upos = torch.randint(1, N_UPOS, (size, new_width), generator=gen)
    chars = torch.randint(1, N_CHARS, (size, new_width, n_chars + extra_chars), generator=gen)
    real = torch.arange(new_width)[None, :] <= batch.lengths[:, None]
    chars[:, :, n_chars:] = torch.where(real[..., None], 0, chars[:, :, n_chars:])
    for b, n in enumerate(batch.lengths.tolist()):
        words[b, : n + 1] = batch.words[b, : n + 1]
        upos[b, : n + 1] = batch.upos[b, : n + 1]
        chars[b, : n + 1, :n_chars] = batch.chars[b, : n + 1]
    return Batch(words=words, chars=chars, upos=upos, lengths=batch.lengths.clone())


def single(batch: Batch, b: int) -> Batch:
    """Sentence ``b`` alone, tightly padded."""
    n = int(batch.lengths[b])
    return Batch(
        words=batch.words[b : b + 1, : n + 1],
        chars=batch.chars[b : b + 1, : n + 1],
        upos=batch.upos[b : b + 1, : n + 1],
        lengths=batch.lengths[b : b + 1],
    )


def assert_padding_invariant(model, tight: Batch, noisy: Batch) -> None:
    """``model``'s arc and label scores on each real sentence are the same with tight padding,
    with ``noisy`` extra padding, and for the sentence alone in its batch."""
    with torch.no_grad():
        a, b = model(tight), model(noisy)
        for i, n in enumerate(tight.lengths.tolist()):
            real = slice(0, n + 1)
            torch.testing.assert_close(b.arcs[i, real, real], a.arcs[i, real, real])
            torch.testing.assert_close(b.labels[i, real, real], a.labels[i, real, real])
            alone = model(single(tight, i))
            torch.testing.assert_close(alone.arcs[0], a.arcs[i, real, real])
            torch.testing.assert_close(alone.labels[0], a.labels[i, real, real])
