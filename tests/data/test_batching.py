"""Encoding, collating and the bucket batcher: token budget, seeds, epochs, resume, replicas."""

from __future__ import annotations

import itertools

import pytest
import torch

from parser.data.batching import BucketBatcher, collate, encode, encode_all
from parser.data.conllu_io import read_conllu
from parser.data.vocab import PAD, ROOT, UNK, Vocabularies


@pytest.fixture(scope="module")
def tiny(fixtures):
    train = read_conllu(fixtures / "tiny-train.conllu")
    vocabs = Vocabularies.build(train, min_freq=2)
    return train, vocabs, encode_all(train, vocabs)


def test_encode_one_sentence(tiny):
    train, vocabs, _ = tiny
    sentence = train[1]  # I do n't like cold coffee .
    e = encode(sentence, vocabs, index=7, max_chars=3)
    assert e.length == 7 and e.index == 7
    assert e.words.tolist() == [ROOT] + [vocabs.words.index(f) for f in sentence.forms]
    assert e.upos[0] == ROOT and e.upos[1] == vocabs.upos.index("PRON")
    assert e.heads.tolist() == [0, 4, 4, 4, 0, 6, 4, 4]
    assert e.rels.tolist() == [0] + [vocabs.rels.index(r) for r in sentence.deprels]
    assert e.chars.shape == (8, 3)  # "coffee" cut to 3 characters
    assert e.chars[0].tolist() == [ROOT, PAD, PAD]
    assert e.chars[6].tolist() == vocabs.chars.indices("cof")
    assert e.chars[1].tolist() == [vocabs.chars.index("I"), PAD, PAD]
    lean = encode(sentence, vocabs, index=7, max_chars=3, trees=False)  # a prediction's
    assert lean.heads is None and lean.rels is None and lean.words.equal(e.words)


def test_encode_unseen_and_unannotated(tiny):
    train, vocabs, _ = tiny
    stripped = train[0].__class__(**{**train[0].__dict__, "forms": ["Zebra"] * 5,
                                     "heads": [-1] * 5, "deprels": [None] * 5})
    e = encode(stripped, vocabs)
    assert e.words[1:].tolist() == [UNK] * 5
    assert e.heads is None and e.rels is None


def test_collate_pads_and_keeps_gold_only_when_labeled(tiny):
    _, _, encoded = tiny
    picked = [encoded[0], encoded[8], encoded[12]]  # 5, 11 and 5 words
    batch = collate(picked, labeled=True)
    assert batch.lengths.tolist() == [5, 11, 5]
    assert batch.words.shape == (3, 12) and batch.index.tolist() == [0, 8, 12]
    width = max(e.chars.shape[1] for e in picked)
    assert batch.chars.shape == (3, 12, width)
    for b, e in enumerate(picked):
        n = e.length
        assert torch.equal(batch.words[b, :n + 1], e.words)
        assert (batch.words[b, n + 1:] == PAD).all() and (batch.upos[b, n + 1:] == PAD).all()
        assert torch.equal(batch.heads[b, :n + 1], e.heads) and (batch.heads[b, n + 1:] == 0).all()
        assert torch.equal(batch.chars[b, :n + 1, :e.chars.shape[1]], e.chars)
    assert batch.word_mask.sum() == 21
    unlabeled = collate(picked, labeled=False)
    assert unlabeled.heads is None and unlabeled.rels is None
    assert torch.equal(unlabeled.words, batch.words)
    with pytest.raises(ValueError, match="no sentences"):
        collate([], labeled=True)


def test_collate_labeled_needs_heads(tiny):
    train, vocabs, encoded = tiny
    text = train[0].__class__(**{**train[0].__dict__, "heads": [-1] * 5, "deprels": [None] * 5})
    with pytest.raises(ValueError, match="sentence 3 has no heads"):
        collate([encoded[0], encode(text, vocabs, index=3)], labeled=True)


def _covered(batcher, epoch):
    return sorted(i for b in batcher.batch_indices(epoch) for i in b)


@pytest.mark.parametrize("budget", [1, 20, 60, 200])
def test_token_budget_and_coverage(tiny, budget):
    _, _, encoded = tiny
    batcher = BucketBatcher(encoded, tokens_per_batch=budget, shuffle=True, seed=3)
    batches = batcher.batch_indices(0)
    assert _covered(batcher, 0) == list(range(len(encoded)))
    for indices in batches:
        longest = max(encoded[i].length for i in indices)
        assert len(indices) * longest <= budget or len(indices) == 1
    # greedy cutting: no two consecutive batches of sorted lengths could have been merged
    assert len(batches) <= len(encoded)


@pytest.mark.parametrize("cells", [1, 100, 400, 2000])
def test_cell_budget_bounds_batch_times_length_squared(tiny, cells):
    _, _, encoded = tiny
    capped = BucketBatcher(encoded, tokens_per_batch=200, shuffle=False, cells_per_batch=cells)
    plain = BucketBatcher(encoded, tokens_per_batch=200, shuffle=False)
    assert _covered(capped, 0) == list(range(len(encoded)))
    for indices in capped.batch_indices(0):
        longest = max(encoded[i].length for i in indices)
        assert len(indices) * (longest + 1) ** 2 <= cells or len(indices) == 1
        assert len(indices) * longest <= 200 or len(indices) == 1
    assert len(capped.batch_indices(0)) >= len(plain.batch_indices(0))
    with pytest.raises(ValueError, match="cells_per_batch"):
        BucketBatcher(encoded, tokens_per_batch=200, shuffle=False, cells_per_batch=0)


def test_buckets_group_similar_lengths(tiny):
    _, _, encoded = tiny
    batcher = BucketBatcher(encoded, tokens_per_batch=40, shuffle=False)
    spans = [[encoded[i].length for i in b] for b in batcher.batch_indices(0)]
    # each batch is a run of the sorted lengths, shortest batches first when not shuffled
    assert all(max(a) <= min(b) for a, b in itertools.pairwise(spans))
    assert [n for s in spans for n in s] == sorted(e.length for e in encoded)
    batches = list(batcher)
    assert sum(b.size for b in batches) == len(encoded)
    assert all(b.is_labeled for b in batches)


def test_shuffling_is_deterministic_by_seed_and_varies_by_epoch(tiny):
    _, _, encoded = tiny
    make = lambda seed: BucketBatcher(encoded, tokens_per_batch=30, shuffle=True,
                                      seed=seed)
    assert make(1).batch_indices(0) == make(1).batch_indices(0)
    assert make(1).batch_indices(0) != make(2).batch_indices(0)
    assert make(1).batch_indices(0) != make(1).batch_indices(1)
    spans = sorted([encoded[i].length for i in b] for b in make(1).batch_indices(1))
    assert all(max(a) <= min(b) for a, b in itertools.pairwise(spans))  # still length buckets
    first = [b.index.tolist() for b in make(1).epoch(4)]
    assert first == make(1).batch_indices(4)


def test_resume_from_state_continues_exactly(tiny):
    _, _, encoded = tiny
    full = BucketBatcher(encoded, tokens_per_batch=30, shuffle=True, seed=5)
    expected = [b.index.tolist() for b in full.epoch(2)]
    run = BucketBatcher(encoded, tokens_per_batch=30, shuffle=True, seed=5)
    run.set_epoch(2)
    iterator = iter(run)
    seen = [next(iterator).index.tolist() for _ in range(3)]
    state = run.state_dict()
    assert state["epoch"] == 2 and state["position"] == 3
    resumed = BucketBatcher(encoded, tokens_per_batch=30, shuffle=True, seed=5)
    resumed.load_state_dict(state)
    rest = [b.index.tolist() for b in resumed]
    assert seen + rest == expected
    assert list(resumed) == []  # the epoch is consumed until set_epoch
    with pytest.raises(ValueError, match="does not match"):
        BucketBatcher(encoded, tokens_per_batch=30, shuffle=True, seed=6).load_state_dict(state)


def test_max_length_skips_with_a_count(tiny, caplog):
    _, _, encoded = tiny
    too_long = sum(e.length > 8 for e in encoded)
    with caplog.at_level("WARNING"):
        batcher = BucketBatcher(encoded, tokens_per_batch=50, shuffle=True, max_length=8)
    assert batcher.n_skipped == too_long > 0
    assert f"skipped {too_long} of {len(encoded)}" in caplog.text
    kept = [i for i, e in enumerate(encoded) if e.length <= 8]
    assert _covered(batcher, 0) == kept
    predict = BucketBatcher(encoded, tokens_per_batch=50, shuffle=False, max_length=None)
    assert predict.n_skipped == 0 and _covered(predict, 0) == list(range(len(encoded)))
    with pytest.raises(ValueError, match="no sentences to batch"):
        BucketBatcher(encoded, tokens_per_batch=50, shuffle=True, max_length=2)


def test_replicas_split_each_global_batch(tiny):
    _, _, encoded = tiny
    single = BucketBatcher(encoded, tokens_per_batch=60, shuffle=True, seed=9)
    ranks = [BucketBatcher(encoded, tokens_per_batch=60, shuffle=True, seed=9,
                           num_replicas=2, rank=r) for r in range(2)]
    global_batches = [b for b in single.batch_indices(1) if len(b) >= 2]
    per_rank = [r.batch_indices(1) for r in ranks]
    assert len(per_rank[0]) == len(per_rank[1]) == len(global_batches)
    for whole, part0, part1 in zip(global_batches, *per_rank):
        assert sorted(part0 + part1) == sorted(whole) and not set(part0) & set(part1)
    with pytest.raises(ValueError, match="rank 2"):
        BucketBatcher(encoded, tokens_per_batch=60, shuffle=True, num_replicas=2, rank=2)


def test_unlabeled_batcher_never_exposes_heads(tiny):
    _, _, encoded = tiny
    batcher = BucketBatcher(encoded, tokens_per_batch=60, shuffle=True, labeled=False)
    assert all(b.heads is None and b.rels is None for b in batcher)


@pytest.mark.parametrize("spread", [0.0, 0.1, 0.5])
def test_length_spread_bounds_padding(tiny, spread):
    _, _, encoded = tiny
    bounded = BucketBatcher(encoded, tokens_per_batch=200, shuffle=False, length_spread=spread)
    assert _covered(bounded, 0) == list(range(len(encoded)))
    for indices in bounded.batch_indices(0):
        lengths = [encoded[i].length for i in indices]
        assert max(lengths) - min(lengths) <= max(1.0, spread * min(lengths))
        assert len(indices) * max(lengths) <= 200 or len(indices) == 1
    with pytest.raises(ValueError, match="length_spread"):
        BucketBatcher(encoded, tokens_per_batch=200, shuffle=False, length_spread=-1.0)
