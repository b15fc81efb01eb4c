"""The tokenizer and sentence splitter: a character BiLSTM with a linear-chain CRF over per-character
tags (:mod:`parser.tokenize.text`), a multiword-token lookup table (:mod:`parser.tokenize.multiword`),
training (``parser-train-tokenizer``, :mod:`parser.tokenize.train`) and use (``load_tokenizer``,
``tokenize_paragraphs``, ``iter_sentences``)."""

from __future__ import annotations

from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.segment import (
    TrainedTokenizer,
    iter_sentences,
    load_tokenizer,
    split_paragraphs,
    tokenize_paragraphs,
    tokenizer_from_state,
    tokenizer_state,
)
from parser.tokenize.text import Token, read_paragraphs, write_raw_text

__all__ = [
    "MultiwordTable", "Token", "TrainedTokenizer", "iter_sentences", "load_tokenizer",
    "read_paragraphs", "split_paragraphs", "tokenize_paragraphs", "tokenizer_from_state",
    "tokenizer_state", "write_raw_text",
]
