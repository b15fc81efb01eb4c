"""The autograd Functions of the tree CRF (parser.structs.tree.autograd): log Z's gradient and the
marginals' backward (a Hessian-vector product in closed form, elimination for the sentences the
trust test rejects) against gradcheck/gradgradcheck, a plain slogdet reference, brute force and
autograd through the exact elimination path."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.autograd.functional import hvp

from parser.structs import TreeCRF, common
from parser.structs.reference.tree import matrix_tree_log_partition
from parser.structs.tree import laplacian
from parser.structs.tree.elimination import log_partition_by_elimination
from tests.structs.brute import enumerate_distribution, heads_tensor

ROOTS = pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
LENGTHS = torch.tensor([4, 2, 3])  # padded: only the first sentence fills the tensor


def scores(seed: int, *, batch: int = 3, size: int = 4, scale: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(batch, size + 1, size + 1, generator=gen, dtype=torch.float64)
    return x.requires_grad_()


def test_the_graph_is_one_node_of_the_custom_functions():
    crf = TreeCRF(scores(0), LENGTHS)
    assert type(crf.log_partition.grad_fn).__name__ == "_LogPartitionBackward"
    assert type(crf.marginals.grad_fn).__name__ == "_MarginalsBackward"


@ROOTS
@pytest.mark.parametrize("lengths", [LENGTHS, torch.tensor([4, 4, 4])], ids=["padded", "full"])
def test_gradcheck_and_gradgradcheck_of_log_z(single_root, lengths):
    log_z = lambda s: TreeCRF(s, lengths, single_root=single_root).log_partition
    assert gradcheck(log_z, (scores(1),))
    assert gradgradcheck(log_z, (scores(2),))


@ROOTS
def test_third_order_through_the_marginals_backward(single_root):
    """GE's gradient of a gradient: the marginals' backward is differentiable itself."""
    weights = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    marginals = lambda s: (TreeCRF(s, LENGTHS, single_root=single_root).marginals * weights).sum()
    assert gradgradcheck(marginals, (scores(4),))


@ROOTS
def test_labeled_scores_keep_the_label_log_sum_exp_in_autograd(single_root):
    gen = torch.Generator().manual_seed(5)
    labeled = torch.randn(2, 4, 4, 3, generator=gen, dtype=torch.float64).requires_grad_()
    lengths = torch.tensor([3, 2])
    log_z = lambda s: TreeCRF(s, lengths, single_root=single_root).log_partition
    assert gradcheck(log_z, (labeled,))
    assert gradgradcheck(log_z, (labeled,))


@ROOTS
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # the reference's sign test
def test_hessian_vector_product_matches_a_plain_slogdet_reference(single_root):
    n = 6
    x = scores(6, batch=1, size=n).detach()
    v = torch.randn(1, n + 1, n + 1, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    reference = lambda s: matrix_tree_log_partition(s[0], n, single_root=single_root)
    _, expected = hvp(reference, x, v)
    s = x.clone().requires_grad_()
    mu = TreeCRF(s, torch.tensor([n]), single_root=single_root).marginals
    (got,) = torch.autograd.grad(mu, s, v)
    off = torch.zeros_like(got, dtype=torch.bool)
    off[:, 0] = True
    off[:, range(n + 1), range(n + 1)] = True
    torch.testing.assert_close(got, expected.masked_fill(off, 0.0), rtol=1e-9, atol=1e-11)


@ROOTS
def test_hessian_vector_product_is_the_brute_force_covariance(single_root):
    n = 4
    x = scores(8, batch=1, size=n, scale=2.0).detach()
    trees, log_weights, log_z = enumerate_distribution(x[0], n, single_root=single_root)
    probs = torch.exp(log_weights - log_z)
    indicators = torch.stack([
        torch.nn.functional.one_hot(heads_tensor(t, n + 1), n + 1).to(torch.float64) for t in trees
    ])  # [T, dep, head]; ROOT's row marks head 0, zeroed below
    indicators[:, 0] = 0.0
    flat = indicators.flatten(1)
    mean = probs @ flat
    covariance = (flat * probs[:, None]).T @ flat - torch.outer(mean, mean)
    v = torch.randn(1, n + 1, n + 1, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    s = x.clone().requires_grad_()
    mu = TreeCRF(s, torch.tensor([n]), single_root=single_root).marginals
    (got,) = torch.autograd.grad(mu, s, v)
    torch.testing.assert_close(got.flatten(), covariance @ v.flatten(), rtol=1e-9, atol=1e-11)


def _exact(s: torch.Tensor, lengths: torch.Tensor, single_root: bool, weights: torch.Tensor):
    """(log Z, marginals, d sum(marginals * weights) / ds) by autograd through elimination."""
    s = s.detach().clone().requires_grad_()
    log_z = log_partition_by_elimination(s, lengths, single_root=single_root)
    (mu,) = torch.autograd.grad(log_z.sum(), s, create_graph=True)
    (second,) = torch.autograd.grad((mu * weights).sum(), s)
    return log_z.detach(), mu.detach(), second


@ROOTS
@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_create_graph_marginals_and_their_gradient_are_exact(single_root, scale):
    """The GE path (marginals with create_graph) at a normal scale (LU) and at scores x 300,
    where the trust test sends sentences to the elimination path: same values and gradient as
    autograd through elimination, finite."""
    x = scores(10, batch=4, size=7, scale=scale).detach()
    lengths = torch.tensor([7, 5, 7, 3])
    weights = torch.randn(4, 8, 8, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    s = x.clone().requires_grad_()
    crf = TreeCRF(s, lengths, single_root=single_root)
    (mu,) = torch.autograd.grad(crf.log_partition.sum(), s, create_graph=True)
    (second,) = torch.autograd.grad((mu * weights).sum(), s)
    log_z, exact_mu, exact_second = _exact(x, lengths, single_root, weights)
    if scale > 1:
        assert not crf._factors.trusted.all()  # the fallback is exercised
    mask = crf.arc_mask
    torch.testing.assert_close(crf.log_partition.detach(), log_z, rtol=1e-10, atol=1e-8)
    torch.testing.assert_close(mu.detach(), exact_mu.masked_fill(~mask, 0.0), rtol=1e-7, atol=1e-9)
    assert torch.isfinite(second).all()
    torch.testing.assert_close(second, exact_second.masked_fill(~mask, 0.0), rtol=1e-6, atol=1e-8)
    # the values are the no-graph path's, bit for bit (within rounding of [0, 1] there too)
    assert torch.equal(crf.marginals.detach(), TreeCRF(x, lengths, single_root=single_root).marginals)
    assert crf.marginals.min() >= -1e-12 and crf.marginals.max() <= 1 + 1e-12


@ROOTS
def test_gradients_through_the_fallback_at_huge_scales(single_root):
    x = scores(12, batch=3, size=6, scale=300.0)
    lengths = torch.tensor([6, 6, 4])
    crf = TreeCRF(x, lengths, single_root=single_root)
    assert not crf._factors.trusted.all()
    entropy = crf.entropy()
    (grad,) = torch.autograd.grad(entropy.sum(), x)
    assert torch.isfinite(grad).all()
    # the reference: entropy = log Z - sum mu s, differentiated through elimination
    s = x.detach().clone().masked_fill(~crf.arc_mask, float("-inf")).requires_grad_()
    log_z = log_partition_by_elimination(s, lengths, single_root=single_root)
    (mu,) = torch.autograd.grad(log_z.sum(), s, create_graph=True)
    reference = log_z - (mu * torch.nan_to_num(s, neginf=0.0)).flatten(1).sum(-1)
    (expected,) = torch.autograd.grad(reference.sum(), s)
    torch.testing.assert_close(entropy.detach(), reference.detach(), rtol=1e-9, atol=1e-7)
    torch.testing.assert_close(grad, expected.masked_fill(~crf.arc_mask, 0.0), rtol=1e-6, atol=1e-6)


@ROOTS
def test_entropy_kl_cross_entropy_log_prob_gradients(single_root):
    p, q = scores(13), scores(14)
    crf = lambda s: TreeCRF(s, LENGTHS, single_root=single_root)
    heads = torch.tensor([[0, 2, 0, 2, 3], [0, 0, 1, 0, 0], [0, 3, 0, 2, 0]])
    if not single_root:
        heads[0, 4] = 0
    assert gradcheck(lambda s: crf(s).entropy(), (p,))
    assert gradcheck(lambda a, b: crf(a).kl(crf(b)), (p, q))
    assert gradcheck(lambda a, b: crf(a).cross_entropy(crf(b)), (p, q))
    assert gradcheck(lambda s: crf(s).log_prob(heads), (p,))
    assert gradgradcheck(lambda s: crf(s).entropy(), (p,))


def test_float32_training_path_matches_float64():
    x = scores(15, batch=5, size=9)
    lengths = torch.tensor([9, 8, 3, 9, 1])
    weights = torch.randn(5, 10, 10, generator=torch.Generator().manual_seed(16), dtype=torch.float64)
    grads = []
    for dtype in (torch.float64, torch.float32):
        s = x.detach().to(dtype).requires_grad_()
        crf = TreeCRF(s, lengths)
        assert crf.log_partition.dtype == dtype and crf.marginals.dtype == dtype
        total = crf.log_partition.sum() + (crf.marginals * weights.to(dtype)).sum() + crf.entropy().sum()
        grads.append(torch.autograd.grad(total, s)[0].to(torch.float64))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_graph_calls_after_inference_mode_calls(monkeypatch):
    """Constants cached by a first call under inference_mode are saved by a later graph (the
    third-order path and covariance build the LU with a graph): they must be normal tensors."""
    for cached in (common._tables, common.off_arc_penalty, laplacian._constants):
        cached.cache_clear()
    monkeypatch.setattr(common, "_MASK_STORAGE", {})
    monkeypatch.setattr(laplacian, "_STORAGE", {})
    with torch.inference_mode():
        for lengths in (LENGTHS, torch.tensor([4, 4, 4])):
            crf = TreeCRF(scores(17).detach(), lengths)
            crf.log_partition, crf.marginals, crf.entropy()
    for lengths in (LENGTHS, torch.tensor([4, 4, 4])):
        s = scores(18)
        mu = TreeCRF(s, lengths).marginals
        (hv,) = torch.autograd.grad((mu * scores(19).detach()).sum(), s, create_graph=True)
        features = scores(20, size=4).detach()[..., None].expand(-1, -1, -1, 2)
        total = hv.sum() + TreeCRF(s, lengths).covariance(features, features).sum()
        (grad,) = torch.autograd.grad(total, s)
        assert torch.isfinite(grad).all()
