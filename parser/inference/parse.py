"""Parsing a set of sentences with a trained model: best trees, in-loop scores, prediction files,
and the UPOS a parser reads (taken from the input or from a trained tagger).

The trainer's dev evaluation every k steps calls :func:`parse`; every other prediction path goes
through :class:`parser.inference.annotator.Annotator`, which calls it. No length limit applies
here: every sentence is parsed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import IO

import torch

from parser.data.batch import Batch
from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import Sentence, format_sentence
from parser.data.vocab import UNK, Vocabularies
from parser.eval.metrics import AttachmentMetric
from parser.inference.columns import (
    dictionary_tags,
    layer_columns,
    misc_of_words,
    written_columns,
    written_misc,
)
from parser.inference.confidence import SentenceConfidence, batch_confidence, confidence_annotations
from parser.models.parser_model import ParserModel, reads_own_tags
from parser.runtime.io_atomic import atomic_write
from parser.structs import ParserOutput
from parser.tagger.predict import TrainedTagger, tag_sentences

__all__ = [
    "Predictions", "log_unknown_words", "missing_upos", "model_outputs", "parse",
    "prediction_blocks", "reads_upos", "report_unknown_words", "tag_input", "unknown_words",
    "write_predictions",
]

log = logging.getLogger(__name__)

# Batches of prediction hold sentences within 10% (at least 1 word) of the same length: the
# BiLSTM and the [B, dep, head, L] label grid compute every padded position, and the plain token
# budget left about 50% padding on EWT test. Outputs do not depend on how sentences are batched.
LENGTH_SPREAD = 0.1


@dataclass(frozen=True)
class Predictions:
    """Per sentence, in input order: ``heads`` (0 = ROOT) and ``deprels`` (names, or None when the
    model predicts no relations); ``scores`` from ``AttachmentMetric.compute`` when every
    sentence had gold heads, else None (with ``upos_acc`` when the model tags: its accuracy on
    the words with a given UPOS); ``upos``: the tags of a parser with a UPOS head, else None;
    ``confidence``: per sentence, the tree CRF's marginals of the written tree (``parse(...,
    confidence=True)``), else None; ``columns``: per sentence, the columns its token-level
    layers predict (``{"LEMMA": [...], "FEATS": [...]}``; empty dicts without layers)."""

    heads: list[list[int]]
    deprels: list[list[str | None]]
    scores: dict | None
    upos: list[list[str]] | None = None
    confidence: list[SentenceConfidence] | None = None
    columns: list[dict[str, list[str | None]]] | None = None


def model_outputs(model: ParserModel, encoded: Sequence, *, tokens_per_batch: int,
                  cells_per_batch: int | None, device: torch.device | str, labeled: bool = False,
                  layers: bool = True) -> Iterator[tuple[Batch, ParserOutput]]:
    """``(batch, model(batch))`` over the encoded sentences, bucketed by length in input-index
    batches (``batch.index``) of sentences of nearly equal length (:data:`LENGTH_SPREAD`), with
    the model in eval mode meanwhile (its mode restored after); without autograd, each distinct
    form's characters are encoded once for all the batches (``ParserModel.remembering_forms``).
    ``cells_per_batch`` bounds batch size x (longest + 1)^2 (see ``BucketBatcher``);
    ``layers``: False, no token-level layer scores (``ParserModel.forward``)."""
    batcher = BucketBatcher(encoded, tokens_per_batch=tokens_per_batch, shuffle=False,
                            max_length=None, labeled=labeled, cells_per_batch=cells_per_batch,
                            length_spread=LENGTH_SPREAD)
    was_training = model.training
    model.eval()
    try:
        with model.remembering_forms([e.chars for e in encoded]):
            for batch in batcher:
                batch = batch.to(device)
                yield batch, model(batch, layers=layers, label_grid=model.decoder.label_grid)
    finally:
        model.train(was_training)


@torch.no_grad()
def parse(
    model: ParserModel,
    sentences: Sequence[Sentence],
    vocabs: Vocabularies,
    *,
    tokens_per_batch: int,
    cells_per_batch: int | None = None,
    device: torch.device | str = "cpu",
    score: bool = True,
    confidence: bool = False,
    columns: bool = True,
) -> Predictions:
    """Best trees of ``sentences`` (model in eval mode for the call, training mode restored).
    ``cells_per_batch`` bounds batch size x (longest + 1)^2 (see ``BucketBatcher``).
    ``confidence``: also the marginals of the written trees (:mod:`parser.inference.confidence`);
    ``columns``: the token-level layers' columns (False: none, for a caller that writes nothing)."""
    sentences = list(sentences)
    encoded = encode_all(sentences, vocabs, layer_targets=False, trees=score)
    gold = score and all(e.heads is not None for e in encoded)
    metric = AttachmentMetric() if gold else None
    rel_universal = vocabs.rel_universal_ids()
    heads: list[list[int] | None] = [None] * len(encoded)
    rels: list[list[str | None] | None] = [None] * len(encoded)
    tags: list[list[str] | None] = [None] * len(encoded)
    sure: list[SentenceConfidence | None] = [None] * len(encoded)
    layer_values: list[dict[str, list[str | None]]] = [{} for _ in encoded]
    tagged = known = 0
    rel_names, tag_names = vocabs.rels.tokens, vocabs.upos.tokens
    for batch, out in model_outputs(model, encoded, tokens_per_batch=tokens_per_batch,
                                    cells_per_batch=cells_per_batch, device=device, labeled=gold,
                                    layers=columns):
        out = dictionary_tags(out, batch, vocabs, sentences)
        pred_heads, pred_rels = model.decoder.decode(out, upos=batch.upos)
        if metric is not None:
            metric.update(pred_heads, pred_rels, batch.heads, batch.rels, batch.lengths,
                          rel_universal=rel_universal.to(pred_heads.device))
        batch_sure = batch_confidence(out, pred_heads, pred_rels) if confidence else None
        if columns:
            for index, values in layer_columns(out, batch, vocabs, sentences).items():
                layer_values[index] = values
        # Python lists once per batch, not per sentence (tensor indexing costs ~µs a call).
        own = getattr(out, "upos", None)  # a parser with a UPOS head (TaggedOutput)
        batch_heads = pred_heads.tolist()
        batch_rels = pred_rels.tolist() if pred_rels is not None else None
        batch_tags = own.tolist() if own is not None else None
        if own is not None:
            given = (batch.upos > UNK) & batch.word_mask  # the head's own guess against the given tag
            guess = out.tag_scores[..., 3:].argmax(-1) + 3
            known += int(given.sum())
            tagged += int((guess == batch.upos)[given].sum())
        for b, (index, n) in enumerate(zip(batch.index.tolist(), batch.lengths.tolist())):
            if batch_sure is not None:
                sure[index] = batch_sure[b]
            heads[index] = batch_heads[b][1 : n + 1]
            rels[index] = ([None] * n if batch_rels is None
                           else [rel_names[r] for r in batch_rels[b][1 : n + 1]])
            if batch_tags is not None:
                tags[index] = [tag_names[t] for t in batch_tags[b][1 : n + 1]]
    scores = metric.compute() if metric is not None else None
    if scores is not None and known:
        scores = {**scores, "upos_acc": 100.0 * tagged / known}
    own_tags = all(t is not None for t in tags) and bool(tags)
    return Predictions(heads=heads, deprels=rels, scores=scores, upos=tags if own_tags else None,
                       confidence=sure if confidence else None, columns=layer_values)


def unknown_words(sentences: Sequence[Sentence], vocabs: Vocabularies) -> tuple[int, int]:
    """``(words the model reads as UNK, words)``: forms unseen in training or under its
    frequency cut-off. They are parsed all the same (from characters and UPOS)."""
    total = sum(len(sentence) for sentence in sentences)
    unknown = sum(vocabs.words.index(form) == UNK for s in sentences for form in s.forms)
    return unknown, total


def log_unknown_words(sentences: Sequence[Sentence], vocabs: Vocabularies, *, name: str) -> float:
    """Log (INFO) and return the share of ``sentences``' words that are UNK to the model."""
    unknown, total = unknown_words(sentences, vocabs)
    return report_unknown_words(unknown, total, name=name)


def report_unknown_words(unknown: int, total: int, *, name: str) -> float:
    """Log (INFO) and return the share ``unknown / total`` of words that are UNK to the model
    (counted chunk by chunk by a streaming caller)."""
    rate = unknown / max(total, 1)
    log.info("%s: %d of %d words (%.1f%%) are unknown to the model's vocabulary (read as UNK)",
             name, unknown, total, 100.0 * rate)
    return rate


def prediction_blocks(
    sentences: Sequence[Sentence], predictions: Predictions, *,
    upos: Sequence[Sequence[str]] | None = None, keep_deps: bool = False,
    keep_columns: str = "none",
) -> list[str]:
    """The CoNLL-U block of each sentence with HEAD and DEPREL replaced, the annotation columns
    as :func:`parser.inference.columns.written_columns` says (the layers' predictions, UPOS from
    ``upos`` when it gives one list per sentence, else the parser's own tags when it predicts
    them; ``keep_columns``: see there), the enhanced graph (DEPS, empty nodes)
    removed unless ``keep_deps`` (the input's would contradict the new heads), every other byte
    of the input kept; with ``predictions.confidence``, ``HeadProb`` / ``DeprelProb`` in MISC
    and ``tree_logprob`` / ``tree_entropy`` / ``expected_correct`` comments."""
    if upos is None:
        upos = predictions.upos
    misc = comments = None
    if predictions.confidence is not None:
        misc, comments = confidence_annotations(predictions.confidence)
    blocks = []
    for i, sentence in enumerate(sentences):
        predicted = dict(predictions.columns[i]) if predictions.columns is not None else {}
        if upos is not None:
            predicted["UPOS"] = upos[i]
        columns = written_columns(sentence, predicted, keep_columns=keep_columns)
        words_misc = misc_of_words(written_misc(sentence, predicted, keep_columns=keep_columns),
                                   None if misc is None else misc[i])
        blocks.append(format_sentence(
            sentence, heads=predictions.heads[i], deprels=predictions.deprels[i],
            clear_deps=not keep_deps, misc=words_misc,
            comments=None if comments is None else comments[i], columns=columns,
            where=f"sentence {i}"))
    return blocks


def write_predictions(
    sentences: Sequence[Sentence], predictions: Predictions, path: str | os.PathLike | IO[str], *,
    upos: Sequence[Sequence[str]] | None = None, keep_deps: bool = False,
    keep_columns: str = "none",
) -> None:
    """:func:`prediction_blocks` written to ``path`` atomically, or appended to a stream."""
    blocks = prediction_blocks(sentences, predictions, upos=upos, keep_deps=keep_deps,
                               keep_columns=keep_columns)
    if hasattr(path, "write"):
        path.writelines(blocks)
        return
    with atomic_write(path) as out:
        out.writelines(blocks)


def reads_upos(config: dict) -> bool:
    """Whether a parser with this stored config reads UPOS from its input: a biaffine model when
    ``model.use_upos`` (default true) and ``model.upos_input`` is gold (default), unless it
    predicts its own tags (a UPOS head, :func:`~parser.models.parser_model.reads_own_tags`); the
    log-linear scorer always (its templates are POS). False: no tagger is needed."""
    model = config.get("model") or {}
    if str(model.get("kind", "biaffine")) == "biaffine":
        if reads_own_tags(model) or str(model.get("upos_input", "gold")) != "gold":
            return False
        return bool(model.get("use_upos", True))
    return True


def missing_upos(sentences: Sequence[Sentence]) -> tuple[int, int]:
    """``(words whose UPOS is '_', words)``."""
    total = sum(len(sentence) for sentence in sentences)
    return sum(tag is None for s in sentences for tag in s.upos), total


def tag_input(
    sentences: Sequence[Sentence], tagger: TrainedTagger, *, retag: bool, tokens_per_batch: int
) -> tuple[list[Sentence], list[list[str]]]:
    """UPOS from ``tagger`` (a :class:`~parser.tagger.predict.TrainedTagger`): for every word when
    ``retag``, else only for the words whose UPOS is ``_`` (the given tags are kept). Returns new
    sentences carrying the tags (the caller's are untouched) and the UPOS column to write."""
    predicted = tag_sentences(tagger, sentences, tokens_per_batch=tokens_per_batch)
    columns = [
        list(tags) if retag else [given if given is not None else guess
                                  for given, guess in zip(sentence.upos, tags)]
        for sentence, tags in zip(sentences, predicted)
    ]
    tagged = [replace(sentence, upos=list(column)) for sentence, column in zip(sentences, columns)]
    return tagged, columns
