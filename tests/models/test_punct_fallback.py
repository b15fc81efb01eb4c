"""Decoder.decode's fallback for punctuation that cannot be attached without crossing arcs:
the stuck sentences alone take the best projective tree, and every sentence's tree is the one it
gets decoded on its own (batch-mates never change it)."""

import torch

from parser.models.decoder import Decoder
from parser.models.ud_rules import UDRules
from parser.structs import ParserOutput, TreeCRF, attach_punct_projectively, eisner
from parser.structs.common import word_mask

PUNCT = 9


def _model() -> Decoder:
    rules = UDRules(root=None, left_to_right=(), subjects=(), objects=(), punct_tag=PUNCT)
    return Decoder(labels="classifier", ud_rules=rules)


def _alone(scores: torch.Tensor, n: int, punct: torch.Tensor) -> tuple[list[int], bool]:
    """One sentence decoded by itself, as the rule says: the maximum spanning tree (ROOT not a
    mark's head), punctuation attached; if a mark is stuck, the best projective tree instead."""
    crf = TreeCRF(scores[None, : n + 1, : n + 1], torch.tensor([n]))
    mark = punct[None, : n + 1]
    lone = (mark | ~word_mask(crf.lengths, n + 1)).all(1)  # every word a mark: ROOT allowed
    no_root = torch.zeros_like(crf.arc_mask)
    no_root[..., 0] = mark & ~lone[:, None]
    crf = crf.restrict(~no_root)
    heads, stuck = attach_punct_projectively(crf.argmax(), crf.lengths, mark, crf.arc_scores)
    if bool(stuck[0]):
        projective = eisner(crf.arc_scores, crf.lengths, single_root=True)
        heads, _ = attach_punct_projectively(projective, crf.lengths, mark, crf.arc_scores)
    return heads[0].tolist(), bool(stuck[0])


def test_only_stuck_sentences_take_the_projective_tree_and_batch_mates_do_not_matter():
    model = _model()
    seen = set()
    for seed in range(40):
        gen = torch.Generator().manual_seed(seed)
        lengths = torch.tensor([9, 7, 8, 5])
        scores = 3 * torch.randn(4, 10, 10, generator=gen)
        upos = torch.randint(0, 3, (4, 10), generator=gen)
        upos[torch.rand(4, 10, generator=gen) < 0.35] = PUNCT
        upos[:, 0] = 0
        punct = upos == PUNCT
        heads, _ = model.decode(ParserOutput(dist=TreeCRF(scores, lengths)), upos=upos)
        for b, n in enumerate(lengths.tolist()):
            expected, stuck = _alone(scores[b], n, punct[b])
            assert heads[b, : n + 1].tolist() == expected, (seed, b)
            seen.add(stuck)
        if seen == {True, False}:
            break
    assert seen == {True, False}  # both paths were exercised
