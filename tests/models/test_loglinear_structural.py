"""The log-linear scorer's options for training without trees: ``lexical=False`` (UPOS, direction
and distance templates only) and ``distance_prior`` (a fixed harmonic score on word-word arcs)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from parser.models import LogLinearScorer
from parser.models.features import (
    ARC_TEMPLATES,
    BETWEEN_TEMPLATE,
    DISTANCE_TEMPLATE,
    LEXICAL_SOURCES,
    UNLEXICALIZED,
)
from parser.models.loglinear import log_inverse_distance
from tests.models import reference_features as ref
from tests.models.batches import (
    N_CHARS,
    N_UPOS,
    N_WORDS,
    assert_padding_invariant,
    random_batch,
    random_loglinear,
    with_noisy_padding,
)

LENGTHS = [6, 1, 11, 3]


def random_model(*, lexical: bool, distance_prior: float = 0.0, seed: int = 0) -> LogLinearScorer:
    return random_loglinear(seed=seed, lexical=lexical, distance_prior=distance_prior)


def unlexicalized_reference(
    weights: list[float], upos: list[int], n: int, d: int, h: int
) -> float:
    """Per-arc score of the unlexicalized scorer, from plain ints: the UPOS templates (plain and
    with direction and distance), one in-between feature pair per word between, and the bare
    (direction, distance) feature."""
    src = ref.sources([0] * len(upos), upos, n, N_UPOS, h, d, [[0]] * len(upos))
    direction, dist = int(h < d), ref.distance_bin(abs(d - h))
    features = [ref.py_hash(DISTANCE_TEMPLATE, direction, dist)]
    for template in UNLEXICALIZED:
        plain = ref.py_hash(template, *(src[name] for name in ARC_TEMPLATES[template]))
        features += [plain, ref.py_extend(plain, direction, dist)]
    for k in range(min(d, h) + 1, max(d, h)):
        plain = ref.py_hash(BETWEEN_TEMPLATE, upos[h], upos[k], upos[d])
        features += [plain, ref.py_extend(plain, direction, dist)]
    return sum(weights[f % len(weights)] for f in features)


def test_unlexicalized_templates_hold_no_word_source() -> None:
    for template in UNLEXICALIZED:
        assert not LEXICAL_SOURCES & set(ARC_TEMPLATES[template]), ARC_TEMPLATES[template]
    # Every UPOS-only template is kept: (hp), (dp), (hp, dp), 4 surrounding and 4 backed off.
    kept = {ARC_TEMPLATES[t] for t in UNLEXICALIZED}
    assert {("hp",), ("dp",), ("hp", "dp")} <= kept and len(kept) == 11
    lexical = [t for t in range(len(ARC_TEMPLATES)) if t not in UNLEXICALIZED]
    assert all(LEXICAL_SOURCES & set(ARC_TEMPLATES[t]) for t in lexical)


def test_unlexicalized_scores_equal_the_per_arc_reference() -> None:
    model = random_model(lexical=False, seed=1)
    batch = random_batch(LENGTHS, seed=2)
    with torch.no_grad():
        arcs = model(batch).arcs
    weights = model.weights.weight[:, 0].tolist()
    for b, n in enumerate(LENGTHS):
        upos = batch.upos[b].tolist()
        for d in range(n + 1):
            for h in range(n + 1):
                expected = unlexicalized_reference(weights, upos, n, d, h)
                assert arcs[b, d, h].item() == pytest.approx(expected, rel=1e-5, abs=1e-4)


def test_unlexicalized_scores_do_not_change_with_the_words() -> None:
    model = random_model(lexical=False, seed=3)
    lexical = random_model(lexical=True, seed=3)
    batch = random_batch(LENGTHS, seed=4)
    gen = torch.Generator().manual_seed(5)
    real = batch.word_mask
    words = torch.where(real, torch.randint(1, N_WORDS, batch.words.shape, generator=gen), batch.words)
    chars = torch.where(
        real[..., None] & (batch.chars != 0),
        torch.randint(3, N_CHARS, batch.chars.shape, generator=gen),
        batch.chars,
    )
    other = replace(batch, words=words, chars=chars)
    assert not torch.equal(other.words, batch.words) and not torch.equal(other.chars, batch.chars)
    with torch.no_grad():
        torch.testing.assert_close(model(other).arcs, model(batch).arcs, rtol=0, atol=0)
        torch.testing.assert_close(model(other).labels, model(batch).labels, rtol=0, atol=0)
        # The same change moves the lexicalized scorer's scores: the test can see words.
        assert not torch.allclose(lexical(other).arcs, lexical(batch).arcs)
        assert not torch.allclose(lexical(other).labels, lexical(batch).labels)


def test_unlexicalized_padding_invariance() -> None:
    model = random_model(lexical=False, distance_prior=1.5, seed=6)
    tight = random_batch(LENGTHS, seed=7)
    noisy = with_noisy_padding(tight, extra=3, extra_chars=0, seed=8)
    assert_padding_invariant(model, tight, noisy)


def test_distance_prior_by_hand() -> None:
    expected = torch.tensor(
        [
            [0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, -math.log(2)],
            [0.0, 0.0, 0.0, 0.0],
            [0.0, -math.log(2), 0.0, 0.0],
        ]
    )
    torch.testing.assert_close(log_inverse_distance(4), expected)


@pytest.mark.parametrize("lexical", [True, False])
def test_distance_prior_adds_the_harmonic_score(lexical: bool) -> None:
    batch = random_batch(LENGTHS, seed=9)
    plain, prior = random_model(lexical=lexical, seed=10), random_model(
        lexical=lexical, distance_prior=2.0, seed=10
    )
    with torch.no_grad():
        difference = prior(batch).arcs - plain(batch).arcs
    width = batch.words.shape[1]
    for d in range(width):
        for h in range(width):
            value = -2.0 * math.log(abs(d - h)) if d > 0 and h > 0 and d != h else 0.0
            assert difference[:, d, h].tolist() == pytest.approx([value] * len(LENGTHS), abs=1e-5)
    # A fresh scorer (zero weights) is the harmonic model itself.
    fresh = LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, n_rels=0, n_buckets=64,
                            lexical=lexical, distance_prior=1.0)  # fmt: skip
    with torch.no_grad():
        torch.testing.assert_close(fresh(batch).arcs[0], log_inverse_distance(width))


def test_defaults_are_lexical_without_prior_and_bad_prior_raises() -> None:
    batch = random_batch(LENGTHS, seed=11)
    default, explicit = random_model(lexical=True, seed=12), random_model(lexical=True, seed=12)
    assert default.lexical and default.distance_prior == 0.0
    fresh = LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, n_rels=0)
    assert fresh.lexical and fresh.distance_prior == 0.0
    with torch.no_grad():
        torch.testing.assert_close(default(batch).arcs, explicit(batch).arcs, rtol=0, atol=0)
    for bad in (-0.5, float("nan")):
        with pytest.raises(ValueError, match="distance_prior"):
            LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, n_rels=0, distance_prior=bad)


def test_unlexicalized_gradient_reaches_only_shared_weights() -> None:
    model = random_model(lexical=False, seed=13)
    model(random_batch(LENGTHS, seed=14)).arcs.sum().backward()
    grad = model.weights.weight.grad
    assert torch.isfinite(grad).all() and (grad != 0).sum() > 10
