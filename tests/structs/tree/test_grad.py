"""Gradients: gradcheck in float64 of log Z, entropy, KL, a GE objective and the marginals
(second derivatives of log Z), on the LU path and on the log-space elimination path."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

from parser.structs import TreeCRF
from parser.structs.tree.elimination import log_partition_by_elimination

LENGTHS = torch.tensor([4, 2, 3])


def scores(seed: int, *, scale: float = 1.0, size: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(len(LENGTHS), size + 1, size + 1, generator=gen, dtype=torch.float64)
    return x.requires_grad_()


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_gradcheck_log_partition_entropy_kl(single_root):
    p, q = scores(0), scores(1)

    def crf(s):
        return TreeCRF(s, LENGTHS, single_root=single_root)

    assert gradcheck(lambda s: crf(s).log_partition, (p,), fast_mode=True)
    assert gradcheck(lambda s: crf(s).entropy(), (p,), fast_mode=True)
    assert gradcheck(lambda a, b: crf(a).kl(crf(b)), (p, q), fast_mode=True)


def test_gradcheck_ge_objective_and_marginals_twice():
    gen = torch.Generator().manual_seed(2)
    features = torch.randn(3, 5, 5, 4, generator=gen, dtype=torch.float64)
    target = torch.rand(3, 4, generator=gen, dtype=torch.float64)

    def ge(s):
        return ((TreeCRF(s, LENGTHS).expect(features) - target) ** 2).sum()

    assert gradcheck(ge, (scores(3),), fast_mode=True)
    weights = torch.randn(3, 5, 5, generator=gen, dtype=torch.float64)
    marg = lambda s: (TreeCRF(s, LENGTHS, single_root=False).marginals * weights).sum()
    log_z = lambda s: TreeCRF(s, LENGTHS, single_root=False).log_partition
    assert gradgradcheck(log_z, (scores(4),), fast_mode=True)
    assert gradcheck(marg, (scores(4),), fast_mode=True)
    assert gradgradcheck(ge, (scores(5),), fast_mode=True)


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_elimination_path_gradients(single_root):
    """The robust path by itself, and a batch where TreeCRF must use it for one sentence."""

    def fn(s):
        return log_partition_by_elimination(s, LENGTHS, single_root=single_root)

    assert gradcheck(fn, (scores(6),), fast_mode=True)
    assert gradgradcheck(fn, (scores(6),), fast_mode=True)
    # A cycle of strong arcs (1 -> 2 -> ... -> 9 -> 1 at +1000) makes the Laplacian nearly
    # singular: LU is not trusted, the marginals come from the elimination, are far from 0/1 and
    # must still be differentiable.
    gen = torch.Generator().manual_seed(7)
    big = torch.randn(1, 10, 10, generator=gen, dtype=torch.float64)
    words = torch.arange(1, 10)
    big[0, words, words % 9 + 1] += 1000.0
    big.requires_grad_()
    lengths = torch.tensor([9])
    crf = TreeCRF(big.detach(), lengths, single_root=single_root)
    assert not crf._factors.trusted.any()
    assert 0.3 < crf.marginals[0, :, 0].max() < 0.4
    weights = torch.randn(1, 10, 10, generator=gen, dtype=torch.float64)
    def marginals(s):
        return (TreeCRF(s, lengths, single_root=single_root).marginals * weights).sum()

    assert gradcheck(marginals, (big,), eps=1e-7, atol=1e-5, fast_mode=True)
