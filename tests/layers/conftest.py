from __future__ import annotations

import pytest

from tests.layers.helpers import morph_treebank, train_layers


@pytest.fixture(scope="session")
def morph_files(tmp_path_factory):
    """(train, dev): the tiny treebank with XPOS and FEATS."""
    return morph_treebank(tmp_path_factory.mktemp("morph"))


@pytest.fixture(scope="session")
def layered_checkpoint(tmp_path_factory, morph_files):
    """A tiny parser with XPOS, FEATS and LEMMA heads (the biaffine model group's layers),
    trained long enough to beat each column's most frequent value."""
    train, dev = morph_files
    return train_layers(tmp_path_factory.mktemp("layered"), train, dev, steps=300)
