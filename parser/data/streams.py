"""Labeled and unlabeled training streams: which sentences keep their trees, and the interleaving.

``split_labeled`` picks the labeled subset of a training file (``data.labeled_size`` trees or
``data.labeled_fraction`` of them) from one seeded permutation, so a smaller subset is always
inside a larger one; the rest becomes unlabeled text. ``strip_annotation`` removes heads and
relations from sentences before they are encoded, so the unlabeled stream cannot expose them.

``TrainingStream`` yields ``(kind, batch)`` pairs, ``kind`` being ``"labeled"`` or
``"unlabeled"``, ``unlabeled_ratio`` unlabeled batches per labeled one (fractions accumulate).
An epoch is a pass over the labeled batches (over the unlabeled ones when there are no trees);
the other stream cycles through its own epochs. Its state (both batchers' positions and the
interleaving credit) restores the exact place in the stream. The unlabeled batcher is a
:class:`~parser.data.batching.BucketBatcher` over sentences in memory, or a
:class:`~parser.data.corpus_batches.CorpusBatcher` streaming a corpus from disk
(``data.unlabeled_corpus``), whose state holds its file position and shuffle buffer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np

from parser.data.batch import Batch
from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import Sentence
from parser.data.corpus_batches import CorpusBatcher
from parser.data.vocab import Vocabularies

__all__ = ["LABELED", "UNLABELED", "TrainingStream", "split_labeled", "strip_annotation", "unlabeled_subset"]

LABELED, UNLABELED = "labeled", "unlabeled"


def split_labeled(
    n_sentences: int, *, labeled_size: int | None, labeled_fraction: float | None, seed: int
) -> tuple[list[int], list[int]]:
    """Indices of the labeled and of the unlabeled sentences, each in file order.

    Neither option set: every sentence is labeled. Subsets are nested across sizes for one seed.

    >>> small, _ = split_labeled(10, labeled_size=3, labeled_fraction=None, seed=0)
    >>> large, rest = split_labeled(10, labeled_size=6, labeled_fraction=None, seed=0)
    >>> set(small) <= set(large), len(large), sorted(large + rest) == list(range(10))
    (True, 6, True)
    >>> split_labeled(4, labeled_size=None, labeled_fraction=None, seed=0)
    ([0, 1, 2, 3], [])
    """
    if labeled_size is not None and labeled_fraction is not None:
        raise ValueError(
            f"data.labeled_size={labeled_size} and data.labeled_fraction={labeled_fraction}: "
            "set at most one"
        )
    if labeled_fraction is not None:
        if not 0.0 <= labeled_fraction <= 1.0:
            raise ValueError(f"data.labeled_fraction={labeled_fraction}: expected a value in [0, 1]")
        labeled_size = round(labeled_fraction * n_sentences)
    if labeled_size is None:
        return list(range(n_sentences)), []
    if not 0 <= labeled_size <= n_sentences:
        raise ValueError(
            f"data.labeled_size={labeled_size}: the training file has {n_sentences} sentences"
        )
    order = np.random.default_rng(seed).permutation(n_sentences)
    chosen = np.zeros(n_sentences, dtype=bool)
    chosen[order[:labeled_size]] = True
    return np.flatnonzero(chosen).tolist(), np.flatnonzero(~chosen).tolist()


def unlabeled_subset(n_sentences: int, *, size: int | None, seed: int) -> list[int]:
    """Indices, in order, of ``size`` of ``n_sentences`` unlabeled sentences (all when None), a
    seeded subset nested across sizes: the learning curve in the amount of unlabeled text.

    >>> small, large = (unlabeled_subset(10, size=k, seed=0) for k in (3, 6))
    >>> set(small) <= set(large), len(large), unlabeled_subset(3, size=None, seed=0)
    (True, 6, [0, 1, 2])
    """
    if size is None:
        return list(range(n_sentences))
    if not 0 <= size <= n_sentences:
        raise ValueError(f"data.unlabeled_size={size}: expected 0 to {n_sentences}, the unlabeled sentences there are")
    # Not the labeled subset's generator: a separate stream of the same seed.
    order = np.random.default_rng([seed, 1]).permutation(n_sentences)
    return sorted(order[:size].tolist())


def strip_annotation(sentences: Sequence[Sentence]) -> list[Sentence]:
    """The same sentences with every head ``-1`` and every relation ``None`` (raw lines kept for
    writing predictions; the encoder reads only the parsed columns)."""
    return [replace(s, heads=[-1] * len(s), deprels=[None] * len(s)) for s in sentences]


class TrainingStream:
    """An endless, resumable sequence of ``(kind, Batch)`` from one or two batchers."""

    def __init__(
        self,
        labeled: BucketBatcher | None,
        unlabeled: BucketBatcher | CorpusBatcher | None,
        *,
        unlabeled_ratio: float,
    ) -> None:
        if labeled is None and unlabeled is None:
            raise ValueError("TrainingStream: no labeled and no unlabeled sentences to train on")
        if unlabeled_ratio < 0:
            raise ValueError(f"data.unlabeled_ratio={unlabeled_ratio}: must be >= 0")
        if unlabeled is not None and labeled is not None and unlabeled_ratio == 0:
            unlabeled = None  # ratio 0: the unlabeled text is not used
        self.labeled = labeled
        self.unlabeled = unlabeled
        self.unlabeled_ratio = float(unlabeled_ratio)
        self._credit = 0.0  # unlabeled batches owed
        self._iterators: dict[str, Iterator[Batch] | None] = {LABELED: None, UNLABELED: None}

    @classmethod
    def from_sentences(
        cls,
        labeled: Sequence[Sentence],
        unlabeled: Sequence[Sentence],
        vocabs: Vocabularies,
        *,
        tokens_per_batch: int,
        max_length: int | None,
        unlabeled_ratio: float,
        seed: int,
        num_replicas: int = 1,
        rank: int = 0,
        corpus: CorpusBatcher | None = None,
    ) -> TrainingStream:
        """The stream over encoded ``labeled`` trees and ``unlabeled`` text (either may be
        empty), each shuffled by its own seed (``seed``, ``seed + 1``) and, in a distributed
        run, sharded by ``rank`` of ``num_replicas``. ``corpus``: the unlabeled batches come
        from it instead (``unlabeled`` must then be empty: the corpus holds that text)."""
        if corpus is not None and unlabeled:
            raise ValueError("TrainingStream.from_sentences: give unlabeled sentences or a corpus")

        def batcher(
            part: Sequence[Sentence], *, is_labeled: bool, offset: int
        ) -> BucketBatcher | None:
            if not part:
                return None
            return BucketBatcher(
                encode_all(part, vocabs), tokens_per_batch=tokens_per_batch, shuffle=True,
                seed=seed + offset, max_length=max_length, labeled=is_labeled,
                num_replicas=num_replicas, rank=rank,
            )

        return cls(
            batcher(labeled, is_labeled=True, offset=0),
            corpus if corpus is not None else batcher(unlabeled, is_labeled=False, offset=1),
            unlabeled_ratio=unlabeled_ratio,
        )

    def keep_only(self, consumed: set[str], *, names: Sequence[str]) -> list[str]:
        """Drop the streams no objective term consumes (``consumed``: ``"labeled"`` and/or
        ``"unlabeled"``), so that no step is spent on a batch nothing reads; returns the dropped
        kinds. ``names`` (the terms) goes into the error when nothing consumed is left."""
        dropped = []
        if UNLABELED not in consumed and self.unlabeled is not None:
            self.unlabeled = None
            dropped.append(UNLABELED)
        if LABELED not in consumed and self.labeled is not None:
            self.labeled = None
            dropped.append(LABELED)
        if self.labeled is None and self.unlabeled is None:
            raise ValueError(f"objective terms {names} read only {sorted(consumed)} batches, and the "
                             "training data has none (check data.labeled_size / data.unlabeled_file)")
        return dropped

    @property
    def corpus_counts(self) -> dict[str, int] | None:
        """The streamed corpus's counts (records, sentences, bad, empty, too_long) on this rank;
        None when the unlabeled text is in memory or not drawn."""
        return self.unlabeled.counts if isinstance(self.unlabeled, CorpusBatcher) else None

    @property
    def primary(self) -> BucketBatcher | CorpusBatcher:
        """The batcher whose passes count as epochs."""
        return self.labeled if self.labeled is not None else self.unlabeled

    @property
    def epoch(self) -> int:
        return self.primary.epoch_number

    def __iter__(self) -> Iterator[tuple[str, Batch]]:
        while True:
            yield self.next()

    def next(self) -> tuple[str, Batch]:
        """The next batch; crossing the end of the primary batcher starts the next epoch."""
        if self.labeled is None:
            return UNLABELED, self._draw(UNLABELED)
        if self.unlabeled is not None and self._credit >= 1.0:
            self._credit -= 1.0
            return UNLABELED, self._draw(UNLABELED)
        batch = self._draw(LABELED)
        if self.unlabeled is not None:
            self._credit += self.unlabeled_ratio
        return LABELED, batch

    def _draw(self, kind: str) -> Batch:
        batcher = self.labeled if kind == LABELED else self.unlabeled
        for attempt in range(2):
            if self._iterators[kind] is None:
                self._iterators[kind] = iter(batcher)
            batch = next(self._iterators[kind], None)
            if batch is not None:
                return batch
            batcher.set_epoch(batcher.epoch_number + 1)
            self._iterators[kind] = None
        raise RuntimeError(f"the {kind} batcher yields no batches")  # both batchers forbid this

    def state_dict(self) -> dict:
        return {
            LABELED: None if self.labeled is None else self.labeled.state_dict(),
            UNLABELED: None if self.unlabeled is None else self.unlabeled.state_dict(),
            "credit": self._credit,
        }

    def load_state_dict(self, state: dict) -> None:
        for kind, batcher in ((LABELED, self.labeled), (UNLABELED, self.unlabeled)):
            # (a stream in the state but not here was dropped by keep_only: nothing reads it)
            if batcher is not None and state.get(kind) is None:
                raise ValueError(f"stream state: no {kind} stream saved, but this run has one")
            if batcher is not None:
                batcher.load_state_dict(state[kind])
            self._iterators[kind] = None  # recreated from the restored position
        self._credit = float(state["credit"])
