"""Parsing with a trained model. One annotator (:class:`Annotator`) holds a parser, its decoder,
an optional tagger and the prediction options and turns chunks of sentences into CoNLL-U; every
prediction path (files: :func:`predict_file`; text: :class:`parser.Pipeline`; the trainer's final
dev/test evaluation) goes through it. Below it: restoring a checkpoint (:func:`load_parser`),
tagging missing UPOS, best trees (:func:`parse`, also the trainer's in-loop dev score) and their
CoNLL-U (:func:`prediction_blocks`)."""

from __future__ import annotations

from parser.inference.annotator import MAX_WORDS, Annotated, Annotator, ParseCount
from parser.inference.loading import load_decoder, load_parser
from parser.inference.parse import (
    Predictions,
    log_unknown_words,
    missing_upos,
    parse,
    prediction_blocks,
    reads_upos,
    tag_input,
    unknown_words,
    write_predictions,
)
from parser.inference.predict import predict_file

__all__ = [
    "MAX_WORDS",
    "Annotated",
    "Annotator",
    "ParseCount",
    "Predictions",
    "load_decoder",
    "load_parser",
    "log_unknown_words",
    "missing_upos",
    "parse",
    "predict_file",
    "prediction_blocks",
    "reads_upos",
    "tag_input",
    "unknown_words",
    "write_predictions",
]
