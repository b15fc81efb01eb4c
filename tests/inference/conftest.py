from __future__ import annotations

import pytest

from tests.inference.helpers import train_tiny


@pytest.fixture(scope="session", params=["classifier", "joint"])
def tiny_checkpoint(request, tmp_path_factory):
    """A tiny trained parser, once per label mode for the whole session."""
    return train_tiny(tmp_path_factory.mktemp(f"alternatives-{request.param}"), request.param)
