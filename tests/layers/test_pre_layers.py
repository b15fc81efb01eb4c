"""A checkpoint written before token-level layers (tests/fixtures/pre_layers, made by commit
a357911's code) loads and predicts as before: the same trees, tags, marginals and k-best trees;
its LEMMA, XPOS and FEATS, which it does not predict, are written ``_`` (not copied from the
input), and with ``keep_columns=given`` the output is byte for byte the old one."""

from __future__ import annotations

import pytest

from parser import Pipeline
from parser.cli.predict import main as predict_main
from parser.inference import load_parser
from tests.layers.helpers import FIXTURES

OLD = FIXTURES / "pre_layers"
CASES = {"best.conllu": [], "kbest2.conllu": ["kbest=2"], "confidence.conllu": ["confidence=true"]}
CLEARED = (2, 4, 5)  # LEMMA, XPOS, FEATS


def _predict(tmp_path, options):
    out = tmp_path / "out.conllu"
    assert predict_main([f"checkpoint={OLD / 'parser.pt'}", f"input={FIXTURES / 'tiny-dev.conllu'}",
                         f"output={out}", *options]) == 0
    return out.read_text(encoding="utf-8")


def test_the_old_checkpoint_has_no_layers():
    model, vocabs, _ = load_parser(OLD / "parser.pt")
    assert vocabs.layers == {} and len(model.scorer.layer_heads) == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_with_keep_columns_given_the_output_is_the_old_one(tmp_path, name):
    assert _predict(tmp_path, [*CASES[name], "keep_columns=given"]) == (OLD / name).read_text(
        encoding="utf-8")


@pytest.mark.parametrize("name", sorted(CASES))
def test_by_default_only_the_columns_it_does_not_predict_change(tmp_path, name):
    new = _predict(tmp_path, CASES[name]).split("\n")
    old = (OLD / name).read_text(encoding="utf-8").split("\n")
    assert len(new) == len(old)
    for new_line, old_line in zip(new, old):
        new_cols, old_cols = new_line.split("\t"), old_line.split("\t")
        if len(old_cols) != 10 or not old_cols[0].isdigit():
            assert new_line == old_line  # comments (tree_prob, tree_entropy, ...) and MWT lines
            continue
        assert [c for i, c in enumerate(new_cols) if i not in CLEARED] == [
            c for i, c in enumerate(old_cols) if i not in CLEARED]
        assert [new_cols[i] for i in CLEARED] == ["_", "_", "_"]


def test_a_pipeline_file_from_before_layers_parses_raw_text_as_before(tmp_path):
    out = tmp_path / "raw.conllu"
    Pipeline.load(OLD / "tiny.pipeline").parse_file(OLD / "raw.txt", out, format="raw")
    assert out.read_text(encoding="utf-8") == (OLD / "raw.conllu").read_text(encoding="utf-8")
