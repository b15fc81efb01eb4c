"""Labels scored at the decoded heads only (``model.label_grid=false``, ``parser-predict
label_grid=false``): the grid's values at those heads, the same predictions as the grid where the
UD label masks are off (they alone move the arcs' scores), valid relations where they are on, and
every prediction option on this path."""

from __future__ import annotations

from dataclasses import replace

import conllu
import pytest
import torch

from parser.cli.evaluate import main as evaluate_main
from parser.cli.select import main as select_main
from parser.data.batching import collate, encode_all
from parser.data.conllu_io import read_conllu
from parser.inference import load_parser, predict_file
from parser.inference.options import PredictOptions
from parser.models import layers
from parser.models.layers import Bilinear
from parser.models.ud_rules import LEFT_TO_RIGHT
from tests.inference.helpers import train_tiny


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("label-grid"), "classifier")


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("block", [None, 8 * 8 * 5])  # None: one block; else 5 words a block
def test_labels_at_heads_are_the_grids_values_there(seed, block, monkeypatch):
    if block is not None:
        monkeypatch.setattr(layers, "BLOCK_ELEMENTS", block)
    generator = torch.Generator().manual_seed(seed)
    bilinear = Bilinear(8, 5)
    with torch.no_grad():
        for parameter in bilinear.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
        batch, width = 3, int(torch.randint(2, 12, (1,), generator=generator))
        dep, head = torch.randn(2, batch, width, 8, generator=generator)
        grid = bilinear(dep, head)  # [B, dep, head, L]
        at = bilinear.at(dep, head)
        for _ in range(3):
            heads = torch.randint(0, width, (batch, width), generator=generator)
            expected = grid.gather(2, heads[..., None, None].expand(batch, width, 1, 5)).squeeze(2)
            torch.testing.assert_close(at(heads), expected, rtol=1e-5, atol=1e-5)
            assert at(heads) is at(heads.clone())  # the same trees: read again, not recomputed


def _predict(checkpoint, source, path, **options) -> list[conllu.TokenList]:
    predict_file(checkpoint, source, path, PredictOptions(**options))
    return conllu.parse(path.read_text(encoding="utf-8"))


def _columns(sentences, *keys):
    return [[tuple(t[k] for k in keys) for t in s if isinstance(t["id"], int)] for s in sentences]


def test_without_label_masks_the_predictions_are_the_grids(classifier, fixtures, tmp_path):
    source = fixtures / "tiny-dev.conllu"
    for options in ({}, {"confidence": True}, {"kbest": 3}, {"samples": 3, "seed": 2}):
        grid = _predict(classifier, source, tmp_path / "grid.conllu", ud_rules="none", **options)
        heads = _predict(classifier, source, tmp_path / "at.conllu", ud_rules="none",
                         label_grid=False, **options)
        assert _columns(heads, "head", "deprel") == _columns(grid, "head", "deprel")
        if "kbest" in options or "samples" in options:  # the other trees, in comments, alike
            assert [s.metadata for s in heads] == [s.metadata for s in grid]
        if options.get("confidence"):
            for ours, theirs in zip(heads, grid):
                for a, b in zip(ours, theirs):
                    if not isinstance(a["id"], int):
                        continue
                    assert a["misc"]["HeadProb"] == b["misc"]["HeadProb"]
                    assert float(a["misc"]["DeprelProb"]) == pytest.approx(float(b["misc"]["DeprelProb"]), abs=2e-3)


def test_with_ud_rules_the_relations_obey_them_on_every_tree(classifier, fixtures, tmp_path):
    source = fixtures / "tiny-dev.conllu"
    for options in ({}, {"kbest": 3}, {"samples": 3, "seed": 1}, {"confidence": True}):
        written = _predict(classifier, source, tmp_path / "at.conllu", label_grid=False, **options)
        words = 0
        for sentence in written:
            for token in sentence:
                if not isinstance(token["id"], int):
                    continue
                words += 1
                assert (token["deprel"] == "root") == (token["head"] == 0)
                if token["deprel"].split(":")[0] in LEFT_TO_RIGHT:
                    assert token["head"] < token["id"]
        assert words > 0


def test_given_heads_and_labels_are_kept(classifier, fixtures, tmp_path):
    # keep_heads=given: the input's arcs and relations are fixed (fixed_arcs, through label_at)
    source = fixtures / "tiny-dev.conllu"
    written = _predict(classifier, source, tmp_path / "kept.conllu", label_grid=False, keep_heads="given")
    gold = conllu.parse(source.read_text(encoding="utf-8"))
    assert _columns(written, "head", "deprel") == _columns(gold, "head", "deprel")


def test_the_grid_is_not_computed(classifier, fixtures):
    model, vocabs, _ = load_parser(classifier)
    batch = collate(encode_all(read_conllu(fixtures / "tiny-dev.conllu").sentences[:3], vocabs),
                    labeled=False)
    with torch.no_grad():
        out = model.eval()(batch, label_grid=False)
    assert out.label_scores is None and out.label_at is not None
    heads = torch.zeros_like(batch.words)
    assert out.labels_on(heads).shape == (*heads.shape, len(vocabs.rels))


def test_a_teacher_scores_labels_as_its_decoder_does(classifier, fixtures):
    # self-training reads its teacher through trees_only(): the distribution the teacher decodes
    model, vocabs, _ = load_parser(classifier)
    batch = collate(encode_all(read_conllu(fixtures / "tiny-dev.conllu").sentences[:3], vocabs),
                    labeled=False)
    with torch.no_grad():
        assert model.eval().trees_only()(batch).label_scores is not None
        model.decoder = replace(model.decoder, label_grid=False)
        out = model.trees_only()(batch)
    assert out.label_scores is None and out.label_at is not None


def test_joint_labels_refuse_it(tmp_path, fixtures):
    joint = train_tiny(tmp_path / "joint", "joint")
    with pytest.raises(ValueError, match="label_grid=false"):
        predict_file(joint, fixtures / "tiny-dev.conllu", tmp_path / "x.conllu",
                     PredictOptions(label_grid=False))


def test_evaluate_and_select_take_it_on_the_command_line(classifier, fixtures, tmp_path):
    # Without label masks, the lean path's parse and selection are the grid's.
    gold = fixtures / "tiny-dev.conllu"
    outputs = {}
    for grid in ("true", "false"):
        out = tmp_path / grid
        assert evaluate_main([f"checkpoint={classifier}", f"gold={gold}", f"output={out}",
                              "ud_rules=none", f"label_grid={grid}"]) == 0
        assert select_main([f"checkpoint={classifier}", f"pool={gold}", f"output={out / 'select.conllu'}",
                            "strategy=words", "unit=words", "budget=6", "ud_rules=none",
                            f"label_grid={grid}"]) == 0
        parses = [conllu.parse((out / name).read_text(encoding="utf-8"))
                  for name in ("tiny-dev.pred.conllu", "select.conllu")]
        outputs[grid] = [_columns(parse, "head", "deprel") for parse in parses]
    assert outputs["false"] == outputs["true"]
    assert any(row[0] is None for sentence in outputs["false"][1] for row in sentence)  # selected words
