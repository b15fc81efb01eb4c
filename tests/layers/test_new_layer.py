"""A fifth layer is a class, a config entry and a test: this file alone (no edit elsewhere)
defines one, trains it with the parser, predicts it into its column and round-trips it through a
checkpoint. The layer reads the words' shapes (``Xx``, ``x``, ``.``), which the tiny fixture
lacks as a column: it computes its targets from the forms, a case the base class allows."""

from __future__ import annotations

import re

import conllu

from parser.cli.predict import main as predict_main
from parser.data.conllu_io import Sentence
from parser.data.layers import TokenLayer, register_layer
from parser.inference import load_parser
from tests.layers.helpers import FIXTURES, train_layers


def shape(form: str) -> str:
    """``Dogs`` -> ``Xx``, ``42`` -> ``d``, ``.`` -> ``.``."""
    return re.sub(r"(.)\1+", r"\1", re.sub(r"\d", "d", re.sub(r"[a-z]", "x", re.sub(r"[A-Z]", "X", form))))


@register_layer
class ShapeLayer(TokenLayer):
    """Each word's shape, written into XPOS (the fixture leaves XPOS ``_``)."""

    name = "test_shape"
    column = "XPOS"

    def targets(self, sentence: Sentence) -> list[str | None]:
        return [shape(form) for form in sentence.forms]


def test_a_layer_defined_here_trains_predicts_and_round_trips(tmp_path):
    dev = FIXTURES / "tiny-dev.conllu"
    checkpoint = train_layers(tmp_path / "run", FIXTURES / "tiny-train.conllu", dev,
                              "model.layers=[test_shape]", steps=200)
    model, vocabs, _ = load_parser(checkpoint)
    assert set(vocabs.layers) == {"test_shape"} and "test_shape" in model.scorer.layer_heads
    out = tmp_path / "pred.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={dev}", f"output={out}"]) == 0
    predicted = [[t["xpos"] for t in tokens if isinstance(t["id"], int)]
                 for tokens in conllu.parse(out.read_text(encoding="utf-8"))]
    gold = [[shape(t["form"]) for t in tokens if isinstance(t["id"], int)]
            for tokens in conllu.parse(dev.read_text(encoding="utf-8"))]
    pairs = [(p, g) for row, rows in zip(predicted, gold) for p, g in zip(row, rows)]
    majority = max(sum(g == value for _, g in pairs) for value in {g for _, g in pairs})
    assert sum(p == g for p, g in pairs) > majority  # learnt beyond the commonest shape
    again = tmp_path / "again.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={dev}", f"output={again}"]) == 0
    assert again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
