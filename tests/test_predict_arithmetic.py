"""``experiments/predict_arithmetic.py``: the multiply-adds of a biaffine BiLSTM scorer, part by
part, against the sizes worked out by hand for a tiny model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from parser.config import ModelConfig, ScorerKind
from parser.models.parser_model import build_parser

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location(
    "predict_arithmetic", REPO / "experiments" / "predict_arithmetic.py")
predict_arithmetic = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(predict_arithmetic)


def _model(**sizes):
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), {"kind": ScorerKind.biaffine.value, **sizes})
    return build_parser(cfg, {"words": 10, "chars": 6, "upos": 8, "rels": 5})


def test_counts_each_part_from_the_model_sizes() -> None:
    model = _model(word_dim=6, char_dim=3, char_hidden=4, upos_dim=2, lstm_hidden=5, lstm_layers=2,
                   arc_mlp=7, rel_mlp=3, use_upos=True)
    forms = [["ab", "c"], ["ab", "dd", "e"]]  # 5 words, 2 sentences; distinct forms: 4, 6 chars
    parts = predict_arithmetic.multiply_adds(model, forms)
    # per word: 2 directions x (layer 1: 4*5*(6 word + 2 UPOS + 5), layer 2: 4*5*(10 + 5))
    assert parts["word BiLSTM"] == 5 * 2 * (4 * 5 * 13 + 4 * 5 * 15)
    # per character, 2 directions x 4*4*(3 + 4); per form the projection 2*4 -> word_dim 6
    assert parts["character BiLSTM"] == 6 * 2 * 4 * 4 * 7 + 4 * 8 * 6
    positions, cells = 7, 3 ** 2 + 4 ** 2
    # arc and label MLPs over the 2 x 5 BiLSTM states (no tag head: tag_loss_weight is 0)
    assert parts["MLPs and tag head"] == positions * (2 * 10 * 7 + 2 * 10 * 3)
    assert parts["arc biaffine"] == positions * 7 * 7 + cells * 7
    assert parts["label bilinear"] == positions * 5 * 3 * 3 + cells * 5 * 3  # 5 relations


def test_refuses_a_scorer_without_a_bilstm() -> None:
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig),
                          {"kind": ScorerKind.loglinear.value, "n_buckets": 64, "n_label_buckets": 64})
    model = build_parser(cfg, {"words": 10, "chars": 6, "upos": 8, "rels": 5})
    with pytest.raises(TypeError, match="BiLSTM biaffine scorer only"):
        predict_arithmetic.multiply_adds(model, [["a"]])
