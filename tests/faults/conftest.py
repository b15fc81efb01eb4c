"""In-process ``parser-train`` runs let Hydra configure logging: its handlers write to the
stdout of the test that ran it (pytest's capture, closed afterwards). Put the root logger back
after each test, so that a later test's logs do not hit a closed stream."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def restore_root_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)
