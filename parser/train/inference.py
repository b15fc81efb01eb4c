"""Parsing a set of sentences with a trained model: best trees, in-loop scores, prediction files.

Used by the trainer (dev evaluation every k steps, final dev/test evaluation), ``parser-predict``
and ``parser-evaluate``. No length limit applies here: every sentence is parsed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import Sentence, write_conllu
from parser.data.vocab import UNK, Vocabularies
from parser.eval.metrics import AttachmentMetric
from parser.train.model import ParserModel

__all__ = ["Predictions", "log_unknown_words", "parse", "unknown_words", "write_predictions"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Predictions:
    """Per sentence, in input order: ``heads`` (0 = ROOT) and ``deprels`` (names, or None when the
    model predicts no relations); ``scores`` from ``AttachmentMetric.compute`` when every
    sentence had gold heads, else None."""

    heads: list[list[int]]
    deprels: list[list[str | None]]
    scores: dict | None


@torch.no_grad()
def parse(
    model: ParserModel,
    sentences: Sequence[Sentence],
    vocabs: Vocabularies,
    *,
    tokens_per_batch: int,
    device: torch.device | str = "cpu",
    score: bool = True,
) -> Predictions:
    """Best trees of ``sentences`` (model in eval mode for the call, training mode restored)."""
    encoded = encode_all(list(sentences), vocabs)
    gold = score and all(e.heads is not None for e in encoded)
    batcher = BucketBatcher(encoded, tokens_per_batch=tokens_per_batch, shuffle=False,
                            max_length=None, labeled=gold)
    metric = AttachmentMetric() if gold else None
    rel_universal = vocabs.rel_universal_ids()
    heads: list[list[int] | None] = [None] * len(encoded)
    rels: list[list[str | None] | None] = [None] * len(encoded)
    was_training = model.training
    model.eval()
    try:
        for batch in batcher:
            batch = batch.to(device)
            out = model(batch)
            pred_heads, pred_rels = model.decode(out)
            if metric is not None:
                metric.update(pred_heads, pred_rels, batch.heads, batch.rels, batch.lengths,
                              rel_universal=rel_universal.to(pred_heads.device))
            for b, index in enumerate(batch.index.tolist()):
                n = int(batch.lengths[b])
                heads[index] = pred_heads[b, 1 : n + 1].tolist()
                if pred_rels is None:
                    rels[index] = [None] * n
                else:
                    rels[index] = [vocabs.rels.token(r) for r in pred_rels[b, 1 : n + 1].tolist()]
    finally:
        model.train(was_training)
    return Predictions(
        heads=heads, deprels=rels, scores=metric.compute() if metric is not None else None
    )


def unknown_words(sentences: Sequence[Sentence], vocabs: Vocabularies) -> tuple[int, int]:
    """``(words the model reads as UNK, words)``: forms unseen in training or under its
    frequency cut-off. They are parsed all the same (from characters and UPOS)."""
    total = sum(len(sentence) for sentence in sentences)
    unknown = sum(vocabs.words.index(form) == UNK for s in sentences for form in s.forms)
    return unknown, total


def log_unknown_words(sentences: Sequence[Sentence], vocabs: Vocabularies, *, name: str) -> float:
    """Log (INFO) and return the share of ``sentences``' words that are UNK to the model."""
    unknown, total = unknown_words(sentences, vocabs)
    rate = unknown / max(total, 1)
    log.info("%s: %d of %d words (%.1f%%) are unknown to the model's vocabulary (read as UNK)",
             name, unknown, total, 100.0 * rate)
    return rate


def write_predictions(
    sentences: Sequence[Sentence], predictions: Predictions, path: str | os.PathLike
) -> None:
    """CoNLL-U with HEAD and DEPREL replaced, every other byte of the input kept (atomic)."""
    write_conllu(sentences, path, heads=predictions.heads, deprels=predictions.deprels)
