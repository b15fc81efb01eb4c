"""The tokenizer's training data: the treebank file of a split, pieces of its paragraph texts
with their character tags (:mod:`parser.tokenize.text`), the character vocabulary, and the
token / sentence F1 used to pick the best model on dev."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import Tensor

from parser.data.paths import existing_file, resolve_ud_root, treebank_file
from parser.data.vocab import Vocab
from parser.tokenize.segment import TrainedTokenizer, encode, tokenize_paragraphs
from parser.tokenize.text import Paragraph, paragraph_tags, paragraph_text, spans

__all__ = ["Pieces", "build_chars", "cut_pieces", "evaluate_tokenizer", "span_scores", "split_path"]


def split_path(data: DictConfig, split: str) -> Path:
    """``data.<split>_file`` if set, else the treebank's file of ``data.<split>_split``."""
    explicit = data.get(f"{split}_file")
    if explicit:
        return existing_file(explicit, option=f"data.{split}_file")
    return treebank_file(resolve_ud_root(data.root), data.treebank, data.get(f"{split}_split"))


def build_chars(paragraphs: Sequence[Paragraph], *, min_freq: int) -> Vocab:
    """Characters of the paragraphs' texts seen at least ``min_freq`` times (whitespace: a space)."""
    counts: Counter = Counter()
    for paragraph in paragraphs:
        counts.update(" " if c.isspace() else c for c in paragraph_tags(paragraph)[0])
    return Vocab.build(counts, min_freq=min_freq, name="chars")


def cut_pieces(paragraphs: Sequence[Paragraph], *, segment: int) -> list[tuple[str, list[int]]]:
    """Each paragraph's ``(text, tags)`` cut into pieces of at most ``segment`` characters, at a
    space where there is one (a piece may then end mid-sentence, never mid-token)."""
    if segment < 2:
        raise ValueError(f"data.segment={segment}: must be >= 2")
    pieces = []
    for paragraph in paragraphs:
        text, tags = paragraph_tags(paragraph)
        start = 0
        while start < len(text):
            end = min(start + segment, len(text))
            if end < len(text):
                space = text.rfind(" ", start + 1, end)
                end = space if space > start else end
            pieces.append((text[start:end], tags[start:end]))
            start = end
    return pieces


@dataclass
class Pieces:
    """Encoded training pieces, drawn in shuffled batches (a new order each epoch); ``epoch``
    counts the passes completed, and the position is a checkpoint's (``state_dict``)."""

    chars: list[list[int]]
    classes: list[list[int]]
    tags: list[list[int]]
    batch_size: int
    seed: int = 0

    @classmethod
    def build(cls, pieces: Sequence[tuple[str, list[int]]], vocab: Vocab, *, batch_size: int,
              seed: int) -> Pieces:
        encoded = [encode(text, vocab) for text, _ in pieces]
        return cls([e[0] for e in encoded], [e[1] for e in encoded], [list(t) for _, t in pieces],
                   batch_size, seed)

    def __post_init__(self) -> None:
        if not self.chars:
            raise ValueError("tokenizer: no training text")
        self._random = random.Random(self.seed)
        self._order: list[int] = []
        self._passes = 0  # orders drawn so far; the first is epoch 0

    def __len__(self) -> int:
        return (len(self.chars) + self.batch_size - 1) // self.batch_size

    @property
    def epoch(self) -> int:
        return max(self._passes - 1, 0)

    def state_dict(self) -> dict[str, Any]:
        version, mt_state, gauss = self._random.getstate()
        return {"random": [version, list(mt_state), gauss], "order": list(self._order),
                "passes": self._passes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        version, mt_state, gauss = state["random"]
        self._random.setstate((version, tuple(mt_state), gauss))
        self._order, self._passes = list(state["order"]), int(state["passes"])

    def next(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(chars, classes, tags [B, pos], lengths [B])`` of the next batch."""
        if len(self._order) < self.batch_size:
            order = list(range(len(self.chars)))
            self._random.shuffle(order)
            self._order += order
            self._passes += 1
        rows, self._order = self._order[: self.batch_size], self._order[self.batch_size :]
        longest = max(len(self.chars[r]) for r in rows)
        out = [torch.zeros(len(rows), longest, dtype=torch.long) for _ in range(3)]
        for i, r in enumerate(rows):
            for tensor, values in zip(out, (self.chars[r], self.classes[r], self.tags[r])):
                tensor[i, : len(values)] = torch.tensor(values)
        return (*out, torch.tensor([len(self.chars[r]) for r in rows]))


def _f1(gold: set, predicted: set) -> float:
    if not gold and not predicted:
        return 1.0
    correct = len(gold & predicted)
    return 2 * correct / (len(gold) + len(predicted)) if correct else 0.0


def evaluate_tokenizer(tokenizer: TrainedTokenizer, paragraphs: Sequence[Paragraph]) -> dict[str, float]:
    """Tokens / sentences F1 of ``tokenizer`` on the text of gold ``paragraphs``."""
    predicted = tokenize_paragraphs(tokenizer, [paragraph_text(p) for p in paragraphs])
    return span_scores(paragraphs, predicted)


def span_scores(gold: Sequence[Paragraph], predicted: Sequence[Paragraph]) -> dict[str, float]:
    """Tokens and sentences F1 (0..100) of ``predicted`` against ``gold``, the same text."""
    gold_tokens, gold_sentences = spans(gold)
    tokens, sentences = spans(predicted)
    return {"tokens_f1": 100 * _f1(gold_tokens, tokens),
            "sentences_f1": 100 * _f1(gold_sentences, sentences)}
