"""CoNLL-U in and out, validation, vocabularies, batching, the UD data root and its treebanks."""

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
from parser.data.paths import find_treebank, resolve_ud_root, treebank_file
from parser.data.treebanks import TreebankInfo, read_treebank_info
from parser.data.validate import ConlluError
from parser.data.vocab import N_SPECIAL, PAD, ROOT, UNK, Vocab, Vocabularies

__all__ = [
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
    "TreebankInfo",
    "Vocab",
    "Vocabularies",
    "collate",
    "encode",
    "encode_all",
    "find_treebank",
    "format_sentence",
    "read_conllu",
    "read_tokenized",
    "read_treebank_info",
    "resolve_ud_root",
    "treebank_file",
    "write_conllu",
]
