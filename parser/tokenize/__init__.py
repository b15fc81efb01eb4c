"""The tokenizer and sentence splitter: a character BiLSTM with a linear-chain CRF over per-character
tags (:mod:`parser.tokenize.text`), a multiword-token lookup table (:mod:`parser.tokenize.multiword`),
training data and use (``load_tokenizer``, ``tokenize_paragraphs``, ``iter_sentences``). It is
trained by ``parser-train-tokenizer``: the training loop with
:mod:`parser.train.tasks.tokenizer_task`."""

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
