from __future__ import annotations

import pytest
import torch

from parser.models import LogLinearScorer
from parser.models.features import (
    between_counts,
    direction_and_distance,
    prefix_ids,
    suffix_ids,
)
from tests.models import reference_features as ref
from tests.models.batches import (
    N_RELS,
    N_UPOS,
    N_WORDS,
    assert_padding_invariant,
    random_batch,
    random_loglinear,
    with_noisy_padding,
)

LENGTHS = [5, 1, 12, 3]


def random_model(*, n_rels: int = N_RELS, seed: int = 0, sparse: bool = False) -> LogLinearScorer:
    return random_loglinear(seed=seed, n_rels=n_rels, sparse=sparse)


@pytest.mark.parametrize("n_rels", [N_RELS, 0])
def test_shapes_and_zero_start(n_rels: int) -> None:
    batch = with_noisy_padding(random_batch(LENGTHS, seed=1), extra=2, extra_chars=0, seed=2)
    fresh = LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, n_rels=n_rels, n_buckets=256)
    out = fresh(batch)
    assert out.arcs.shape == (4, 15, 15) and torch.equal(out.arcs, torch.zeros(4, 15, 15))
    out = random_model(n_rels=n_rels)(batch)
    assert torch.isfinite(out.arcs).all()
    if n_rels:
        assert out.labels.shape == (4, 15, 15, n_rels) and torch.isfinite(out.labels).all()
    else:
        assert out.labels is None


def test_vectorised_scores_equal_the_per_arc_reference() -> None:
    model = random_model()
    batch = random_batch(LENGTHS, seed=3)
    with torch.no_grad():
        out = model(batch)
    arc_weights = model.weights.weight[:, 0].tolist()
    label_weights = model.label_weights.weight[:, 0].tolist()
    for b, n in enumerate(LENGTHS):
        words, upos = batch.words[b].tolist(), batch.upos[b].tolist()
        chars = batch.chars[b].tolist()
        for d in range(n + 1):
            for h in range(n + 1):
                expected = ref.arc_score(arc_weights, words, upos, n, N_UPOS, d, h, chars)
                assert out.arcs[b, d, h].item() == pytest.approx(expected, rel=1e-5, abs=1e-4)
                for rel in range(N_RELS):
                    expected = ref.label_score(label_weights, words, upos, d, h, rel)
                    assert out.labels[b, d, h, rel].item() == pytest.approx(
                        expected, rel=1e-5, abs=1e-4
                    )


def test_between_counts_by_hand() -> None:
    # ROOT(2) DET(3) NOUN(4) DET(3) VERB(5), then padding holding a tag that must not count.
    upos = torch.tensor([[2, 3, 4, 3, 5, 4]])
    counts = between_counts(upos, torch.tensor([4]), n_upos=6)
    assert counts.shape == (1, 6, 6, 6)
    assert counts[0, 4, 1].tolist() == [0, 0, 0, 1, 1, 0]  # words 2 and 3 lie between
    assert counts[0, 1, 4].tolist() == [0, 0, 0, 1, 1, 0]
    assert counts[0, 4, 0].tolist() == [0, 0, 0, 2, 1, 0]  # ROOT itself is not between
    assert counts[0, 2, 1].sum() == 0 and counts[0, 3, 3].sum() == 0


def test_between_counts_equal_the_reference_on_random_input() -> None:
    batch = random_batch([9, 4, 1, 13], seed=4)
    counts = between_counts(batch.upos, batch.lengths, n_upos=N_UPOS)
    for b, n in enumerate(batch.lengths.tolist()):
        upos = batch.upos[b].tolist()
        for d in range(n + 1):
            for h in range(n + 1):
                assert counts[b, d, h].tolist() == ref.between(upos, d, h, N_UPOS)


def test_direction_and_distance_bins() -> None:
    direction, distance = direction_and_distance(14)
    assert direction[3, 1] == 1 and direction[1, 3] == 0 and direction[2, 2] == 0
    assert [distance[0, j].item() for j in (1, 2, 5, 6, 10, 11, 13)] == [0, 1, 4, 5, 5, 6, 6]
    assert torch.equal(distance, distance.T)


def test_padding_invariance_and_batched_equals_single() -> None:
    model = random_model(seed=5)
    tight = random_batch(LENGTHS, seed=6)
    noisy = with_noisy_padding(tight, extra=3, extra_chars=0, seed=7)
    assert_padding_invariant(model, tight, noisy)
    with torch.no_grad():  # deterministic
        torch.testing.assert_close(model(tight).arcs, model(tight).arcs, rtol=0, atol=0)


@pytest.mark.parametrize("sparse", [False, True])
def test_gradient_reaches_both_tables(sparse: bool) -> None:
    model = random_model(seed=8, sparse=sparse)
    out = model(random_batch(LENGTHS, seed=9))
    (out.arcs.sum() + out.labels.square().sum()).backward()
    for table in (model.weights, model.label_weights):
        grad = table.weight.grad.to_dense() if sparse else table.weight.grad
        assert grad.is_sparse is False and torch.isfinite(grad).all()
        assert (grad != 0).sum() > 10
    assert model.weights.weight.grad.is_sparse == sparse


def test_bad_input_names_the_tensor() -> None:
    batch = random_batch([3], seed=10)
    upos = batch.upos.clone()
    upos[0, 3] = -1
    with pytest.raises(ValueError, match=r"batch\.upos\[0, 3\] = -1"):
        random_model()(
            type(batch)(words=batch.words, chars=batch.chars, upos=upos, lengths=batch.lengths)
        )
    with pytest.raises(ValueError, match="n_buckets"):
        LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, n_rels=1, n_buckets=0)


def test_prefix_and_suffix_sources_by_hand() -> None:
    # One sentence: ROOT, a 7-character word, a 2-character word; then a padding position.
    chars = torch.tensor([[[2, 0, 0, 0, 0, 0, 0], [5, 6, 7, 8, 9, 10, 11], [4, 3, 0, 0, 0, 0, 0],
                           [9, 9, 9, 0, 0, 0, 0]]])
    present = torch.tensor([[True, True, True, False]])
    prefixes, suffixes = prefix_ids(chars, present), suffix_ids(chars, present)
    assert prefixes[0].tolist() == [
        ref.py_extend(0, 2, 0, 0, 0, 0), ref.py_extend(0, 5, 6, 7, 8, 9),
        ref.py_extend(0, 4, 3, 0, 0, 0), 0,
    ]
    assert suffixes[0].tolist() == [
        ref.py_extend(1, 0, 0, 2), ref.py_extend(1, 9, 10, 11), ref.py_extend(1, 0, 4, 3), 0,
    ]
    # Words sharing a prefix (or suffix) share the value: 5 characters are enough.
    longer = torch.tensor([[[5, 6, 7, 8, 9, 1, 9, 10, 11]]])
    one = torch.tensor([[True]])
    assert prefix_ids(longer, one).item() == prefixes[0, 1].item()
    assert suffix_ids(longer, one).item() == suffixes[0, 1].item()


def test_word_dropout_reads_dropped_words_as_unknown_only_in_training() -> None:
    model = random_model(seed=11)
    dropping = LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, n_rels=N_RELS, n_buckets=4099,
                               n_label_buckets=1031, word_dropout=0.999999)
    dropping.load_state_dict(model.state_dict())
    batch = random_batch(LENGTHS, seed=12)
    with torch.no_grad():
        dropping.eval()  # evaluation: every word read as itself
        assert torch.equal(dropping(batch).arcs, model(batch).arcs)
        dropping.train()
        dropped = dropping(batch)
    # Every real word read as UNK (id 1) with characters [UNK, PAD, ...]; ROOT kept.
    words, chars = batch.words.clone(), batch.chars.clone()
    real = batch.word_mask
    words[real] = 1
    chars[real] = 0
    chars[..., 0][real] = 1
    unknown = type(batch)(words=words, chars=chars, upos=batch.upos, lengths=batch.lengths)
    with torch.no_grad():
        expected = model(unknown)
    assert torch.equal(dropped.arcs, expected.arcs) and torch.equal(dropped.labels, expected.labels)
    assert not torch.equal(dropped.arcs, model(batch).arcs.detach())
    assert torch.equal(batch.words, random_batch(LENGTHS, seed=12).words)  # caller's batch kept
    with pytest.raises(ValueError, match="word_dropout"):
        LogLinearScorer(n_words=N_WORDS, n_upos=N_UPOS, n_rels=0, word_dropout=1.0)
