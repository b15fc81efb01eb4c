"""Parsing with a trained model, the one path used by the trainer's evaluations, ``parser-predict``
and ``parser-evaluate``: restore a checkpoint (:func:`load_parser`), tag missing UPOS with a trained
tagger, decode best trees (:func:`parse`), write CoNLL-U (:func:`write_predictions`), and the whole
file pipeline (:func:`predict_file`)."""

from __future__ import annotations

from parser.inference.loading import load_decoder, load_parser
from parser.inference.parse import (
    Predictions,
    log_unknown_words,
    missing_upos,
    parse,
    reads_upos,
    tag_input,
    unknown_words,
    write_predictions,
)
from parser.inference.predict import predict_file

__all__ = [
    "Predictions", "load_decoder", "load_parser", "log_unknown_words", "missing_upos", "parse", "predict_file",
    "reads_upos", "tag_input", "unknown_words", "write_predictions",
]
