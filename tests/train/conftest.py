"""One torch thread in these tests: on a shared 2-core machine, intra-op threads spin-wait for
each other and tiny models train ~20x slower with two threads than with one."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
