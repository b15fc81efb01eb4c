"""Prediction outputs only a tree CRF can give: the k best trees of each sentence, exact samples
from the model's distribution over trees, and trees under fixed or forbidden arcs
(:mod:`parser.inference.fixed_arcs`). Behind ``parser-predict kbest= / samples= / keep_heads=``
and ``Pipeline.parse(kbest=, samples=, required=, forbidden=)``.

The distribution is the model's, as it predicts (eval mode): UD rules and calibration
temperatures included (``Decoder.scores``, :mod:`parser.models.decoder`). Trees are over heads: for a joint-label
model the relations are summed out (the k best trees are those of highest probability
``p(heads)``), and the relations of every tree come from ``Decoder.relations`` (each word's
best relation on its arc under the UD rules' per-head limits), as for the best tree.

- ``kbest=K``: the K most probable trees, best first (``TreeCRF.kbest``, exact; fewer when a
  sentence has fewer trees). Rank 1 is the CRF's maximum spanning tree: the normal output unless
  the decoder changes it (projective decoding, the punct/cc re-attachment ``attach_to_units``,
  the UD punct rule's non-crossing attachment of PUNCT words), as these are not properties of
  the distribution.
- ``samples=K, seed=S``: K exact samples per sentence (``TreeCRF.sample``). Each sentence draws
  from its own generator, seeded from ``(S, its 0-based position in the input)``, on its own
  (unpadded) scores: the samples do not depend on the batching (``tokens_per_batch``, chunks)
  nor on the other sentences.
- constraints: the trees (best, k best, samples, and the marginals of ``confidence``) are those
  of the restricted distribution, and probabilities are conditional on the constraints. A
  constrained sentence's best tree is the restricted CRF's maximum spanning tree (no projective
  decoding, punct/cc re-attachment or UD punct attachment: they could break the given arcs);
  unconstrained sentences are decoded as usual. A sentence whose constraints admit no tree gets no tree and
  an error message (``SentenceTrees.error``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from parser.data.batching import encode_all
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.inference.columns import dictionary_tags, layer_columns
from parser.inference.confidence import SentenceConfidence, batch_confidence
from parser.inference.fixed_arcs import ArcConstraints, constrain_output
from parser.inference.parse import model_outputs
from parser.models.parser_model import ParserModel
from parser.structs import ParserOutput, TreeCRF

__all__ = ["SentenceTrees", "Tree", "parse_alternatives", "sentence_seed"]


@dataclass(frozen=True)
class Tree:
    """One tree of a sentence: ``heads`` (0 = ROOT), ``deprels`` (None when the model has no
    relations), ``log_prob`` (of the heads, under the possibly restricted CRF) and the
    ``confidence`` of its arcs when asked for."""

    heads: list[int]
    deprels: list[str | None]
    log_prob: float
    confidence: SentenceConfidence | None = None


@dataclass(frozen=True)
class SentenceTrees:
    """The trees of one sentence (best first for k-best, in draw order for samples, one tree
    otherwise); ``error``: why its constraints admit no tree (then ``trees`` is empty);
    ``upos``: the parser's own tags when it predicts them; ``columns``: the columns its
    token-level layers predict (the same for every tree: the layers do not read the tree)."""

    trees: list[Tree]
    error: str | None = None
    upos: list[str] | None = None
    columns: dict[str, list[str | None]] = field(default_factory=dict)


def sentence_seed(seed: int, position: int) -> int:
    """The seed of the sentence at 0-based ``position`` of the input for ``samples=, seed=``.

    >>> sentence_seed(0, 1) == sentence_seed(0, 1) != sentence_seed(1, 0)
    True
    """
    digest = hashlib.sha256(f"{int(seed)}/{int(position)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@torch.no_grad()
def parse_alternatives(
    model: ParserModel,
    sentences: Sequence[Sentence],
    vocabs: Vocabularies,
    *,
    tokens_per_batch: int,
    cells_per_batch: int | None = None,
    device: torch.device | str = "cpu",
    kbest: int = 0,
    samples: int = 0,
    seed: int = 0,
    constraints: Sequence[ArcConstraints | None] | None = None,
    confidence: bool = False,
    first_position: int = 0,
) -> list[SentenceTrees]:
    """Per sentence, in input order: its ``kbest`` best trees, or ``samples`` sampled trees, or
    (neither) its best tree, under ``constraints`` (one per sentence, None: none). ``confidence``:
    each tree's marginals (:mod:`parser.inference.confidence`). ``first_position``: the input
    position of ``sentences[0]`` (a chunk of a longer file), which seeds the samples."""
    if kbest < 0 or samples < 0:
        raise ValueError(f"kbest={kbest}, samples={samples}: expected integers >= 0")
    if kbest and samples:
        raise ValueError(f"kbest={kbest} and samples={samples}: choose one")
    sentences = list(sentences)
    if constraints is not None and len(constraints) != len(sentences):
        raise ValueError(f"constraints: {len(constraints)} for {len(sentences)} sentences")
    encoded = encode_all(sentences, vocabs, layer_targets=False, trees=False)
    result: list[SentenceTrees | None] = [None] * len(sentences)
    for batch, out in model_outputs(model, encoded, tokens_per_batch=tokens_per_batch,
                                    cells_per_batch=cells_per_batch, device=device):
        index = batch.index.tolist()
        out = dictionary_tags(out, batch, vocabs, sentences)
        free = out  # unconstrained: what the decoder's best tree reads
        problems: list[str | None] = [None] * len(index)
        constrained = torch.zeros(len(index), dtype=torch.bool, device=batch.lengths.device)
        if constraints is not None:
            rows = [constraints[i] for i in index]
            out, problems = constrain_output(out, rows, vocabs)
            constrained = torch.tensor([bool(c) for c in rows], device=batch.lengths.device)
        if kbest:
            heads, valid = _kbest(out.dist, kbest)
        elif samples:
            heads = _samples(out.dist, samples, [sentence_seed(seed, first_position + i)
                                                  for i in index])
            valid = torch.ones(heads.shape[:2], dtype=torch.bool, device=heads.device)
        else:
            heads = _best(model, free, out, batch.upos, constrained)[None]
            valid = torch.ones(heads.shape[:2], dtype=torch.bool, device=heads.device)
        ranks = [_tree_rows(model, out, heads[r], valid[r], vocabs, upos=batch.upos,
                            confidence=confidence)
                 for r in range(heads.shape[0])]
        own = getattr(out, "upos", None)
        own_tags = None if own is None else own.tolist()
        columns = layer_columns(out, batch, vocabs, sentences)
        for b, (i, n) in enumerate(zip(index, batch.lengths.tolist())):
            tags = None if own_tags is None else [vocabs.upos.tokens[t] for t in own_tags[b][1 : n + 1]]
            if problems[b] is not None:
                result[i] = SentenceTrees([], error=problems[b], upos=tags, columns=columns[i])
                continue
            kept = constraints[i].labels if constraints is not None and constraints[i] else {}
            trees = [_with_relations(rank[b], kept) for rank in ranks if rank[b] is not None]
            result[i] = SentenceTrees(trees, upos=tags, columns=columns[i])
    return result


def _with_relations(tree: Tree, kept: dict[int, str]) -> Tree:
    """``tree`` with the given relations of its fixed arcs (``ArcConstraints.labels``)."""
    if not kept:
        return tree
    deprels = [kept.get(dep, rel) for dep, rel in enumerate(tree.deprels, start=1)]
    return replace(tree, deprels=deprels)


def _best(model: ParserModel, free: ParserOutput, out: ParserOutput, upos: Tensor,
          constrained: Tensor) -> Tensor:
    """``[B, N+1]``: the decoder's best trees of the unconstrained output ``free``, except on
    constrained rows the maximum spanning tree of ``out``, the restricted CRF. (The decoder on the
    restricted rows could find no tree: its punct rule also forbids PUNCT roots.)"""
    heads, _ = model.decoder.decode(free, upos=upos)
    if not bool(constrained.any()):
        return heads
    best = out.dist.argmax()
    best = best[0] if isinstance(best, tuple) else best
    return torch.where(constrained[:, None], best, heads)


def _arc_crf(dist: TreeCRF) -> TreeCRF:
    """The distribution over heads alone (relations summed out for a labeled CRF)."""
    if not isinstance(dist, TreeCRF):
        raise NotImplementedError(f"k-best trees and samples need the non-projective tree CRF; "
                                  f"this model's distribution is {type(dist).__name__} (model.crf)")
    if not dist.labeled:
        return dist
    return TreeCRF(dist.arc_scores, dist.lengths, single_root=dist.single_root)


def _kbest(dist: TreeCRF, k: int) -> tuple[Tensor, Tensor]:
    """``(heads [k, B, N+1], valid [k, B])``: the k best trees, rank 1's tree on invalid ranks."""
    heads = _arc_crf(dist).kbest(k).heads
    valid = heads[:, :, 0] >= 0
    return torch.where(valid[..., None], heads, heads[:1]), valid


def _samples(dist: TreeCRF, n: int, seeds: Sequence[int]) -> Tensor:
    """``[n, B, N+1]``: n samples per sentence, each sentence from its own generator and its own
    unpadded scores, so that the draws do not depend on the batch."""
    arc = _arc_crf(dist)
    scores = arc.arc_scores
    heads = torch.zeros(n, *scores.shape[:2], dtype=torch.long, device=scores.device)
    for b, (length, seed) in enumerate(zip(dist.lengths.tolist(), seeds)):
        one = TreeCRF(scores[b : b + 1, : length + 1, : length + 1], dist.lengths[b : b + 1],
                      single_root=dist.single_root)
        generator = torch.Generator(device=scores.device).manual_seed(seed)
        heads[:, b, : length + 1] = one.sample(n, generator=generator)[:, 0]
    return heads


def _tree_rows(model: ParserModel, out: ParserOutput, heads: Tensor, valid: Tensor,
               vocabs: Vocabularies, *, upos: Tensor, confidence: bool) -> list[Tree | None]:
    """One :class:`Tree` per row of ``heads [B, N+1]`` (None where not ``valid``); ``upos``:
    the batch's tags, for the UD punct rule's relations."""
    rels = model.decoder.relations(out, heads, upos=upos)
    log_prob = out.dist.log_prob(heads).tolist()
    sure = batch_confidence(out, heads, rels) if confidence else None
    # Python lists once per batch, not per sentence.
    all_heads, all_rels, names = heads.tolist(), None if rels is None else rels.tolist(), vocabs.rels.tokens
    trees: list[Tree | None] = []
    for b, (n, ok) in enumerate(zip(out.dist.lengths.tolist(), valid.tolist())):
        if not ok:
            trees.append(None)
            continue
        deprels = [None] * n if all_rels is None else [names[r] for r in all_rels[b][1 : n + 1]]
        trees.append(Tree(all_heads[b][1 : n + 1], deprels, log_prob[b],
                          None if sure is None else sure[b]))
    return trees
