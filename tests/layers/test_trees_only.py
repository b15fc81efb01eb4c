"""A caller that reads only the trees (the ranking pass of ``parser-select``: ``parse(columns=
False)``) skips the token-level layers' heads, and gets the same trees and confidence."""

from __future__ import annotations

import pytest

from parser.data.conllu_io import read_conllu
from parser.inference import load_parser
from parser.inference.parse import parse


def test_trees_without_the_layers_heads_are_the_same(layered_checkpoint, morph_files, monkeypatch):
    model, vocabs, _ = load_parser(layered_checkpoint)
    sentences = read_conllu(morph_files[1]).sentences
    full = parse(model, sentences, vocabs, tokens_per_batch=200, confidence=True)
    assert model.scorer.layer_heads and any(full.columns)

    def refused(*args, **kwargs):
        raise AssertionError("a layer head ran for a caller that reads only the trees")

    for head in model.scorer.layer_heads.values():
        monkeypatch.setattr(head, "forward", refused)
    trees = parse(model, sentences, vocabs, tokens_per_batch=200, confidence=True, columns=False)
    assert trees.heads == full.heads and trees.deprels == full.deprels and trees.upos == full.upos
    assert not any(trees.columns)
    for mine, theirs in zip(trees.confidence, full.confidence):
        assert mine.head_probs == theirs.head_probs and mine.tree_entropy == theirs.tree_entropy
    with pytest.raises(AssertionError, match="a layer head ran"):  # by default they run
        parse(model, sentences, vocabs, tokens_per_batch=200)
