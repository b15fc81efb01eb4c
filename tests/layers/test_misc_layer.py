"""A layer whose column is MISC: trained, and its predictions written into MISC through the one
MISC writer (parser.data.misc) beside the input's own entries and the confidence, never
dropped; a layer on a column no writer writes is refused when it is registered."""

from __future__ import annotations

import conllu
import pytest

from parser.cli.predict import main as predict_main
from parser.data.conllu_io import Sentence
from parser.data.layers import TokenLayer, register_layer
from parser.data.misc import misc_entries
from tests.layers.helpers import FIXTURES, train_layers


@register_layer
class CapitalLayer(TokenLayer):
    """``Cap=Yes`` / ``Cap=No`` per word, written into MISC."""

    name = "test_misc_capital"
    column = "MISC"

    def targets(self, sentence: Sentence) -> list[str | None]:
        return [f"Cap={'Yes' if form[:1].isupper() else 'No'}" for form in sentence.forms]


def test_a_column_no_writer_writes_is_refused_at_registration():
    class DepsLayer(TokenLayer):
        name = "test_deps"
        column = "DEPS"

    with pytest.raises(ValueError, match="DEPS.*cannot be written"):
        register_layer(DepsLayer)


def test_a_misc_layer_trains_and_writes_into_misc(tmp_path):
    dev = FIXTURES / "tiny-dev.conllu"
    checkpoint = train_layers(tmp_path / "run", FIXTURES / "tiny-train.conllu", dev,
                              "model.layers=[test_misc_capital]", steps=60)
    out = tmp_path / "pred.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={dev}", f"output={out}",
                         "confidence=true"]) == 0
    given = [[t["misc"] or {} for t in s if isinstance(t["id"], int)]
             for s in conllu.parse(dev.read_text(encoding="utf-8"))]
    rows = [[line.split("\t")[9] for line in block.split("\n")
             if line and not line.startswith("#") and line.split("\t")[0].isdigit()]
            for block in out.read_text(encoding="utf-8").strip().split("\n\n")]
    assert len(rows) == len(given)
    for words, inputs in zip(rows, given):
        for misc, old in zip(words, inputs):
            entries = misc_entries(misc)
            assert entries["Cap"] in ("Yes", "No") and "HeadProb" in entries
            assert all(entries[key] == value for key, value in old.items())  # input's kept
            assert list(entries)[-2:] in (["HeadProb", "DeprelProb"], ["Cap", "HeadProb"])
