"""A caller that reads only the trees (the ranking pass of ``parser-select``: ``parse(columns=
False)``) skips the token-level layers' heads, and gets the same trees and confidence."""

from __future__ import annotations

import pytest
import torch

from parser.data.batching import collate, encode_all
from parser.data.conllu_io import read_conllu
from parser.inference import load_parser
from parser.inference.parse import parse
from parser.models import TreesOnly
from parser.train.objective import build_training_objective


def test_trees_without_the_layers_heads_are_the_same(layered_checkpoint, morph_files, monkeypatch):
    model, vocabs, _ = load_parser(layered_checkpoint)
    sentences = read_conllu(morph_files[1]).sentences
    full = parse(model, sentences, vocabs, tokens_per_batch=200, confidence=True)
    assert model.scorer.layer_heads and any(full.columns)

    def refused(*args, **kwargs):
        raise AssertionError("a layer head ran for a caller that reads only the trees")

    for head in model.scorer.layer_heads.values():
        monkeypatch.setattr(head, "forward", refused)
    monkeypatch.setattr("parser.models.biaffine.LinearScores", refused)  # prediction's lazy heads
    trees = parse(model, sentences, vocabs, tokens_per_batch=200, confidence=True, columns=False)
    assert trees.heads == full.heads and trees.deprels == full.deprels and trees.upos == full.upos
    assert not any(trees.columns)
    for mine, theirs in zip(trees.confidence, full.confidence):
        assert mine.head_probs == theirs.head_probs and mine.tree_entropy == theirs.tree_entropy
    with pytest.raises(AssertionError, match="a layer head ran"):  # by default they run
        parse(model, sentences, vocabs, tokens_per_batch=200)


def test_a_self_training_teacher_runs_without_its_layer_heads(layered_checkpoint, morph_files,
                                                               monkeypatch):
    model, vocabs, _ = load_parser(layered_checkpoint)
    terms = {"kl": {"weight": 1.0, "checkpoint": str(layered_checkpoint)}}
    objective = build_training_objective(terms, vocabs=vocabs, labeled=[], device="cpu")
    teacher = objective.terms[0].objective.teacher
    assert isinstance(teacher, TreesOnly) and teacher.decoder is teacher.model.decoder
    batch = collate(encode_all(read_conllu(morph_files[1]).sentences[:4], vocabs), labeled=False)
    with torch.no_grad():
        full = model(batch)
        for head in teacher.model.scorer.layer_heads.values():
            monkeypatch.setattr(head, "forward", lambda *a, **k: pytest.fail("a teacher's layer head ran"))
        trees = teacher(batch)
    assert torch.equal(trees.dist.scores, full.dist.scores)
