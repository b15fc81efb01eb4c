"""The one-sentence fast path (numpy around two LAPACK calls, parser.structs.tree.one_sentence) against
the batched tensor path and the exact log-space elimination; and when TreeCRF takes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from parser.structs import TreeCRF
from parser.structs.tree import partition
from parser.structs.tree.elimination import log_partition_by_elimination
from parser.structs.tree.laplacian import matrix_tree
from parser.structs.tree.one_sentence import one_sentence_factors


def _masked(scores: torch.Tensor) -> torch.Tensor:
    return TreeCRF(scores, torch.tensor([scores.shape[1] - 1])).arc_scores.double()


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
@pytest.mark.parametrize("n", [1, 2, 9, 70])
def test_every_part_equals_the_tensor_path(single_root, n):
    gen = torch.Generator().manual_seed(n)
    scores = torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
    weights, solved, log_z, marginals, trusted, expected = one_sentence_factors(
        scores, single_root=single_root, tol=1e-9)
    reference = matrix_tree(_masked(scores), torch.tensor([n]), single_root=single_root, padded=False)
    assert trusted and reference.all_trusted
    for got, want in ((weights, reference.weight_rows), (solved, reference.solved), (log_z, reference.log_z),
                      (marginals, reference.marginal_rows), (expected, reference.expected)):
        assert got.shape == want.shape and got.dtype == torch.float64
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_float32_input_and_forbidden_arcs():
    gen = torch.Generator().manual_seed(1)
    scores = torch.randn(1, 8, 8, generator=gen)
    scores[0, 3, 5] = float("-inf")  # restrict-style forbidden arcs keep marginal 0
    scores[0, 4, :3] = float("-inf")
    crf = TreeCRF(scores, torch.tensor([7]))
    exact = log_partition_by_elimination(crf.arc_scores.double(), torch.tensor([7]), single_root=True)
    _, _, log_z, marginals, trusted, _ = one_sentence_factors(scores, single_root=True, tol=2e-8)
    assert trusted
    torch.testing.assert_close(log_z, exact, rtol=0, atol=1e-10)
    assert marginals[0, 2, 5] == 0 and (marginals[0, 3, :3] == 0).all()
    with torch.no_grad():
        assert crf.entropy().dtype == torch.float32


def test_no_tree_and_nan_are_untrusted_and_end_exact():
    scores = torch.zeros(1, 4, 4, dtype=torch.float64)
    scores[0, 1:, 0] = float("-inf")  # single root: no word may attach to ROOT
    *_, trusted, _ = one_sentence_factors(scores, single_root=True, tol=1e-9)
    assert not trusted
    with torch.no_grad():
        crf = TreeCRF(scores, torch.tensor([3]))
        assert crf.log_partition.item() == float("-inf")
        assert crf.marginals.abs().sum() == 0
    nan = torch.full((1, 4, 4), float("nan"), dtype=torch.float64)
    assert not one_sentence_factors(nan, single_root=True, tol=1e-9)[4]


@pytest.mark.parametrize("scale", [100.0, 1000.0])
def test_large_scores_fall_back_to_the_exact_path(scale):
    gen = torch.Generator().manual_seed(7)
    scores = scale * torch.randn(1, 41, 41, generator=gen)
    with torch.inference_mode():
        crf = TreeCRF(scores, torch.tensor([40]))
        log_z, marginals, entropy = crf.log_partition, crf.marginals, crf.entropy()
    exact = log_partition_by_elimination(crf.arc_scores.double(), torch.tensor([40]), single_root=True)
    torch.testing.assert_close(log_z.double(), exact, rtol=1e-7, atol=1e-4)
    sums = marginals[0, 1:].sum(-1)
    assert ((marginals >= 0) & (marginals <= 1 + 1e-6)).all() and ((sums - 1).abs() <= 1e-6).all()
    assert entropy.item() >= -1e-6


def test_taken_only_for_one_unpadded_cpu_sentence(monkeypatch):
    calls = []

    def spy(*args, **kwargs):
        calls.append(1)
        return one_sentence_factors(*args, **kwargs)

    monkeypatch.setattr(partition, "one_sentence_factors", spy)
    gen = torch.Generator().manual_seed(2)
    scores = torch.randn(1, 6, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    TreeCRF(scores.detach()[:, :5, :5].expand(2, 5, 5), torch.tensor([4, 4])).entropy()  # B = 2
    TreeCRF(scores.detach(), torch.tensor([3])).entropy()  # padded
    assert calls == []
    with torch.no_grad():
        one = TreeCRF(scores, torch.tensor([5])).entropy()
    assert calls == [1]
    torch.testing.assert_close(one, TreeCRF(scores.detach(), torch.tensor([5])).entropy())
    # With a graph the forward is the detached twin's no-graph route (parser.structs.tree.autograd)
    TreeCRF(scores, torch.tensor([5])).entropy().sum().backward()
    assert len(calls) == 3  # (the reference above took it too)
    labeled = torch.randn(1, 6, 6, 3, generator=gen, dtype=torch.float64)
    with torch.no_grad():  # labeled: the arc scores take the path, same result as a batch of two
        one = TreeCRF(labeled, torch.tensor([5])).entropy()
        two = TreeCRF(labeled.expand(2, 6, 6, 3), torch.tensor([5, 5])).entropy()
    assert len(calls) == 4
    torch.testing.assert_close(one.expand(2), two, rtol=1e-12, atol=1e-12)


def test_the_public_numpy_functions_give_the_same_factors(monkeypatch):
    """The path calls numpy's LAPACK gufuncs directly where numpy has them; the fallback (the
    public np.linalg functions) gives the same numbers."""
    from parser.structs.tree import one_sentence

    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(1, 15, 15, generator=gen, dtype=torch.float64)
    direct = one_sentence_factors(scores, single_root=True, tol=1e-9)
    monkeypatch.setattr(one_sentence, "_slogdet", np.linalg.slogdet)
    monkeypatch.setattr(one_sentence, "_solve", np.linalg.solve)
    public = one_sentence_factors(scores, single_root=True, tol=1e-9)
    assert direct[4] is public[4] is True
    for a, b in zip(direct[:4] + direct[5:], public[:4] + public[5:]):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-14)


def test_underflowing_root_weights_make_a_singular_laplacian_and_take_the_exact_path():
    scores = torch.zeros(1, 5, 5, dtype=torch.float64)
    scores[0, 1:, 0] = -1000.0  # exp(-1000) = 0: no root arc survives the shift
    assert not one_sentence_factors(scores, single_root=True, tol=1e-9)[4]
    with torch.no_grad():
        crf = TreeCRF(scores, torch.tensor([4]))
        # 4 choices of root word, 4^2 = 16 trees below it (Cayley: n^(n-2) per root), all of score -1000
        torch.testing.assert_close(crf.log_partition, torch.tensor([-1000.0 + np.log(4 * 16)], dtype=torch.float64))
        torch.testing.assert_close(crf.marginals[0, 1:, 0], torch.full((4,), 0.25, dtype=torch.float64))
