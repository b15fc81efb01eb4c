"""From sentences to padded :class:`~parser.data.batch.Batch` es: encoding, collating, and a
length-bucketed batcher by token budget with deterministic, resumable shuffling.

Padding conventions beyond ``batch.py``: ``heads`` and ``rels`` hold 0 at position 0 (ROOT, ignored)
and on padding, so gathers with them stay in range; ``-1`` marks only real words without a head
(``heads``) or without a relation (``rels``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from parser.data.batch import Batch
from parser.data.conllu_io import Sentence
from parser.data.layers import encode_targets, layer_of
from parser.data.vocab import PAD, ROOT, Vocabularies

__all__ = ["BucketBatcher", "EncodedSentence", "collate", "encode", "encode_all"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EncodedSentence:
    """One sentence as id tensors, ROOT at position 0 (``n = length`` words).

    words, upos: ``[n+1]`` long; chars: ``[n+1, C]`` long (PAD-filled, ``C`` its longest word);
    heads, rels: ``[n+1]`` long, -1 where unannotated, 0 at position 0; None for text without
    any head. index: the sentence's position in its dataset. layers: ``[n+1]`` long gold
    class ids of each token-level layer whose column the sentence has (see
    :func:`parser.data.layers.encode_targets`). vectors: ``[n+1]`` long pretrained vector rows
    (:meth:`Vocabularies.vector_ids`), None when the vocabularies have none.
    """

    words: Tensor
    chars: Tensor
    upos: Tensor
    heads: Tensor | None
    rels: Tensor | None
    index: int
    layers: Mapping[str, Tensor] = field(default_factory=dict)
    vectors: Tensor | None = None

    @property
    def length(self) -> int:
        return int(self.words.shape[0]) - 1


def encode(sentence: Sentence, vocabs: Vocabularies, *, index: int = 0,
           max_chars: int = 32, layer_targets: bool = True, trees: bool = True) -> EncodedSentence:
    """Ids of one sentence; characters of each form cut to ``max_chars`` (long URLs would
    otherwise set the width of the whole batch's character tensor); ``trees``: its gold heads
    and relations where it has them, ``layer_targets``: the gold classes of the vocabularies'
    layers too (a prediction that scores nothing needs neither)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    words = [ROOT] + vocabs.words.indices(sentence.forms)
    # an untagged word's UPOS is unknown: a parser reading gold tags reads its own guess or UNK
    # there, and the UPOS head is not trained on it
    upos = [ROOT] + vocabs.upos.indices(sentence.annotated("UPOS", sentence.upos))
    char_ids = [[ROOT]] + [vocabs.chars.indices(form[:max_chars]) for form in sentence.forms]
    width = max(len(c) for c in char_ids)
    chars = torch.tensor([ids + [PAD] * (width - len(ids)) for ids in char_ids],
                         dtype=torch.long)
    heads = rels = None
    if trees and any(h >= 0 for h in sentence.heads):
        heads = torch.tensor([0] + list(sentence.heads), dtype=torch.long)
        rels = torch.tensor([0] + [-1 if r is None else vocabs.rels.index(r)
                                   for r in sentence.deprels], dtype=torch.long)
    layers = {}
    if layer_targets and heads is not None:
        for name, classes in vocabs.layers.items():
            ids = encode_targets(layer_of(name), sentence, classes)
            if ids is not None:
                layers[name] = ids
    vectors = (None if vocabs.vectors is None else
               torch.tensor([ROOT] + vocabs.vector_ids(sentence.forms), dtype=torch.long))
    return EncodedSentence(torch.tensor(words, dtype=torch.long), chars,
                           torch.tensor(upos, dtype=torch.long), heads, rels, index, layers, vectors)


def encode_all(sentences: Sequence[Sentence], vocabs: Vocabularies, *, max_chars: int = 32,
               layer_targets: bool = True, trees: bool = True) -> list[EncodedSentence]:
    """:func:`encode` each sentence, ``index`` = its position in ``sentences``."""
    return [encode(s, vocabs, index=i, max_chars=max_chars, layer_targets=layer_targets, trees=trees)
            for i, s in enumerate(sentences)]


def collate(encoded: Sequence[EncodedSentence], *, labeled: bool) -> Batch:
    """Pad ``encoded`` into a :class:`Batch` of ``N+1 = longest + 1`` positions.

    labeled: carry gold ``heads``/``rels`` (every sentence must have them); False gives
    ``heads=None, rels=None`` whatever the sentences hold, so unlabeled streams never see trees.
    """
    if not encoded:
        raise ValueError("collate: no sentences")
    size = len(encoded)
    positions = max(e.length for e in encoded) + 1
    width = max(int(e.chars.shape[1]) for e in encoded)
    words = torch.full((size, positions), PAD, dtype=torch.long)
    upos = torch.full((size, positions), PAD, dtype=torch.long)
    chars = torch.full((size, positions, width), PAD, dtype=torch.long)
    for b, e in enumerate(encoded):
        words[b, :e.length + 1] = e.words
        upos[b, :e.length + 1] = e.upos
        chars[b, :e.length + 1, :e.chars.shape[1]] = e.chars
    lengths = torch.tensor([e.length for e in encoded], dtype=torch.long)
    index = torch.tensor([e.index for e in encoded], dtype=torch.long)
    vectors = None
    if all(e.vectors is not None for e in encoded):
        vectors = torch.full((size, positions), PAD, dtype=torch.long)
        for b, e in enumerate(encoded):
            vectors[b, :e.length + 1] = e.vectors
    if not labeled:
        return Batch(words, chars, upos, lengths, None, None, index, vectors=vectors)
    heads = torch.zeros((size, positions), dtype=torch.long)
    rels = torch.zeros((size, positions), dtype=torch.long)
    layers = {name: torch.full((size, positions), -1, dtype=torch.long)
              for name in sorted({name for e in encoded for name in e.layers})}
    for b, e in enumerate(encoded):
        if e.heads is None or e.rels is None:
            raise ValueError(f"collate(labeled=True): sentence {e.index} has no heads")
        heads[b, :e.length + 1] = e.heads
        rels[b, :e.length + 1] = e.rels
        for name, ids in e.layers.items():
            layers[name][b, :e.length + 1] = ids
    return Batch(words, chars, upos, lengths, heads, rels, index, layers, vectors)


class BucketBatcher:
    """Batches of sentences of similar length, sized by a token budget.

    Each batch holds at most ``tokens_per_batch`` padded word positions (batch size times its
    longest sentence); a sentence longer than the budget alone forms a batch. ``cells_per_batch``
    (None: no limit) also bounds batch size times its longest sentence squared, the size of the
    ``[B, N+1, N+1, L]`` score tensors, so that memory does not grow with the longest sentence
    read (prediction). ``length_spread`` (None: no limit) also starts a new batch when a
    sentence is longer than the batch's shortest by more than ``max(1, length_spread x
    shortest)`` words, bounding the padding computed (prediction: every padded position costs
    as much as a word). Sentences longer
    than ``max_length`` are skipped with a count (``n_skipped``): give None when predicting.

    Order: with ``shuffle``, sentences of equal length are shuffled before cutting batches and
    the batches are shuffled, by a generator seeded with ``(seed, epoch)``: the same seed and epoch
    give the same batches, another epoch different ones. Without it, batches go shortest first.

    Distributed: with ``num_replicas > 1`` each epoch's batches (the same on every rank) are
    split by sentence, rank ``r`` taking sentences ``r, r + num_replicas, ...`` of each, so the
    ranks together see exactly the batches one process would; batches with fewer sentences than
    replicas are dropped on every rank.

    Iterating yields the current epoch's batches from the current position, counting each as
    consumed when yielded; :meth:`state_dict` (epoch, position) restores exactly that place.
    """

    def __init__(self, encoded: Sequence[EncodedSentence], *, tokens_per_batch: int,
                 shuffle: bool, seed: int = 0, max_length: int | None = None,
                 labeled: bool = True, num_replicas: int = 1, rank: int = 0,
                 cells_per_batch: int | None = None, length_spread: float | None = None) -> None:
        if tokens_per_batch < 1:
            raise ValueError(f"tokens_per_batch must be >= 1, got {tokens_per_batch}")
        if cells_per_batch is not None and cells_per_batch < 1:
            raise ValueError(f"cells_per_batch must be >= 1 or None, got {cells_per_batch}")
        if length_spread is not None and not length_spread >= 0:
            raise ValueError(f"length_spread must be >= 0 or None, got {length_spread}")
        if max_length is not None and max_length < 1:
            raise ValueError(f"max_length must be >= 1 or None, got {max_length}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} not in 0..{num_replicas - 1}")
        self.encoded = list(encoded)
        self.tokens_per_batch = tokens_per_batch
        self.cells_per_batch = cells_per_batch
        self.length_spread = length_spread
        self.shuffle = shuffle
        self.seed = seed
        self.labeled = labeled
        self.num_replicas = num_replicas
        self.rank = rank
        self._kept = [i for i, e in enumerate(self.encoded)
                      if max_length is None or e.length <= max_length]
        self.n_skipped = len(self.encoded) - len(self._kept)
        if self.n_skipped:
            log.warning("skipped %d of %d sentences longer than max_length=%d", self.n_skipped,
                        len(self.encoded), max_length)
        if not self._kept:
            raise ValueError(f"BucketBatcher: no sentences to batch ({len(self.encoded)} given, "
                             f"{self.n_skipped} longer than max_length={max_length})")
        self._epoch = 0
        self._position = 0

    def batch_indices(self, epoch: int) -> list[list[int]]:
        """The positions in ``encoded`` of each batch of ``epoch``, for this rank."""
        lengths = np.array([self.encoded[i].length for i in self._kept])
        kept = np.array(self._kept)
        rng = np.random.default_rng([self.seed, epoch]) if self.shuffle else None
        if rng is not None:
            tie_break = rng.permutation(len(kept))
            order = np.lexsort((tie_break, lengths))
        else:
            order = np.argsort(lengths, kind="stable")
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            # ascending lengths: the sentence added now is the batch's longest
            if current and self._full(len(current) + 1, int(lengths[i]),
                                      shortest=int(lengths[current[0]])):
                batches.append([int(kept[j]) for j in current])
                current = []
            current.append(int(i))
        batches.append([int(kept[j]) for j in current])
        if rng is not None:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        if self.num_replicas > 1:
            batches = [b[self.rank::self.num_replicas] for b in batches
                       if len(b) >= self.num_replicas]
        return batches

    def _full(self, size: int, longest: int, *, shortest: int) -> bool:
        """Whether ``size`` sentences of ``shortest`` to ``longest`` words exceed a budget."""
        if size * longest > self.tokens_per_batch:
            return True
        if self.length_spread is not None and longest - shortest > max(1.0, self.length_spread * shortest):
            return True
        return self.cells_per_batch is not None and size * (longest + 1) ** 2 > self.cells_per_batch

    def __len__(self) -> int:
        """Batches in the current epoch (all of them, not only those left)."""
        return len(self.batch_indices(self._epoch))

    @property
    def epoch_number(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its first batch."""
        self._epoch = int(epoch)
        self._position = 0

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of ``epoch`` from its start."""
        self.set_epoch(epoch)
        return iter(self)

    def __iter__(self) -> Iterator[Batch]:
        batches = self.batch_indices(self._epoch)
        while self._position < len(batches):
            indices = batches[self._position]
            self._position += 1
            yield collate([self.encoded[i] for i in indices], labeled=self.labeled)

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "position": self._position, "seed": self.seed,
                "n_sentences": len(self.encoded)}

    def load_state_dict(self, state: dict) -> None:
        if state.get("n_sentences") != len(self.encoded) or state.get("seed") != self.seed:
            raise ValueError(f"batcher state for {state.get('n_sentences')} sentences and seed "
                             f"{state.get('seed')} does not match this batcher "
                             f"({len(self.encoded)} sentences, seed {self.seed})")
        self._epoch = int(state["epoch"])
        self._position = int(state["position"])
