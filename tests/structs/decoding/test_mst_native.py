"""The compiled maximum spanning tree decoder against the pure-torch one (the reference), tree for
tree on random and real scores, and the fallback when it cannot be built."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from parser.data.batching import encode_all
from parser.data.conllu_io import read_conllu
from parser.inference import load_parser
from parser.inference.parse import model_outputs
from parser.structs import maximum_spanning_tree
from parser.structs.decoding import native

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_the_compiled_decoder_builds_on_this_machine():
    # gcc and the C library are on every machine of this project (CI's included)
    assert native.native_library() is not None


@pytest.mark.parametrize("single_root", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_and_torch_decoders_agree_on_random_scores(single_root, dtype):
    generator = torch.Generator().manual_seed(7 + single_root)
    for trial in range(40):
        batch, size = 6, int(torch.randint(2, 40, (1,), generator=generator)) + 1
        scores = (torch.randn(batch, size, size, generator=generator) * 5).to(dtype)
        if trial % 3 == 0:  # forbidden arcs, as the UD rules make them
            scores[torch.rand(batch, size, size, generator=generator) < 0.2] = float("-inf")
            scores[:, :, 0] = torch.randn(batch, size, generator=generator).to(dtype)  # a tree exists
        lengths = torch.randint(1, size, (batch,), generator=generator)
        lengths[0] = size - 1
        compiled = native.native_mst(scores, lengths, single_root=single_root)
        assert compiled is not None
        reference = maximum_spanning_tree(scores, lengths, single_root=single_root, native=False)
        assert torch.equal(maximum_spanning_tree(scores, lengths, single_root=single_root), reference)
        words = torch.arange(size)[None, :] <= lengths[:, None]
        assert torch.equal(compiled.masked_fill(~words, 0), reference), trial


def test_compiled_and_torch_decoders_agree_on_a_trained_models_scores():
    model, vocabs, _ = load_parser(FIXTURES / "pre_layers" / "parser.pt")
    sentences = read_conllu(FIXTURES / "tiny-dev.conllu").sentences
    seen = 0
    with torch.no_grad():
        for batch, out in model_outputs(model, encode_all(sentences, vocabs), tokens_per_batch=500,
                                        cells_per_batch=None, device="cpu"):
            for single_root in (True, False):
                arcs, lengths = out.dist.arc_scores, out.dist.lengths
                reference = maximum_spanning_tree(arcs, lengths, single_root=single_root, native=False)
                compiled = maximum_spanning_tree(arcs, lengths, single_root=single_root)
                assert torch.equal(compiled, reference)
            seen += len(lengths)
    assert seen == len(sentences)


def test_a_sentence_without_a_tree_is_refused_alike():
    scores = torch.zeros(1, 4, 4)
    scores[0, 2, :] = float("-inf")  # word 2 has no head
    assert native.native_mst(scores, torch.tensor([3]), single_root=True) is None
    with pytest.raises(ValueError, match="no single-root spanning tree .* sentence 0"):
        maximum_spanning_tree(scores, torch.tensor([3]), single_root=True)


def test_without_the_compiled_decoder_the_torch_one_runs(monkeypatch, tmp_path, caplog):
    scores = torch.randn(3, 6, 6, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([5, 3, 1])
    expected = maximum_spanning_tree(scores, lengths, single_root=True, native=False)
    monkeypatch.setenv("PARSER_NATIVE", "0")
    native.native_library.cache_clear()
    try:
        assert native.native_library() is None
        assert torch.equal(maximum_spanning_tree(scores, lengths, single_root=True), expected)
        # a build that fails (here: a source that does not compile) is said, and torch decodes
        monkeypatch.setenv("PARSER_NATIVE", "1")
        monkeypatch.setenv("PARSER_NATIVE_CACHE", str(tmp_path / "cache"))
        broken = tmp_path / "broken.c"
        broken.write_text("this is not C\n")
        monkeypatch.setattr(native, "SOURCES", (broken,))
        native.native_library.cache_clear()
        with caplog.at_level(logging.WARNING):
            assert native.native_library() is None
        assert any("could not be built" in r.getMessage() for r in caplog.records)
        assert torch.equal(maximum_spanning_tree(scores, lengths, single_root=True), expected)
    finally:
        native.native_library.cache_clear()


def test_an_unwritable_cache_folder_falls_back_to_the_temporary_one(monkeypatch, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("PARSER_NATIVE_CACHE", str(blocked / "native"))  # cannot be created
    native.native_library.cache_clear()
    try:
        assert native.native_library() is not None
        scores = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(1))
        lengths = torch.tensor([4, 2])
        assert torch.equal(native.native_mst(scores, lengths, single_root=True).masked_fill(
            torch.arange(5)[None, :] > lengths[:, None], 0),
            maximum_spanning_tree(scores, lengths, single_root=True, native=False))
    finally:
        native.native_library.cache_clear()
