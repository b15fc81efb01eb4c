"""The packed form tables of the layers' dictionaries: exact round trips."""

import pytest

from parser.data.form_table import FormTable


def test_pack_round_trips_every_form_and_class():
    classes_of = {"saw": {"VBD", "NN"}, "the": {"DT"}, "ένα": {"Case=Nom|Gender=Neut", "_"},
                  "x": {""}, "tab-free": {"a b"}}
    table = FormTable.from_sets(classes_of)
    back = FormTable.unpack(table.pack())
    assert back == table
    assert {form: set(back[form]) for form in back} == classes_of
    assert FormTable.unpack(FormTable.from_sets({}).pack()) == {}


def test_a_truncated_table_is_refused():
    with pytest.raises(ValueError, match="without its classes"):
        FormTable.unpack("saw\nVBD\nthe")
