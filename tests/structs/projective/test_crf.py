"""The projective tree CRF against brute-force enumeration of projective trees (log Z, marginals,
entropy, log-probabilities), for padding invariance and for gradients (gradcheck in float64, the
marginals' own gradient included)."""

from __future__ import annotations

import pytest
import torch

from parser.structs import ProjectiveTreeCRF, TreeCRF, is_projective
from tests.structs.brute import tree_log_weights
from tests.structs.projective.test_eisner import is_projective as brute_is_projective
from tests.structs.projective.test_eisner import projective_trees


def brute(scores: torch.Tensor, n: int, *, single_root: bool):
    """``(trees [T, n], log_z, marginals [n+1, n+1])`` over the projective trees of one sentence."""
    trees = projective_trees(n, single_root)
    log_weights = tree_log_weights(scores, n, [tuple(t) for t in trees.tolist()])
    log_z = torch.logsumexp(log_weights, 0)
    probs = torch.exp(log_weights - log_z)
    marginals = torch.zeros(n + 1, n + 1, dtype=torch.float64)
    for tree, p in zip(trees.tolist(), probs):
        marginals[torch.arange(1, n + 1), torch.tensor(tree)] += p
    possible = probs > 0
    entropy = -(probs[possible] * (log_weights - log_z)[possible]).sum()
    return trees, log_weights - log_z, log_z, marginals, entropy


@pytest.mark.parametrize("single_root", [False, True])
def test_matches_brute_force(single_root):
    gen = torch.Generator().manual_seed(6)
    for n in range(1, 7):
        scores = 2 * torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
        if n > 2:
            scores[0, 2, 1] = float("-inf")  # a forbidden arc
        crf = ProjectiveTreeCRF(scores, torch.tensor([n]), single_root=single_root)
        trees, log_probs, log_z, marginals, entropy = brute(scores[0], n, single_root=single_root)
        torch.testing.assert_close(crf.log_partition[0], log_z)
        torch.testing.assert_close(crf.arc_marginals[0], marginals, rtol=0, atol=1e-10)
        torch.testing.assert_close(crf.entropy()[0], entropy)
        pick = int(torch.randint(len(trees), (1,), generator=gen))
        heads = torch.cat([torch.zeros(1, dtype=torch.long), trees[pick]])[None]
        torch.testing.assert_close(crf.log_prob(heads)[0], log_probs[pick])
        best = crf.argmax()[0, 1:]
        assert torch.equal(best, trees[int(log_probs.argmax())])


def test_non_projective_or_multi_rooted_trees_have_probability_zero():
    scores = torch.zeros(1, 5, 5, dtype=torch.float64)
    crf = ProjectiveTreeCRF(scores, torch.tensor([4]))
    crossing = torch.tensor([[0, 3, 4, 0, 3]])  # 1 <- 3 and 2 <- 4 cross
    two_roots = torch.tensor([[0, 0, 1, 0, 3]])
    assert torch.isneginf(crf.log_prob(crossing)).all() and torch.isneginf(crf.log_prob(two_roots)).all()
    assert torch.isfinite(ProjectiveTreeCRF(scores, torch.tensor([4]), single_root=False).log_prob(two_roots)).all()


def test_is_projective_agrees_with_the_descendant_definition():
    gen = torch.Generator().manual_seed(1)
    from tests.structs.brute import all_trees

    n = 5
    trees = all_trees(n, single_root=False)
    picked = [trees[i] for i in torch.randperm(len(trees), generator=gen)[:400].tolist()]
    heads = torch.tensor([[0, *t, 0] for t in picked])  # one padding column
    got = is_projective(heads, torch.full((len(picked),), n))
    assert got.tolist() == [brute_is_projective(t) for t in picked]
    assert 0 < int(got.sum()) < len(picked)


def test_padding_invariance():
    gen = torch.Generator().manual_seed(3)
    lengths = torch.tensor([6, 2, 9, 1])
    scores = torch.randn(4, 10, 10, generator=gen, dtype=torch.float64)
    for single_root in (False, True):
        crf = ProjectiveTreeCRF(scores, lengths, single_root=single_root)
        for b, n in enumerate(lengths.tolist()):
            alone = ProjectiveTreeCRF(scores[b : b + 1, : n + 1, : n + 1], lengths[b : b + 1], single_root=single_root)
            torch.testing.assert_close(crf.log_partition[b], alone.log_partition[0])
            torch.testing.assert_close(crf.arc_marginals[b, : n + 1, : n + 1], alone.arc_marginals[0], rtol=0, atol=1e-12)
            assert (crf.arc_marginals[b, n + 1 :] == 0).all() and (crf.arc_marginals[b, :, n + 1 :] == 0).all()


@pytest.mark.parametrize("single_root", [False, True])
def test_gradcheck_log_z_and_marginals(single_root):
    gen = torch.Generator().manual_seed(12)
    lengths = torch.tensor([4, 3])
    scores = torch.randn(2, 5, 5, generator=gen, dtype=torch.float64).requires_grad_()
    weights = torch.randn(2, 5, 5, generator=gen, dtype=torch.float64)

    def log_z(s):
        return ProjectiveTreeCRF(s, lengths, single_root=single_root).log_partition

    def expectation(s):  # what GE differentiates: a first-order expectation
        return (ProjectiveTreeCRF(s, lengths, single_root=single_root).arc_marginals * weights).sum()

    assert torch.autograd.gradcheck(log_z, (scores,))
    assert torch.autograd.gradcheck(expectation, (scores,))
    assert torch.autograd.gradcheck(lambda s: ProjectiveTreeCRF(s, lengths).entropy(), (scores,))


def test_rejects_labeled_scores():
    with pytest.raises(ValueError, match="unlabeled"):
        ProjectiveTreeCRF(torch.zeros(1, 3, 3, 2), torch.tensor([2]))


@pytest.mark.parametrize("single_root", [False, True])
def test_kl_matches_brute_force(single_root):
    gen = torch.Generator().manual_seed(8)
    for n in range(1, 7):
        p_scores = 2 * torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
        q_scores = 2 * torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
        p = ProjectiveTreeCRF(p_scores, torch.tensor([n]), single_root=single_root)
        q = ProjectiveTreeCRF(q_scores, torch.tensor([n]), single_root=single_root)
        _, log_p, *_ = brute(p_scores[0], n, single_root=single_root)
        _, log_q, *_ = brute(q_scores[0], n, single_root=single_root)
        torch.testing.assert_close(p.kl(q)[0], (log_p.exp() * (log_p - log_q)).sum())
        assert p.kl(p)[0] == 0


def test_kl_is_inf_where_other_forbids_a_tree_self_allows():
    scores = torch.zeros(1, 4, 4, dtype=torch.float64)
    forbidding = scores.clone()
    forbidding[0, 2, 1] = float("-inf")  # word 2 may not attach to word 1
    free = ProjectiveTreeCRF(scores, torch.tensor([3]))
    strict = ProjectiveTreeCRF(forbidding, torch.tensor([3]))
    assert torch.isinf(free.kl(strict)).all() and torch.isfinite(strict.kl(free)).all()
    _, log_p, *_ = brute(forbidding[0], 3, single_root=True)
    _, log_q, *_ = brute(scores[0], 3, single_root=True)
    kept = torch.isfinite(log_p)
    torch.testing.assert_close(strict.kl(free)[0], (log_p[kept].exp() * (log_p - log_q)[kept]).sum())


def test_kl_padding_invariance_and_gradcheck():
    gen = torch.Generator().manual_seed(4)
    lengths = torch.tensor([5, 2, 3])
    p_scores = torch.randn(3, 6, 6, generator=gen, dtype=torch.float64)
    q_scores = torch.randn(3, 6, 6, generator=gen, dtype=torch.float64)
    batched = ProjectiveTreeCRF(p_scores, lengths).kl(ProjectiveTreeCRF(q_scores, lengths))
    for b, n in enumerate(lengths.tolist()):
        alone = [ProjectiveTreeCRF(s[b : b + 1, : n + 1, : n + 1], lengths[b : b + 1]) for s in (p_scores, q_scores)]
        torch.testing.assert_close(batched[b], alone[0].kl(alone[1])[0])
    small = torch.tensor([3, 2])
    p_in = p_scores[:2, :4, :4].clone().requires_grad_()
    q_in = q_scores[:2, :4, :4].clone().requires_grad_()

    def kl(p, q):
        return ProjectiveTreeCRF(p, small).kl(ProjectiveTreeCRF(q, small))

    assert torch.autograd.gradcheck(kl, (p_in, q_in))


def test_kl_refuses_another_distribution():
    scores = torch.zeros(1, 3, 3)
    with pytest.raises(ValueError, match="expected a ProjectiveTreeCRF, got TreeCRF"):
        ProjectiveTreeCRF(scores, torch.tensor([2])).kl(TreeCRF(scores, torch.tensor([2])))
