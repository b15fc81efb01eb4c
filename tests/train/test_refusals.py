"""Refusals of the training data name what a user would set, not a keyword of the code."""

from __future__ import annotations

import re

import pytest

from parser.train.training_data import load_training_data
from tests.train.helpers import tiny_config

INTERNAL = re.compile(r"require_trees|on_invalid|check_heads|single_root|partial_option")


def test_partly_annotated_training_heads_name_data_partial_trees(fixtures):
    path = fixtures / "unannotated-heads.conllu"
    with pytest.raises(ValueError) as refused:
        load_training_data(tiny_config(f"data.train_file={path}").data, seed=0)
    message = str(refused.value)
    assert message.startswith(f"{path}:10: HEAD is '_' (unannotated)")
    assert "set data.partial_trees=true" in message
    assert not INTERNAL.search(message)


def test_a_partly_annotated_dev_file_names_no_internal_keyword(fixtures):
    """The dev file scores the parser: no setting accepts '_' heads there, and none is named."""
    path = fixtures / "unannotated-heads.conllu"
    with pytest.raises(ValueError) as refused:
        load_training_data(tiny_config(f"data.dev_file={path}").data, seed=0)
    message = str(refused.value)
    assert message.startswith(f"{path}:10: HEAD is '_' (unannotated)")
    assert "data.partial_trees" not in message and not INTERNAL.search(message)
