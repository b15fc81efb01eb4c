from __future__ import annotations

import os
import subprocess
import sys

import torch

from parser.models.features import MODULUS, MULTIPLIER, hash_extend, hash_values
from tests.models.reference_features import py_hash

SCRIPT = (
    "import torch; from parser.models.features import hash_values; "
    "print(hash_values(3, torch.tensor([0, 17, 12345]), 5).tolist())"
)


def test_hash_matches_plain_integer_arithmetic() -> None:
    assert hash_values(0, 0).item() == (1 * MULTIPLIER + 1) % MODULUS
    values = torch.tensor([[0, 1, 7], [2**20, 99, MODULUS - 1]])
    ids = hash_values(6, values, 3, values.T[:, :, None])  # broadcasts to [3, 2, 3]
    assert ids.shape == (3, 2, 3)
    for i in range(3):
        for j in range(2):
            for k in range(3):
                assert ids[i, j, k].item() == py_hash(
                    6, values[j, k].item(), 3, values[j, i].item()
                )
    assert (ids >= 0).all() and (ids < MODULUS).all()
    assert torch.equal(hash_extend(hash_values(2, values), 4), hash_values(2, values, 4))


def test_hash_is_pinned_and_the_same_in_other_processes() -> None:
    expected = [83062267, 501477612, 1383891647]
    assert hash_values(3, torch.tensor([0, 17, 12345]), 5).tolist() == expected
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # Another interpreter with another string-hash salt (this one's is random or unset).
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=repo)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=repo,
    )
    assert result.stdout.strip() == str(expected)


def test_distinct_templates_and_conjunctions_get_distinct_ids() -> None:
    values = torch.arange(50)
    ids = torch.cat(
        [hash_values(t, values) for t in range(20)]
        + [hash_values(t, values, 1, 2) for t in range(20)]
    )
    assert ids.unique().numel() == ids.numel()
