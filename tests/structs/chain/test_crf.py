"""LinearChainCRF against brute-force enumeration of tag sequences (T <= 4, S <= 3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from parser.structs import LinearChainCRF
from parser.structs.chain import crf
from parser.structs.chain.crf import clean_scores
from parser.structs.decoding import native
from parser.tokenize.model import CharTagger
from tests.structs.brute_chain import brute_kl, brute_quantities, enumerate_chain

LENGTHS = torch.tensor([4, 1, 3, 2])


def random_scores(
    seed: int, *, batch: int = 4, positions: int = 4, states: int = 3, scale: float = 1.5
):
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(
        batch, positions, states, states, generator=generator, dtype=torch.float64
    )


@pytest.mark.parametrize("states", [1, 2, 3])
def test_log_partition_marginals_entropy_match_brute_force(states):
    scores = random_scores(0, states=states)
    dist = LinearChainCRF(scores, LENGTHS)
    for b, n in enumerate(LENGTHS.tolist()):
        brute = brute_quantities(scores[b], n)
        torch.testing.assert_close(dist.log_partition[b], brute["log_z"], rtol=0, atol=1e-10)
        torch.testing.assert_close(dist.marginals[b], brute["marginals"], rtol=0, atol=1e-10)
        torch.testing.assert_close(
            dist.unary_marginals[b], brute["marginals"].sum(-2), rtol=0, atol=1e-10
        )
        torch.testing.assert_close(dist.entropy()[b], brute["entropy"], rtol=0, atol=1e-10)


def test_marginals_are_exactly_zero_off_the_counted_entries():
    dist = LinearChainCRF(random_scores(1), LENGTHS)
    assert (dist.marginals[~dist.mask] == 0).all()
    assert (dist.marginals[:, 0, 1:] == 0).all()  # only the start row at position 0
    assert (dist.unary_marginals[1, 1:] == 0).all() and (dist.unary_marginals[3, 2:] == 0).all()
    torch.testing.assert_close(
        dist.unary_marginals.sum(-1), (torch.arange(4) < LENGTHS[:, None]).double()
    )


def test_log_prob_matches_enumeration_and_ignores_padding():
    scores = random_scores(2)
    dist = LinearChainCRF(scores, LENGTHS)
    for b, n in enumerate(LENGTHS.tolist()):
        seqs, _, log_weights, log_z = enumerate_chain(scores[b], n)
        tags = torch.full((len(seqs), 4, 4), -1, dtype=torch.long)  # -1 padding must be ignored
        tags[:, b, :n] = torch.tensor(seqs)
        tags[:, [x for x in range(4) if x != b]] = 0
        torch.testing.assert_close(
            dist.log_prob(tags)[:, b], log_weights - log_z, rtol=0, atol=1e-10
        )


def test_kl_and_cross_entropy_match_brute_force():
    p_scores, q_scores = random_scores(3), random_scores(4)
    p, q = LinearChainCRF(p_scores, LENGTHS), LinearChainCRF(q_scores, LENGTHS)
    kl = p.kl(q)
    torch.testing.assert_close(torch.distributions.kl_divergence(p, q), kl)
    for b, n in enumerate(LENGTHS.tolist()):
        torch.testing.assert_close(kl[b], brute_kl(p_scores[b], q_scores[b], n), rtol=0, atol=1e-10)
    torch.testing.assert_close(p.cross_entropy(q), p.entropy() + kl, rtol=0, atol=1e-10)
    assert p.kl(p).abs().max() < 1e-12


def test_argmax_is_the_best_enumerated_sequence():
    scores = random_scores(5)
    tags = LinearChainCRF(scores, LENGTHS).argmax()
    for b, n in enumerate(LENGTHS.tolist()):
        seqs, _, log_weights, _ = enumerate_chain(scores[b], n)
        assert tuple(tags[b, :n].tolist()) == seqs[int(log_weights.argmax())]
        assert (tags[b, n:] == 0).all()


def test_expect_matches_enumeration():
    scores = random_scores(6)
    generator = torch.Generator().manual_seed(7)
    feats = torch.randn(4, 4, 3, 3, 5, generator=generator, dtype=torch.float64)
    expected = LinearChainCRF(scores, LENGTHS).expect(feats)
    for b, n in enumerate(LENGTHS.tolist()):
        _, indicators, log_weights, log_z = enumerate_chain(scores[b], n)
        per_seq = torch.einsum("kipc,ipcf->kf", indicators, feats[b])
        torch.testing.assert_close(
            expected[b], (log_weights - log_z).exp() @ per_seq, rtol=0, atol=1e-10
        )


def test_samples_follow_the_distribution():
    scores = random_scores(8, scale=0.7)
    lengths = torch.tensor([3, 2, 3, 1])
    dist = LinearChainCRF(scores, lengths)
    samples = dist.sample(20_000, generator=torch.Generator().manual_seed(9))
    assert samples.shape == (20_000, 4, 4) and samples.dtype == torch.long
    assert (samples[:, 1, 2:] == 0).all() and (samples[..., 3] == 0).all()
    for b, n in enumerate(lengths.tolist()):
        seqs, _, log_weights, log_z = enumerate_chain(scores[b], n)
        codes = (samples[:, b, :n] * 3 ** torch.arange(n - 1, -1, -1)).sum(
            -1
        )  # lexicographic index
        observed = torch.bincount(codes, minlength=len(seqs)).double()
        expected = (log_weights - log_z).exp() * 20_000
        assert chisquare(observed.numpy(), expected.numpy()).pvalue > 0.001


def test_sample_generator_makes_draws_reproducible():
    dist = LinearChainCRF(random_scores(10), LENGTHS)
    first = dist.sample(5, generator=torch.Generator().manual_seed(3))
    assert torch.equal(first, dist.sample(5, generator=torch.Generator().manual_seed(3)))


def test_padding_invariance_batched_equals_one_at_a_time():
    scores = random_scores(11, positions=6)
    lengths = torch.tensor([6, 2, 4, 1])
    dist = LinearChainCRF(scores, lengths)
    garbage = scores.clone()
    for b, n in enumerate(lengths.tolist()):
        garbage[b, n:] = 1e30 * (b + 1)  # padding scores never count
        garbage[b, 0, 1:] = float("nan")  # nor do rows 1.. of position 0
    noisy = LinearChainCRF(garbage, lengths)
    tags = dist.argmax()
    for b, n in enumerate(lengths.tolist()):
        alone = LinearChainCRF(scores[b : b + 1, :n], torch.tensor([n]))
        torch.testing.assert_close(
            dist.log_partition[b], alone.log_partition[0], rtol=0, atol=1e-12
        )
        torch.testing.assert_close(dist.marginals[b, :n], alone.marginals[0], rtol=0, atol=1e-12)
        torch.testing.assert_close(dist.entropy()[b], alone.entropy()[0], rtol=0, atol=1e-12)
        assert torch.equal(tags[b, :n], alone.argmax()[0])
    torch.testing.assert_close(noisy.log_partition, dist.log_partition, rtol=0, atol=0)
    torch.testing.assert_close(noisy.marginals, dist.marginals, rtol=0, atol=0)
    assert torch.equal(noisy.argmax(), tags)


def test_gradcheck_log_partition_and_entropy():
    scores = random_scores(12, batch=2, positions=3, states=3).requires_grad_()
    lengths = torch.tensor([3, 2])
    assert torch.autograd.gradcheck(lambda s: LinearChainCRF(s, lengths).log_partition, (scores,))
    assert torch.autograd.gradcheck(lambda s: LinearChainCRF(s, lengths).entropy(), (scores,))
    assert torch.autograd.gradgradcheck(
        lambda s: LinearChainCRF(s, lengths).log_partition, (scores,)
    )


def test_gradient_of_log_partition_is_the_marginals():
    scores = random_scores(13).requires_grad_()
    dist = LinearChainCRF(scores, LENGTHS)
    (grad,) = torch.autograd.grad(dist.log_partition.sum(), scores)
    torch.testing.assert_close(grad, dist.marginals.detach(), rtol=0, atol=1e-12)


def test_caller_tensors_are_not_mutated():
    scores, lengths = random_scores(14), LENGTHS.clone()
    before = scores.clone()
    dist = LinearChainCRF(scores, lengths)
    dist.entropy(), dist.argmax(), dist.sample(2)
    assert torch.equal(scores, before) and torch.equal(lengths, LENGTHS)


def test_float32_is_supported():
    scores = random_scores(15).float()
    dist = LinearChainCRF(scores, LENGTHS)
    assert dist.log_partition.dtype == torch.float32
    torch.testing.assert_close(
        dist.log_partition.double(), LinearChainCRF(scores.double(), LENGTHS).log_partition
    )


def _torch_viterbi(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The Viterbi recursion in torch (the decoder before it moved to numpy): the reference."""
    batch, positions, states = scores.shape[:3]
    alive = torch.arange(positions)[None] < lengths[:, None]
    identity = torch.arange(states).expand(batch, states)
    best, pointers = scores[:, 0, 0, :], []
    for i in range(1, positions):
        step, arg = (best.unsqueeze(-1) + scores[:, i]).max(dim=-2)
        pointers.append(torch.where(alive[:, i, None], arg, identity))
        best = torch.where(alive[:, i, None], step, best)
    tags = [best.argmax(dim=-1)]
    for arg in reversed(pointers):
        tags.append(arg.gather(-1, tags[-1].unsqueeze(-1)).squeeze(-1))
    return torch.where(alive, torch.stack(tags[::-1], dim=1), 0)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_argmax_equals_the_torch_recursion_ties_included(dtype, compiled, monkeypatch):
    """Compiled and numpy decoders against the torch recursion; integer scores tie everywhere:
    the first maximum must be chosen as torch chose it."""
    if compiled:
        assert native.native_library() is not None  # gcc is on every machine of this project
    else:
        monkeypatch.setattr(crf, "native_viterbi", lambda scores, lengths: None)
    generator = torch.Generator().manual_seed(3)
    short = torch.tensor([40, 1, 17, 2, 39, 25])
    for scores, lengths in (
            (torch.randint(-2, 3, (6, 40, 4, 4), generator=generator).to(dtype), short),
            (torch.randn(6, 40, 5, 5, generator=generator, dtype=dtype), short),
            (torch.randn(3, 700, 4, 4, generator=generator, dtype=dtype) * 1e-3,  # long, near-ties
             torch.tensor([700, 3, 650]))):
        tags = LinearChainCRF(scores, lengths).argmax()
        assert tags.dtype == torch.long
        assert torch.equal(tags, _torch_viterbi(clean_scores(scores, lengths), lengths))


def test_compiled_and_numpy_viterbi_agree_on_a_tokenizers_scores():
    """A tokenizer's scores: an (untrained) character tagger's emissions under its transition
    rules, the forbidden transitions included."""
    generator = torch.Generator().manual_seed(0)
    model = CharTagger(n_chars=40, hidden=16)
    chars = torch.randint(3, 40, (8, 300), generator=generator)
    classes = torch.randint(1, 5, (8, 300), generator=generator)
    lengths = torch.tensor([300, 250, 7, 1, 299, 120, 64, 33])
    with torch.no_grad():
        dist = model(chars, classes, lengths)
    scores = clean_scores(dist.scores, lengths)
    compiled = native.native_viterbi(scores.numpy(), lengths.numpy())
    assert compiled is not None
    assert np.array_equal(compiled, crf._viterbi(scores.numpy(), lengths.numpy()))
    assert torch.equal(torch.from_numpy(compiled), _torch_viterbi(scores, lengths))
