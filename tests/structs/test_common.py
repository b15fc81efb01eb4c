"""The shared input rules (parser.structs.common) and the tree-distribution protocol."""

from __future__ import annotations

import pytest
import torch

from parser.structs import (
    LinearChainCRF,
    ProjectiveTreeCRF,
    TreeCRF,
    TreeDistribution,
    eisner,
    maximum_spanning_tree,
    sample_trees,
)
from parser.structs.common import check_scores_and_lengths


def _entry_points():
    yield "TreeCRF", lambda s, n: TreeCRF(s, n).log_partition
    yield "ProjectiveTreeCRF", lambda s, n: ProjectiveTreeCRF(s, n).log_partition
    yield "mst", lambda s, n: maximum_spanning_tree(s, n, single_root=True)
    yield "eisner", lambda s, n: eisner(s, n, single_root=True)
    yield "sample", lambda s, n: sample_trees(s, n, single_root=True, n=2)


@pytest.mark.parametrize(("name", "call"), list(_entry_points()))
def test_one_length_rule_everywhere(name, call):
    """Every tree structure rejects a sentence of 0 words or more than N, naming lengths[b]."""
    scores = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(0))
    call(scores, torch.tensor([4, 1, 2]))  # 1..N is fine
    with pytest.raises(ValueError, match=r"lengths\[1\] = 0 outside 1\.\.N = 1\.\.4"):
        call(scores, torch.tensor([4, 0, 2]))
    with pytest.raises(ValueError, match=r"lengths\[2\] = 5 outside 1\.\.N = 1\.\.4"):
        call(scores, torch.tensor([4, 1, 5]))


def test_empty_batch_is_no_input_error():
    """B = 0 passes the input check (another issue makes every entry point return empty results)."""
    scores = torch.zeros(0, 5, 5)
    checked, padded, _ = check_scores_and_lengths(scores, torch.zeros(0, dtype=torch.long))
    assert padded is False and checked is scores


def test_chain_rejects_length_zero_too():
    scores = torch.zeros(2, 3, 4, 4)
    with pytest.raises(ValueError, match=r"lengths\[1\] = 0"):
        LinearChainCRF(scores, torch.tensor([3, 0]))


@pytest.mark.parametrize("cls", [TreeCRF, ProjectiveTreeCRF])
def test_both_tree_crfs_satisfy_the_protocol(cls):
    scores = torch.randn(2, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    dist = cls(scores, torch.tensor([3, 2]))
    assert isinstance(dist, TreeDistribution)
    heads = dist.argmax()
    assert heads.shape == (2, 4)
    # the protocol's methods agree with each other: p(best tree) from log_prob and from score
    torch.testing.assert_close(dist.log_prob(heads), dist.score(heads) - dist.log_partition)
    assert (dist.entropy() >= -1e-9).all()
    torch.testing.assert_close(dist.arc_marginals.sum(-1)[:, 1:3], torch.ones(2, 2, dtype=torch.float64))
    rows = torch.tensor([[0, 1, 0], [1, 2, 1]])
    got = dist.expect_sparse(rows, torch.tensor([0, 0]), torch.ones(2, dtype=torch.float64), 1)
    torch.testing.assert_close(got[:, 0], torch.stack([dist.arc_marginals[0, 1, 0], dist.arc_marginals[1, 2, 1]]))
