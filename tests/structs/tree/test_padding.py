"""Padding invariance, restrict (partial annotation, constraints), input validation, and the
delegation of argmax/sample to parser.structs.decoding.mst / parser.structs.tree.sampling."""

from __future__ import annotations

import pytest
import torch

from parser.structs import TreeCRF
from tests.structs.brute import enumerate_distribution

LENGTHS = torch.tensor([6, 2, 4, 1])


def scores(seed: int, *, size: int = 6, labels: int | None = None) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    shape = (len(LENGTHS), size + 1, size + 1) + ((labels,) if labels else ())
    return 3 * torch.randn(*shape, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_batched_equals_one_at_a_time(single_root):
    s, other = scores(0), scores(1)
    crf = TreeCRF(s, LENGTHS, single_root=single_root)
    q = TreeCRF(other, LENGTHS, single_root=single_root)
    first = torch.randn(*s.shape, 2, dtype=torch.float64)
    # garbage in padding must not matter
    noisy = s.clone()
    for b, n in enumerate(LENGTHS.tolist()):
        noisy[b, n + 1 :] = 1e4
        noisy[b, :, n + 1 :] = -1e4
        noisy[b, 0] = 7.0
    torch.testing.assert_close(TreeCRF(noisy, LENGTHS, single_root=single_root).marginals,
                               crf.marginals, atol=1e-12, rtol=0)
    for b, n in enumerate(LENGTHS.tolist()):
        one = TreeCRF(s[b : b + 1, : n + 1, : n + 1], LENGTHS[b : b + 1], single_root=single_root)
        q_one = TreeCRF(other[b : b + 1, : n + 1, : n + 1], LENGTHS[b : b + 1], single_root=single_root)
        for batched, alone in [
            (crf.log_partition[b], one.log_partition[0]),
            (crf.marginals[b, : n + 1, : n + 1], one.marginals[0]),
            (crf.entropy()[b], one.entropy()[0]),
            (crf.kl(q)[b], one.kl(q_one)[0]),
            (crf.expect(first)[b], one.expect(first[b : b + 1, : n + 1, : n + 1])[0]),
            (crf.covariance(first, first)[b],
             one.covariance(first[b : b + 1, : n + 1, : n + 1], first[b : b + 1, : n + 1, : n + 1])[0]),
        ]:
            torch.testing.assert_close(batched, alone, atol=1e-10, rtol=0)


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_restrict_partial_annotation_and_empty(single_root):
    s = scores(2)
    crf = TreeCRF(s, LENGTHS, single_root=single_root)
    allowed = torch.ones(s.shape, dtype=torch.bool)
    allowed[0, 2] = False
    allowed[0, 2, 3] = True  # word 2 of sentence 0 is annotated with head 3; the rest free
    allowed[2, 1:, 1:] = False  # sentence 2: only ROOT heads allowed
    sub = crf.restrict(allowed)
    trees, log_w, _ = enumerate_distribution(s[0], 6, single_root=single_root)
    keep = torch.tensor([t[1] == 3 for t in trees])
    assert sub.log_partition[0].item() == pytest.approx(torch.logsumexp(log_w[keep], 0).item(), abs=1e-10)
    assert sub.marginals[0, 2, 3].item() == pytest.approx(1.0, abs=1e-12)
    if single_root:  # four words all on ROOT: no single-root tree; others unaffected, no NaN
        assert sub.log_partition[2].item() == float("-inf")
        assert (sub.marginals[2] == 0).all()
    else:
        assert sub.log_partition[2].item() == pytest.approx(s[2, 1:5, 0].sum().item(), abs=1e-10)
    assert torch.isfinite(sub.marginals).all() and torch.isfinite(sub.entropy()[[0, 1, 3]]).all()
    torch.testing.assert_close(sub.log_partition[[1, 3]], crf.log_partition[[1, 3]])
    # a word with no allowed head at all
    none = allowed.clone()
    none[1, 2] = False
    dead = crf.restrict(none)
    assert dead.log_partition[1].item() == float("-inf") and (dead.marginals[1] == 0).all()
    # KL to a restricted distribution that forbids trees p uses is +inf
    assert crf.kl(sub)[0].item() == float("inf")


def test_validation_errors():
    s = scores(3)
    with pytest.raises(ValueError, match="lengths"):
        TreeCRF(s, torch.tensor([7, 1, 1, 1]))
    with pytest.raises(ValueError, match="scores"):
        TreeCRF(s[:, :, :4], LENGTHS)
    bad = s.clone()
    bad[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"scores\[0, 1, 2\]"):
        TreeCRF(bad, LENGTHS)
    crf = TreeCRF(s, LENGTHS)
    heads = torch.zeros(4, 7, dtype=torch.long)
    heads[1, 2] = 5
    with pytest.raises(ValueError, match=r"heads\[1, 2\] = 5"):
        crf.log_prob(heads)
    heads[1, 2] = -1
    with pytest.raises(ValueError, match="restrict"):
        crf.log_prob(heads)
    with pytest.raises(ValueError, match="allowed"):
        crf.restrict(torch.ones(4, 7, 7))
    with pytest.raises(ValueError, match="arc_index"):
        crf.expect_sparse(torch.tensor([[4, 1, 0]]), torch.tensor([0]), torch.tensor([1.0]), 1)
    with pytest.raises(ValueError, match="alpha"):
        crf.renyi_entropy(0.0)
    original = s.clone()
    crf.restrict(torch.zeros(s.shape, dtype=torch.bool)).entropy()
    assert torch.equal(s, original)  # caller's tensor untouched


def test_distribution_interface_and_labeled_shapes():
    crf = TreeCRF(scores(4, labels=3).float(), LENGTHS, single_root=True)
    assert isinstance(crf, torch.distributions.Distribution)
    assert crf.labeled and crf.single_root and crf.scores.shape[-1] == 3
    assert crf.batch_shape == (4,) and crf.event_shape == (7,)
    assert crf.log_partition.dtype == torch.float32 and crf.marginals.shape == (4, 7, 7, 3)
    assert crf.arc_marginals.shape == (4, 7, 7)


def test_argmax_and_sample_delegate():
    """argmax is the tree with the best log_prob (brute force); samples are valid trees with the
    labels of their arcs (the samplers' statistics are tested with parser.structs.tree.sampling)."""
    pytest.importorskip("parser.structs.decoding.mst")
    s = scores(5, labels=2)
    for single_root in (True, False):
        crf = TreeCRF(s, LENGTHS, single_root=single_root)
        heads, labels = crf.argmax()
        best = s.max(-1)
        for b, n in enumerate(LENGTHS.tolist()):
            trees, log_w, _ = enumerate_distribution(best.values[b], n, single_root=single_root)
            assert tuple(heads[b, 1 : n + 1].tolist()) == trees[int(log_w.argmax())]
            picked = best.indices[b, torch.arange(1, n + 1), heads[b, 1 : n + 1]]
            assert torch.equal(labels[b, 1 : n + 1], picked)
        assert (crf.log_prob(heads, labels) <= 0).all()
    pytest.importorskip("parser.structs.tree.sampling")
    crf = TreeCRF(s, LENGTHS, single_root=True)
    heads, labels = crf.sample(5, generator=torch.Generator().manual_seed(0))
    assert heads.shape == labels.shape == (5, 4, 7)
    for draw in range(5):
        assert torch.isfinite(crf.log_prob(heads[draw], labels[draw])).all()
        real = torch.arange(7)[None, :] <= LENGTHS[:, None]
        assert (((heads[draw] == 0) & real)[:, 1:].sum(-1) == 1).all()
