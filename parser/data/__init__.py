"""CoNLL-U in and out, validation, vocabularies, batching and the UD data root."""

from __future__ import annotations

from parser.data.batch import Batch
from parser.data.batching import BucketBatcher, EncodedSentence, collate, encode, encode_all
from parser.data.conllu_io import (
    Sentence,
    Treebank,
    format_sentence,
    read_conllu,
    read_tokenized,
    write_conllu,
)
from parser.data.paths import KNOWN_TREEBANKS, resolve_ud_root, treebank_file
from parser.data.validate import ConlluError
from parser.data.vocab import N_SPECIAL, PAD, ROOT, UNK, Vocab, Vocabularies

__all__ = [
    "KNOWN_TREEBANKS",
    "N_SPECIAL",
    "PAD",
    "ROOT",
    "UNK",
    "Batch",
    "BucketBatcher",
    "ConlluError",
    "EncodedSentence",
    "Sentence",
    "Treebank",
    "Vocab",
    "Vocabularies",
    "collate",
    "encode",
    "encode_all",
    "format_sentence",
    "read_conllu",
    "read_tokenized",
    "resolve_ud_root",
    "treebank_file",
    "write_conllu",
]
