"""The tree CRFs' promises at every finite score scale (issue 18): log-probabilities <= 0, entropy
and KL >= 0, marginals in [0, 1] with word rows summing to 1, finite log Z, the argmax equal to
brute force; entries documented as ignored (row 0, the diagonal, padding) ignored even when NaN;
an empty batch gives empty results."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from parser.structs import (
    ProjectiveTreeCRF,
    TreeCRF,
    eisner,
    maximum_spanning_tree,
    sample_trees,
)
from parser.structs.projective import is_projective
from tests.structs.brute import all_trees, is_tree

EPS64 = torch.finfo(torch.float64).eps
SCALES = [1.0, 1e3, 1e6, 1e10, 1e20, 1e100, 1e300, 1e307]
LENGTHS = [5, 3, 1, 4]  # padded batch, N = 5 (brute force stays cheap)
SIZE = max(LENGTHS) + 1


@functools.cache
def trees_tensor(n: int, single_root: bool) -> torch.Tensor:
    return torch.tensor(all_trees(n, single_root=single_root), dtype=torch.long)


def batch(scale: float, kind: str, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """``[B, N+1, N+1]``: ``randn * scale`` or constant ``+-scale`` (many ties)."""
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(len(LENGTHS), SIZE, SIZE, generator=generator, dtype=torch.float64)
    if kind == "constant":
        noise = torch.where(noise > 0, 1.0, -1.0).double()
    elif scale == 1e307:  # randn * 1e307: keep |score| < 3.5e307, so that every tree's score is finite
        noise = noise.clamp(-3.5, 3.5)
    return (noise * scale).to(dtype)


def cases():
    for scale in SCALES:
        for dtype in (torch.float32, torch.float64):
            if dtype == torch.float32 and scale * 4 >= torch.finfo(torch.float32).max / 8:
                continue  # not finite in float32 (or log Z beyond its range)
            for kind in ("random", "constant"):
                if kind == "constant" and scale == 1e307:
                    continue
                for single_root in (True, False):
                    yield pytest.param(scale, dtype, kind, single_root,
                                       id=f"{scale:g}-{str(dtype)[6:]}-{kind}-{'single' if single_root else 'multi'}")


def brute(scores: torch.Tensor, n: int, single_root: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(trees [T, n], tree scores [T] float64)`` of one sentence."""
    trees = trees_tensor(n, single_root)
    return trees, scores.double()[torch.arange(1, n + 1), trees].sum(-1)


def check_tree(heads: torch.Tensor, n: int, single_root: bool) -> None:
    words = heads[1 : n + 1]
    trees = trees_tensor(n, single_root)
    assert bool((trees == words).all(-1).any()), heads.tolist()
    assert (heads[n + 1 :] == 0).all() and heads[0] == 0


@pytest.mark.parametrize(("scale", "dtype", "kind", "single_root"), list(cases()))
def test_tree_crf_promises_at_every_scale(scale, dtype, kind, single_root):
    lengths = torch.tensor(LENGTHS)
    scores = batch(scale, kind, dtype, seed=int(math.log10(scale)) + 7 * single_root)
    other = batch(scale, "random", dtype, seed=99)
    dist = TreeCRF(scores, lengths, single_root=single_root)
    words = torch.arange(SIZE)[None, :].ge(1) & torch.arange(SIZE)[None, :].le(lengths[:, None])

    log_z = dist.log_partition
    assert log_z.dtype == dtype and torch.isfinite(log_z).all(), log_z
    marginals = dist.marginals
    assert marginals.dtype == dtype
    assert (marginals >= 0).all() and (marginals <= 1).all()
    rows = marginals.double().sum(-1)
    tol = 1e-5 if dtype == torch.float32 else 1e-9
    assert torch.allclose(rows[words], torch.ones(()).double(), atol=tol, rtol=0), rows
    assert (marginals[~words] == 0).all()
    assert (dist.entropy() >= 0).all(), dist.entropy()
    kl = dist.kl(TreeCRF(other, lengths, single_root=single_root))
    assert (kl >= 0).all() and not torch.isnan(kl).any(), kl
    assert (dist.kl(dist) >= 0).all()

    heads = dist.argmax()
    best_prob = dist.log_prob(heads)
    assert (best_prob <= 0).all() and torch.isfinite(best_prob).all(), best_prob
    samples = dist.sample(3, generator=torch.Generator().manual_seed(0))
    for sample in samples:
        prob = dist.log_prob(sample)
        assert (prob <= 0).all() and not torch.isnan(prob).any(), prob

    for b, n in enumerate(LENGTHS):
        check_tree(heads[b], n, single_root)
        for sample in samples:
            check_tree(sample[b], n, single_root)
        trees, totals = brute(scores[b], n, single_root)
        # The argmax works in float64: its rounding is a few ulps of the largest sums it forms
        # (the single-root penalty is ~2 N times the scores' spread).
        magnitude = float(scores[b].double()[1 : n + 1, : n + 1].abs().max())
        resolution = 64 * (n + 1) ** 2 * EPS64 * magnitude
        best = float(totals.max())
        found = float(scores[b].double()[torch.arange(1, n + 1), heads[b, 1 : n + 1]].sum())
        assert found >= best - resolution, (found, best)
        runner_up = totals.sort(descending=True).values[1] if len(totals) > 1 else -math.inf
        if best - float(runner_up) > resolution:  # unique within float resolution
            assert trees[totals.argmax()].tolist() == heads[b, 1 : n + 1].tolist()
        exact = float(torch.logsumexp(totals, 0))
        assert abs(float(log_z[b]) - exact) <= 1e-6 * max(1.0, abs(exact)) + resolution, (float(log_z[b]), exact)


@pytest.mark.parametrize(("scale", "dtype", "kind", "single_root"),
                         [c for c in cases() if c.values[0] in (1.0, 1e6, 1e20, 1e300, 1e307)])
def test_projective_crf_promises_at_every_scale(scale, dtype, kind, single_root):
    lengths = torch.tensor(LENGTHS)
    scores = batch(scale, kind, dtype, seed=3)
    dist = ProjectiveTreeCRF(scores, lengths, single_root=single_root)
    assert torch.isfinite(dist.log_partition).all(), dist.log_partition
    marginals = dist.marginals
    assert (marginals >= 0).all() and (marginals <= 1).all()
    assert (dist.entropy() >= 0).all(), dist.entropy()
    heads = dist.argmax()
    assert is_projective(heads, lengths).all()
    prob = dist.log_prob(heads)
    assert (prob <= 0).all() and torch.isfinite(prob).all(), prob
    assert torch.equal(heads, eisner(scores, lengths, single_root=single_root))


def test_huge_log_z_is_an_error_not_inf():
    """log Z beyond float64's range (30 words of scores ~1e307) is a ValueError, not a silent inf."""
    scores = torch.randn(2, 31, 31, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1e307
    dist = TreeCRF(scores, torch.tensor([30, 30]))
    with pytest.raises(ValueError, match="log Z"):
        dist.log_partition  # noqa: B018


# ----------------------------------------------------------------- NaN in ignored entries
def ignored_mask(lengths: torch.Tensor, size: int) -> torch.Tensor:
    positions = torch.arange(size)
    real = (positions[None, :, None] >= 1) & (positions[None, :, None] <= lengths[:, None, None])
    real = real & (positions[None, None, :] <= lengths[:, None, None]) & (positions[:, None] != positions[None, :])
    return ~real


@pytest.mark.parametrize("labeled", [False, True])
@pytest.mark.parametrize("single_root", [True, False])
def test_nan_in_ignored_entries_is_ignored(labeled, single_root):
    lengths = torch.tensor([4, 2, 4])
    size = 5
    generator = torch.Generator().manual_seed(1)
    shape = (3, size, size, 2) if labeled else (3, size, size)
    scores = torch.randn(*shape, generator=generator, dtype=torch.float64)
    ignored = ignored_mask(lengths, size)
    ignored = ignored[..., None].expand(shape) if labeled else ignored
    zeros, nans = scores.masked_fill(ignored, 0.0), scores.masked_fill(ignored, math.nan)
    clean = TreeCRF(zeros, lengths, single_root=single_root)
    dirty = TreeCRF(nans, lengths, single_root=single_root)
    assert torch.equal(clean.log_partition, dirty.log_partition)
    assert torch.equal(clean.marginals, dirty.marginals)
    assert torch.equal(clean.entropy(), dirty.entropy())
    assert torch.equal(clean.kl(clean), dirty.kl(dirty))
    best = clean.argmax()
    if labeled:
        assert all(torch.equal(a, b) for a, b in zip(best, dirty.argmax()))
        assert torch.equal(clean.log_prob(*best), dirty.log_prob(*best))
    else:
        assert torch.equal(best, dirty.argmax())
        assert torch.equal(clean.log_prob(best), dirty.log_prob(best))
    first = clean.sample(2, generator=torch.Generator().manual_seed(5))
    second = dirty.sample(2, generator=torch.Generator().manual_seed(5))
    assert all(torch.equal(a, b) for a, b in zip(first, second)) if labeled else torch.equal(first, second)
    if not labeled:
        keep = torch.ones(3, size, size, dtype=torch.bool)
        assert torch.equal(clean.restrict(keep).log_partition, dirty.restrict(keep).log_partition)
        for decode in (maximum_spanning_tree, eisner):
            assert torch.equal(decode(zeros, lengths, single_root=single_root),
                               decode(nans, lengths, single_root=single_root))
        projective = ProjectiveTreeCRF(zeros, lengths, single_root=single_root)
        projective_nan = ProjectiveTreeCRF(nans, lengths, single_root=single_root)
        assert torch.equal(projective.log_partition, projective_nan.log_partition)
        assert torch.equal(projective.marginals, projective_nan.marginals)
        assert torch.equal(sample_trees(zeros, lengths, single_root=single_root, n=2,
                                        generator=torch.Generator().manual_seed(3)),
                           sample_trees(nans, lengths, single_root=single_root, n=2,
                                        generator=torch.Generator().manual_seed(3)))


def test_nan_on_a_real_arc_is_still_an_error():
    scores = torch.zeros(1, 4, 4)
    scores[0, 2, 3] = math.nan
    with pytest.raises(ValueError, match=r"scores\[0, 2, 3\]"):
        TreeCRF(scores, torch.tensor([3]))


# ----------------------------------------------------------------- the empty batch
@pytest.mark.parametrize("labeled", [False, True])
def test_empty_batch_gives_empty_results(labeled):
    shape = (0, 4, 4, 3) if labeled else (0, 4, 4)
    scores, lengths = torch.zeros(shape), torch.zeros(0, dtype=torch.long)
    dist = TreeCRF(scores, lengths)
    assert dist.log_partition.shape == (0,)
    assert dist.marginals.shape == shape
    assert dist.arc_marginals.shape == (0, 4, 4)
    assert dist.entropy().shape == (0,) and dist.kl(dist).shape == (0,)
    assert dist.cross_entropy(dist).shape == (0,)
    heads = torch.zeros(0, 4, dtype=torch.long)
    if labeled:
        best, labels = dist.argmax()
        assert best.shape == labels.shape == (0, 4)
        assert dist.log_prob(heads, heads).shape == (0,)
        sampled, sampled_labels = dist.sample(2)
        assert sampled.shape == sampled_labels.shape == (2, 0, 4)
    else:
        assert dist.argmax().shape == (0, 4) and dist.argmax(projective=True).shape == (0, 4)
        assert dist.log_prob(heads).shape == (0,)
        assert dist.sample(2).shape == (2, 0, 4)
        assert dist.restrict(torch.zeros(0, 4, 4, dtype=torch.bool)).log_partition.shape == (0,)
        assert dist.covariance(torch.zeros(0, 4, 4, 2), torch.zeros(0, 4, 4, 1)).shape == (0, 2, 1)
    projective = ProjectiveTreeCRF(torch.zeros(0, 4, 4), lengths)
    assert projective.log_partition.shape == (0,) and projective.marginals.shape == (0, 4, 4)
    assert projective.entropy().shape == (0,) and projective.argmax().shape == (0, 4)
    assert projective.log_prob(heads).shape == (0,)
    assert maximum_spanning_tree(torch.zeros(0, 4, 4), lengths, single_root=True).shape == (0, 4)
    assert eisner(torch.zeros(0, 4, 4), lengths, single_root=True).shape == (0, 4)
    assert sample_trees(torch.zeros(0, 4, 4), lengths, single_root=True, n=2).shape == (2, 0, 4)


@pytest.mark.parametrize("value", [1e20, -1e20, 1e300, -1.7e308])
@pytest.mark.parametrize("single_root", [True, False])
def test_argmax_of_constant_scores_is_a_tree(value, single_root):
    """Every tree ties; ``value - 1`` (the single-root penalty, unscaled) rounds back to ``value``."""
    lengths = torch.tensor([29, 12])
    heads = TreeCRF(torch.full((2, 30, 30), value, dtype=torch.float64), lengths,
                    single_root=single_root).argmax()
    for b, n in enumerate(lengths.tolist()):
        words = tuple(heads[b, 1 : n + 1].tolist())
        assert is_tree(words) and (heads[b, n + 1 :] == 0).all()
        assert not single_root or sum(h == 0 for h in words) == 1
