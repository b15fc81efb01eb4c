"""The compiled Eisner decoder against the batched torch chart (the reference), tree for tree: on
random scores, on scores full of ties (small integers: the lowest split point and root word
win in both), with forbidden arcs, padded or alone, and a sentence without a projective tree
refused alike."""

from __future__ import annotations

import pytest
import torch

from parser.structs import eisner, is_projective
from parser.structs.decoding import native


def _agree(scores, lengths, single_root):
    compiled = native.native_eisner(scores, lengths, single_root=single_root)
    assert compiled is not None
    reference = eisner(scores, lengths, single_root=single_root, native=False)
    assert torch.equal(compiled, reference)
    assert torch.equal(eisner(scores, lengths, single_root=single_root), reference)
    return compiled


@pytest.mark.parametrize("single_root", [True, False])
@pytest.mark.parametrize("ties", [False, True])
def test_compiled_and_torch_eisner_agree(single_root, ties):
    generator = torch.Generator().manual_seed(11 + 2 * single_root + ties)
    for trial in range(30):
        batch, size = 5, int(torch.randint(2, 30, (1,), generator=generator)) + 1
        if ties:
            scores = torch.randint(-2, 3, (batch, size, size), generator=generator).double()
        else:
            scores = torch.randn(batch, size, size, generator=generator) * 3
        if trial % 3 == 0:  # forbidden arcs (a projective tree still exists: the chain to the left)
            forbidden = torch.rand(batch, size, size, generator=generator) < 0.3
            chain = torch.arange(size)
            forbidden[:, chain[1:], chain[:-1]] = False
            scores = scores.masked_fill(forbidden, float("-inf"))
        lengths = torch.randint(1, size, (batch,), generator=generator)
        lengths[0] = size - 1
        heads = _agree(scores, lengths, single_root)
        assert bool(is_projective(heads, lengths).all())
        for b in range(batch):
            n = int(lengths[b])
            if single_root:
                assert int((heads[b, 1 : n + 1] == 0).sum()) == 1, trial


def test_a_sentence_decodes_the_same_alone_and_in_a_batch():
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 12, 12, generator=generator)
    lengths = torch.tensor([11, 4, 7, 1])
    together = native.native_eisner(scores, lengths, single_root=True)
    for b, n in enumerate(lengths.tolist()):
        alone = native.native_eisner(scores[b : b + 1, : n + 1, : n + 1], lengths[b : b + 1], single_root=True)
        assert torch.equal(alone[0], together[b, : n + 1])
        assert not together[b, n + 1 :].any()


def test_a_sentence_without_a_projective_tree_is_refused_alike():
    scores = torch.zeros(2, 4, 4)
    scores[1, 2, :] = float("-inf")  # word 2 of sentence 1 has no head
    lengths = torch.tensor([3, 3])
    assert native.native_eisner(scores, lengths, single_root=True) is None
    with pytest.raises(ValueError, match=r"no projective tree with a finite score for sentences \[1\]"):
        eisner(scores, lengths, single_root=True)
