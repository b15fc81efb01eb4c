from __future__ import annotations

import pytest

from tests.inference.helpers import train_tiny


@pytest.fixture(scope="session")
def select_checkpoint(tmp_path_factory):
    """A tiny trained parser (classifier labels, no UPOS input), once for the session."""
    return train_tiny(tmp_path_factory.mktemp("select-parser"), "classifier")
