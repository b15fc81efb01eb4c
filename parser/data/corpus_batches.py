"""Batches of an :class:`~parser.data.corpus.UnlabeledCorpus` through a bounded shuffle buffer.

:class:`CorpusBatcher` holds at most ``buffer_size`` sentences (as words, not tensors) and the
batch being built, whatever the corpus size. A batch: the buffer is refilled from the corpus,
a random sentence of the buffer is the pivot, and the buffer's sentences nearest to it in length
(ties in random order) join it up to ``tokens_per_batch`` padded words, as
:class:`~parser.data.batching.BucketBatcher` cuts its batches; they leave the buffer and are
encoded with the labeled data's vocabularies only now. The generator of batch ``k`` of epoch
``e`` is seeded with ``(seed, rank, e, k)``: no generator state needs saving. An epoch ends when
the corpus is read and the buffer is empty, so every sentence of the epoch is drawn exactly once.

State (:meth:`CorpusBatcher.state_dict`, part of the training checkpoint): the epoch, the batches
drawn, the buffer's sentences and the corpus position (file, byte offset, line, counts), so that a
resumed run draws exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np

from parser.data.batch import Batch
from parser.data.batching import collate, encode
from parser.data.conllu_io import Sentence
from parser.data.corpus import CorpusSentence, UnlabeledCorpus
from parser.data.vocab import Vocabularies

__all__ = ["CorpusBatcher"]

log = logging.getLogger(__name__)


class CorpusBatcher:
    """Unlabeled batches of ``corpus`` (the :class:`~parser.data.batching.BucketBatcher`
    interface that :class:`~parser.data.streams.TrainingStream` draws from). Sentences longer
    than ``max_length`` words are skipped and counted (``counts["too_long"]``)."""

    def __init__(self, corpus: UnlabeledCorpus, vocabs: Vocabularies, *, tokens_per_batch: int,
                 buffer_size: int, seed: int, max_length: int | None = None) -> None:
        if tokens_per_batch < 1:
            raise ValueError(f"tokens_per_batch must be >= 1, got {tokens_per_batch}")
        if buffer_size < 1:
            raise ValueError(f"data.shuffle_buffer={buffer_size}: must be >= 1")
        self.corpus, self.vocabs = corpus, vocabs
        self.tokens_per_batch, self.buffer_size = tokens_per_batch, buffer_size
        self.seed, self.max_length = seed, max_length
        self._buffer: list[CorpusSentence] = []
        self._lengths = np.zeros(0, dtype=np.int64)
        self._epoch = self._drawn = self.too_long = 0
        self._exhausted = False  # the corpus is read to its end this epoch

    @property
    def counts(self) -> dict[str, int]:
        """This rank's records read, sentences, bad and empty records, too-long sentences."""
        return {**self.corpus.counts, "too_long": self.too_long}

    @property
    def epoch_number(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from the corpus's first record with an empty buffer."""
        self._epoch, self._drawn = int(epoch), 0
        self._buffer, self._lengths, self._exhausted = [], np.zeros(0, dtype=np.int64), False
        self.corpus.restart()

    def __iter__(self) -> Iterator[Batch]:
        while (batch := self.next_batch()) is not None:
            yield batch

    def next_batch(self) -> Batch | None:
        """The epoch's next batch, None when it has no sentence left."""
        self._fill()
        if not self._buffer:
            if self._drawn == 0:
                counts = self.counts
                raise ValueError(
                    f"{self.corpus.option}: no sentence to train on for rank {self.corpus.rank} of "
                    f"{self.corpus.num_replicas} ({counts['records']} records read, {counts['bad']} "
                    f"bad, {counts['empty']} empty, {counts['too_long']} longer than "
                    f"data.max_length={self.max_length})")
            return None
        chosen = self._choose(np.random.default_rng([self.seed, self.corpus.rank, self._epoch, self._drawn]))
        self._drawn += 1
        batch = collate([encode(_sentence(self._buffer[i]), self.vocabs, index=self._buffer[i][0])
                         for i in chosen], labeled=False)
        for i in sorted(chosen, reverse=True):  # swap-remove: the later chosen are gone already
            self._buffer[i] = self._buffer[-1]
            self._lengths[i] = self._lengths[len(self._buffer) - 1]
            self._buffer.pop()
        self._lengths = self._lengths[:len(self._buffer)]
        return batch

    def _choose(self, rng: np.random.Generator) -> list[int]:
        """Buffer positions of the next batch: a random pivot and the sentences nearest to it in
        length (ties in random order), greedily up to the token budget. Only the nearest
        ``candidates`` are sorted (all of them when the batch could take more)."""
        size = len(self._buffer)
        pivot = int(self._lengths[rng.integers(size)])
        key = np.abs(self._lengths - pivot) + 0.5 * rng.random(size)  # never crosses a distance
        candidates = min(size, 4 * (self.tokens_per_batch // max(pivot, 1)) + 8)
        while True:
            near = np.argpartition(key, candidates - 1)[:candidates] if candidates < size else np.arange(size)
            chosen, longest = [], 0
            for i in near[np.argsort(key[near])].tolist():
                longest_with = max(longest, int(self._lengths[i]))
                if chosen and (len(chosen) + 1) * longest_with > self.tokens_per_batch:
                    return chosen
                chosen.append(i)
                longest = longest_with
            if candidates == size:
                return chosen
            candidates = size  # the batch may take more than the candidates: sort them all

    def _fill(self) -> None:
        added: list[CorpusSentence] = []
        while not self._exhausted and len(self._buffer) + len(added) < self.buffer_size:
            found = self.corpus.read()
            if found is None:
                self._exhausted = True
                break
            for item in found:
                if self.max_length is not None and len(item[1]) > self.max_length:
                    self.too_long += 1
                else:
                    added.append(item)
        if added:
            self._buffer += added
            self._lengths = np.concatenate([self._lengths, [len(item[1]) for item in added]])

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "drawn": self._drawn, "seed": self.seed,
                "too_long": self.too_long, "exhausted": self._exhausted,
                "buffer": [[i, forms, upos] for i, forms, upos in self._buffer],
                "corpus": self.corpus.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if state.get("seed") != self.seed or "corpus" not in state:
            raise ValueError(f"{self.corpus.option}: the checkpoint's unlabeled stream (seed "
                             f"{state.get('seed')}) is not this run's corpus stream (seed {self.seed})")
        self.corpus.load_state_dict(state["corpus"])
        self._epoch, self._drawn = int(state["epoch"]), int(state["drawn"])
        self.too_long, self._exhausted = int(state["too_long"]), bool(state["exhausted"])
        self._buffer = [(int(i), list(forms), None if upos is None else list(upos))
                        for i, forms, upos in state["buffer"]]
        self._lengths = np.array([len(item[1]) for item in self._buffer], dtype=np.int64)


def _sentence(item: CorpusSentence) -> Sentence:
    """The fields :func:`~parser.data.batching.encode` reads (no CoNLL-U lines: never written)."""
    _, forms, upos = item
    n = len(forms)
    return Sentence([], forms, [], list(upos) if upos is not None else [None] * n, [-1] * n,
                    [None] * n, "", 0, [], [])
