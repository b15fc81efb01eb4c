"""The tensors one step of training or prediction sees.

Conventions (shared by every layer): position 0 of each sentence is ROOT, so a sentence of
``lengths[b]`` words occupies positions ``1..lengths[b]`` and tensors have ``N+1`` positions,
``N = lengths.max()``. Padding positions hold id 0 (``PAD``) in the id tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import Tensor


@dataclass(frozen=True)
class Batch:
    """A padded batch of sentences.

    words:   ``[B, N+1]`` word ids (ROOT id at position 0, PAD beyond the length).
    chars:   ``[B, N+1, C]`` character ids of each word form (PAD-filled).
    upos:    ``[B, N+1]`` UPOS ids, gold or predicted; ROOT id at position 0.
    lengths: ``[B]`` number of words (ROOT not counted).
    heads:   ``[B, N+1]`` gold heads, ``-1`` where unannotated; ``None`` for unlabeled text.
    rels:    ``[B, N+1]`` gold relation ids, ``-1`` where unannotated; ``None`` for unlabeled text.
    index:   ``[B]`` position of each sentence in its dataset, to write predictions back.
    layers:  gold class ids of each token-level layer by name (:mod:`parser.data.layers`),
             ``[B, N+1]`` long, ``-1`` at ROOT, padding and unannotated words; ``None`` for
             unlabeled text.
    vectors: ``[B, N+1]`` pretrained vector row ids (``Vocabularies.vector_ids``; ROOT id at
             position 0, PAD beyond the length); ``None`` without ``model.vectors``.
    """

    words: Tensor
    chars: Tensor
    upos: Tensor
    lengths: Tensor
    heads: Tensor | None = None
    rels: Tensor | None = None
    index: Tensor | None = None
    layers: Mapping[str, Tensor] | None = None
    vectors: Tensor | None = None

    @property
    def size(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.lengths.sum())

    @property
    def is_labeled(self) -> bool:
        return self.heads is not None

    @property
    def word_mask(self) -> Tensor:
        """``[B, N+1]`` True on real words (False on ROOT and padding)."""
        positions = torch.arange(self.words.shape[1], device=self.lengths.device)
        return (positions > 0) & (positions <= self.lengths[:, None])

    def to(self, device: torch.device | str) -> Batch:
        def move(value):
            if isinstance(value, Mapping):
                return {name: t.to(device) for name, t in value.items()}
            return None if value is None else value.to(device)
        return Batch(*(move(getattr(self, f)) for f in self.__dataclass_fields__))

    def without_annotation(self) -> Batch:
        """The same sentences as unlabeled text: gold heads, relations and layers dropped."""
        return replace(self, heads=None, rels=None, layers=None)
