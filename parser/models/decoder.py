"""How a trained parser's scores become trees: the one place that owns the decoding policy.

A :class:`Decoder` holds the decoder choice (maximum spanning tree, or the best projective tree
with ``projective``; an Eisner fallback for the UD punct rule), the UD rules
(:mod:`parser.models.ud_rules`: label masks on the scores, per-head relation limits, the punct
rule), the punct/cc re-attachment (``unit_tags``) and the calibration temperatures. The model
scores; :meth:`Decoder.scores` turns its edge scores into the ones a prediction reads,
:meth:`Decoder.decode` gives best trees and :meth:`Decoder.relations` the relations of any tree.
Fixed and forbidden arcs restrict the distribution built from these scores
(:mod:`parser.inference.fixed_arcs`).

It sits beside the model (not in :mod:`parser.inference`) because training reads it too: the
trainer's dev scores and the KL term's ``tree=decoder`` teacher decode with it
(:mod:`parser.objectives.kl`), and both are below the inference layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from parser.models.edge_scores import EdgeScores
from parser.models.ud_rules import UDRules, choose_relations, constrain
from parser.structs import (
    ParserOutput,
    attach_punct_projectively,
    attach_to_units,
    divided_label_at,
    eisner,
)
from parser.structs.common import word_mask

__all__ = ["N_SPECIAL_RELS", "Decoder", "tempered"]

N_SPECIAL_RELS = 3  # relation ids 0..2 (PAD, UNK, ROOT) are never gold: never predicted


@dataclass(frozen=True)
class Decoder:
    """The decoding options of a parser (``model.projective``, ``model.attach_to_units`` as UPOS
    ids, ``model.ud_rules`` and the temperatures a ``parser-calibrate`` fit stored); ``labels``:
    the model's label mode (``joint`` or ``classifier``), which the UD label masks depend on.
    Frozen: an override is ``dataclasses.replace(decoder, projective=True)``."""

    labels: str = "classifier"
    projective: bool = False
    unit_tags: tuple[int, ...] = ()
    ud_rules: UDRules | None = None
    arc_temperature: float = 1.0
    label_temperature: float = 1.0
    # False: labels scored on the decoded (and asked-for) arcs only, not on the [B, dep, head,
    # L] grid (model.label_grid); the UD label masks then leave the arc scores as they are
    label_grid: bool = True

    def scores(self, edge_scores: EdgeScores) -> EdgeScores:
        """The scores a trained parser predicts from: masked by the UD rules (so that the argmax,
        marginals, k-best trees and samples obey them), then divided by the calibration
        temperatures (:func:`tempered`)."""
        constrained = constrain(edge_scores, self.ud_rules, labels=self.labels)
        return tempered(constrained, arc_temperature=self.arc_temperature,
                        label_temperature=self.label_temperature)

    @torch.no_grad()
    def decode(self, out: ParserOutput, upos: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Best trees: ``heads`` ``[B, dep]`` and ``rels`` ``[B, dep]`` (``None`` if unlabeled).

        The tree is the maximum spanning tree, or the best projective one when
        ``projective``; then the words whose UPOS (``upos [B, N+1]``; the model's own tags
        when it predicts them) is one of ``unit_tags`` are re-attached by the UD punct/cc rule
        (:func:`parser.structs.attach_to_units`), and with the UD punct rule the PUNCT words
        are attached without crossing arcs (:func:`parser.structs.attach_punct_projectively`;
        unless ``unit_tags`` names PUNCT: the guidelines' position is then kept).
        Relations: :meth:`relations`.
        """
        if getattr(out, "upos", None) is not None:
            upos = out.upos  # the model's own tags (TaggedOutput)
        punct = self._punct_words(upos)
        dist = out.dist
        if punct is not None:  # the root word is not punctuation (unless every word is)
            lone = (punct | ~word_mask(dist.lengths, punct.shape[1])).all(1)
            no_root = torch.zeros_like(dist.arc_mask)
            no_root[..., 0] = punct & ~lone[:, None]
            dist = dist.restrict(~no_root)
        best = dist.argmax(projective=self.projective)
        heads = best[0] if isinstance(best, tuple) else best
        lengths = dist.lengths
        if self.unit_tags:
            if upos is None:
                raise ValueError("Decoder.decode: attach_to_units needs the batch's UPOS (upos=)")
            marked = torch.isin(upos, torch.tensor(self.unit_tags, device=upos.device))
            heads = attach_to_units(heads, lengths, marked)
        if punct is not None and self.ud_rules.punct_tag not in self.unit_tags:
            # (attach_to_units naming PUNCT: the guidelines' position, asked for, is kept.)
            # The scores the argmax maximises (joint labels: each arc's best label), so that a
            # temperature, which rescales them, cannot change the tree.
            arc_scores = dist.labeled_scores.amax(-1) if getattr(dist, "labeled", False) else dist.arc_scores
            heads, stuck = attach_punct_projectively(heads, lengths, punct, arc_scores)
            if bool(stuck.any()) and not self.projective:
                # A mark in the gap of crossing arcs has no valid head: those sentences (only
                # they: Eisner is O(N^3) per sentence) get the best projective tree by the scores
                # the argmax maximises, where one always exists.
                rows = stuck.nonzero().squeeze(1)
                projective = eisner(arc_scores[rows], lengths[rows], single_root=dist.single_root)
                again, _ = attach_punct_projectively(projective, lengths[rows], punct[rows], arc_scores[rows])
                heads = heads.index_copy(0, rows, again)
        return heads, self.relations(out, heads, upos=upos)

    def _punct_words(self, upos: Tensor | None) -> Tensor | None:
        """``[B, N+1]`` the words the UD punct rule treats as punctuation (None: rule off)."""
        rules = self.ud_rules
        if rules is None or rules.punct_tag is None or upos is None:
            return None
        return upos == rules.punct_tag

    @torch.no_grad()
    def relations(self, out: ParserOutput, heads: Tensor, *, upos: Tensor | None = None) -> Tensor | None:
        """Relations ``[B, N+1]`` of the trees ``heads`` (None for an unlabeled model): each word's
        best relation on its arc (a classifier's best non-special one), except that the UD rules'
        one-subject / one-object limits choose each head's relations jointly
        (:func:`parser.models.ud_rules.choose_relations`) and their punct rule gives ``punct`` to
        the words tagged PUNCT (``upos``, or the model's own tags) and to no other word."""
        dist = out.dist
        on_arc = out.labels_on(heads)  # a classifier's, [B, dep, L]
        if on_arc is None and getattr(dist, "labeled", False):
            scores = dist.labeled_scores
            index = heads.clamp(min=0)[..., None, None].expand(*heads.shape, 1, scores.shape[-1])
            on_arc = scores.gather(2, index).squeeze(2)
        if on_arc is None:
            return None
        on_arc = on_arc.clone()
        on_arc[..., :N_SPECIAL_RELS] = float("-inf")
        punct = self._punct_words(out.upos if getattr(out, "upos", None) is not None else upos)
        if punct is not None:  # (a punctuation mark alone in its sentence stays its root)
            punct = punct & (heads != 0)
            is_punct = torch.arange(on_arc.shape[-1], device=on_arc.device) == self.ud_rules.punct_rel
            on_arc = on_arc.masked_fill(punct[..., None] != is_punct, float("-inf"))
        words = word_mask(dist.lengths, heads.shape[1])
        chosen = choose_relations(on_arc, heads, words, self.ud_rules)
        return chosen.masked_fill(~words, 0)


def tempered(edge_scores: EdgeScores, *, arc_temperature: float, label_temperature: float) -> EdgeScores:
    """``edge_scores`` with arcs divided by ``arc_temperature`` and relation scores by
    ``label_temperature`` (:mod:`parser.inference.calibration` fits both on dev).

    Applied after the UD rules' masks, so a classifier's arc scores already carry the log of
    their allowed relations' probability: dividing them by T > 0 scales every arc alike, so the
    maximum spanning tree (and the best projective tree) are unchanged and only the marginals
    move. A joint model is calibrated with one temperature for both (its labeled scores are
    ``arcs + labels``: equal temperatures scale them alike; unequal ones would change its trees).
    """
    for name, value in (("arc_temperature", arc_temperature), ("label_temperature", label_temperature)):
        if not value > 0 or value == float("inf"):
            raise ValueError(f"{name}={value}: a temperature must be a positive finite number")
    if arc_temperature == 1.0 and label_temperature == 1.0:
        return edge_scores
    labels, label_at = edge_scores.labels, edge_scores.label_at
    return replace(edge_scores, arcs=edge_scores.arcs / arc_temperature,
                   labels=None if labels is None else labels / label_temperature,
                   label_at=None if label_at is None else divided_label_at(label_at, label_temperature))

