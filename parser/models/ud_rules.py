"""UD-valid trees by construction: rules of the UD validator (level 3) that a decoder can obey.

- ``root``: the relation ``root`` iff the head is 0 (validator: ``0-is-not-root``,
  ``root-is-not-0``);
- ``left_to_right``: ``conj``, ``flat``, ``fixed``, ``appos`` and ``goeswith`` (with any subtype)
  never go from a head on the right to a dependent on its left (``right-to-left-*``);
- ``one_subject`` / ``one_object``: at most one subject (``nsubj``/``csubj`` and subtypes, except
  ``:outer``) and at most one ``obj`` per head (``too-many-subjects``, ``too-many-objects``). The
  validator enforces both on every released treebank, so a UD training set never has more;
- ``punct``: words tagged PUNCT (the model's own tags, or the input's) take the relation
  ``punct`` and no other word does (``rel-upos-punct``, ``upos-rel-punct``), and are attached
  without crossing arcs, to their best head among those the validator allows
  (:mod:`parser.structs.decoding.punct_attachment`; ``punct-is-nonproj``,
  ``punct-causes-nonproj``).

The first two are masks on the labels of an arc (:meth:`UDRules.allowed`). They are applied to the
scores before the tree distribution is built (:func:`constrain`), so the argmax, the marginals,
k-best trees and samples all respect them: with a label classifier (Dozat & Manning) the arc
``h -> d`` keeps the weight of its allowed labels only, ``s(h, d) + log sum_{l allowed} p(l | h,
d)``, the distribution of the joint model conditioned on valid labels. The per-head limits tie
the labels of siblings, so they are not arc factored: given a tree, the labels of each head's
dependents are chosen jointly and exactly (:func:`choose_relations`). The punct rule reads the
predicted tags, which are not part of the tree distribution: it applies to the decoded tree (and
to k-best trees and samples through :meth:`ParserModel.relations`), not to the marginals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import torch
from torch import Tensor

from parser.data.vocab import Vocab
from parser.models.edge_scores import EdgeScores

__all__ = ["LEFT_TO_RIGHT", "RULES", "UDRules", "choose_relations", "constrain", "parse_rules"]

RULES = ("root", "left_to_right", "one_subject", "one_object", "punct")
LEFT_TO_RIGHT = ("conj", "flat", "fixed", "appos", "goeswith")
FIRST_REAL = 3  # relation ids 0..2 (PAD, UNK, ROOT) are never a word's relation
GRID_BLOCK = 1 << 20  # elements of the label grid that constrain() handles at a time (4 MB)


def parse_rules(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """``all`` / ``none`` / a comma list (or a list) of :data:`RULES` -> the rule names.

    >>> parse_rules("all") == RULES, parse_rules("none"), parse_rules("root,one_object")
    (True, (), ('root', 'one_object'))
    """
    if value is None:
        return RULES
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [str(name).strip() for name in names if str(name).strip()]
    if names in (["all"], ["true"]):
        return RULES
    if names in ([], ["none"], ["false"]):
        return ()
    unknown = [name for name in names if name not in RULES]
    if unknown:
        raise ValueError(f"ud_rules: {unknown} unknown; expected all, none or some of {', '.join(RULES)}")
    return tuple(name for name in RULES if name in names)


def _udeprel(name: str) -> str:
    return name.split(":", 1)[0]


@dataclass(frozen=True)
class UDRules:
    """The rules of a relation vocabulary: ids of ``root``, of the left-to-right relations, of the
    subjects and objects limited to one per head, of the relation ``punct`` and the UPOS ``PUNCT``
    (None / empty: that rule is off)."""

    root: int | None
    left_to_right: tuple[int, ...]
    subjects: tuple[int, ...]
    objects: tuple[int, ...]
    punct_rel: int | None = None
    punct_tag: int | None = None

    @classmethod
    def from_vocab(cls, rels: Vocab, names: Sequence[str] = RULES, *, upos: Vocab | None = None,
                   ) -> UDRules | None:
        """The rules ``names`` over ``rels`` (and ``upos``, for the punct rule); None when none
        applies (no rule, or a relation set without UD's relations)."""
        tokens = list(rels.tokens)
        ids = range(FIRST_REAL, len(tokens))
        punct = ("punct" in names and "punct" in tokens and upos is not None
                 and "PUNCT" in upos.tokens)
        rules = cls(
            root=tokens.index("root") if "root" in names and "root" in tokens else None,
            left_to_right=tuple(i for i in ids if "left_to_right" in names
                                and _udeprel(tokens[i]) in LEFT_TO_RIGHT),
            subjects=tuple(i for i in ids if "one_subject" in names and _udeprel(tokens[i]) in
                           ("nsubj", "csubj") and not tokens[i].endswith(":outer")),
            objects=tuple(i for i in ids if "one_object" in names and _udeprel(tokens[i]) == "obj"),
            punct_rel=tokens.index("punct") if punct else None,
            punct_tag=upos.index("PUNCT") if punct else None,
        )
        empty = rules.root is None and rules.punct_rel is None and not (
            rules.left_to_right or rules.subjects or rules.objects)
        return None if empty else rules

    @property
    def masks_labels(self) -> bool:
        return self.root is not None or bool(self.left_to_right)

    def allowed(self, size: int, n_rels: int, device: torch.device | str = "cpu") -> Tensor:
        """``[size, size, n_rels]`` bool: relation ``l`` allowed on the arc ``head -> dep`` at
        ``[dep, head, l]``. The special ids (PAD, UNK, ROOT) are never allowed."""
        allowed = torch.ones(size, size, n_rels, dtype=torch.bool, device=device)
        allowed[..., :FIRST_REAL] = False
        position = torch.arange(size, device=device)
        if self.root is not None:
            from_root = position[None, :] == 0  # [dep, head]
            allowed[..., self.root] = from_root
            allowed &= ~from_root[..., None] | (torch.arange(n_rels, device=device) == self.root)
        if self.left_to_right:
            leftward = position[None, :] > position[:, None]  # head right of its dependent
            ids = torch.tensor(self.left_to_right, device=device)
            allowed[..., ids] &= ~leftward[..., None]
        return allowed


def constrain(edge_scores: EdgeScores, rules: UDRules | None, *, labels: str) -> EdgeScores:
    """``edge_scores`` with the label masks of ``rules`` applied (see the module docstring):
    disallowed relations at -inf and, for a label classifier (``labels="classifier"``), each arc's
    score plus the log of its allowed relations' probability (-inf when none is allowed).
    Unchanged without label rules or relation scores."""
    rel_scores = edge_scores.labels
    if rules is None or not rules.masks_labels or (rel_scores is None and edge_scores.label_at is None):
        return edge_scores
    if rel_scores is None:
        # Labels scored on the asked arcs only (model.label_grid=false): masked there; the arcs
        # keep their scores, the classifier's mass on disallowed relations is not taken out.
        return replace(edge_scores, label_at=partial(_masked_at, edge_scores.label_at, rules))
    allowed = rules.allowed(rel_scores.shape[1], rel_scores.shape[-1], rel_scores.device)
    if torch.is_grad_enabled():
        masked = rel_scores.masked_fill(~allowed, float("-inf"))
        arcs = edge_scores.arcs
        if labels == "classifier":
            real = rel_scores[..., FIRST_REAL:]
            log_kept = (masked[..., FIRST_REAL:].logsumexp(-1) - real.logsumexp(-1))
            arcs = arcs + log_kept
        return replace(edge_scores, arcs=arcs, labels=masked)
    # Without autograd (prediction): the same operations a few sentences at a time, so that each
    # block of the [B, dep, head, L] grid is masked and reduced while in cache (the same bits).
    # Contiguous, as masked_fill's result: the reductions then run in the same order.
    masked = torch.empty(rel_scores.shape, dtype=rel_scores.dtype, device=rel_scores.device)
    log_kept = edge_scores.arcs.new_empty(edge_scores.arcs.shape) if labels == "classifier" else None
    size, excluded = rel_scores.shape[1], rel_scores.new_tensor(float("-inf"))
    step = max(1, GRID_BLOCK // (size * size * rel_scores.shape[-1]))
    for start in range(0, rel_scores.shape[0], step):
        rows = slice(start, start + step)
        torch.where(allowed, rel_scores[rows], excluded, out=masked[rows])
        if log_kept is not None:
            torch.sub(masked[rows, ..., FIRST_REAL:].logsumexp(-1),
                      rel_scores[rows, ..., FIRST_REAL:].logsumexp(-1), out=log_kept[rows])
    arcs = edge_scores.arcs if log_kept is None else edge_scores.arcs + log_kept
    return replace(edge_scores, arcs=arcs, labels=masked)


def _masked_at(label_at: Callable[[Tensor], Tensor], rules: UDRules, heads: Tensor) -> Tensor:
    """``label_at(heads)`` ``[B, dep, L]`` with the relations ``rules`` disallow on those arcs at
    -inf (the grid's masks, read at ``heads``)."""
    scores = label_at(heads)
    allowed = rules.allowed(heads.shape[1], scores.shape[-1], scores.device)  # [dep, head, L]
    on_arcs = allowed[torch.arange(heads.shape[1], device=heads.device)[None, :], heads]
    return scores.masked_fill(~on_arcs, float("-inf"))


def choose_relations(label_scores: Tensor, heads: Tensor, words: Tensor, rules: UDRules | None) -> Tensor:
    """Relations ``[B, N+1]`` of the tree ``heads [B, N+1]``: each word's best relation, except that
    each head gets at most one of ``rules.subjects`` and one of ``rules.objects``, chosen jointly
    and exactly for the highest total score.

    label_scores: ``[B, N+1, L]`` each word's relation scores on its arc in ``heads`` (log
    probabilities or logits; -inf where not allowed); words: ``[B, N+1]`` bool.

    Exact: every other word takes its best relation outside both sets; then one word per head may
    switch to its best subject (gain g_s >= 0), another to its best object (g_o), so the best
    choice is among the two highest gains of each kind per head.
    """
    best = label_scores.argmax(-1)
    if rules is None or not (rules.subjects or rules.objects):
        return best
    n_rels = label_scores.shape[-1]
    kinds = torch.zeros(n_rels, dtype=torch.long, device=label_scores.device)
    kinds[list(rules.subjects)] = 1
    kinds[list(rules.objects)] = 2
    neg = torch.finfo(label_scores.dtype).min

    def best_of(kind: int) -> tuple[Tensor, Tensor]:
        masked = label_scores.masked_fill(kinds != kind, neg)
        value, index = masked.max(-1)
        return value, index

    base_value, base_label = best_of(0)
    chosen = base_label
    size = heads.shape[1]
    own = (heads[:, :, None] == torch.arange(size, device=heads.device)) & words[:, :, None]  # [B, dep, head]
    gains, picks = [], []
    for kind, ids in ((1, rules.subjects), (2, rules.objects)):
        value, label = best_of(kind)
        gain = torch.where(words & bool(ids), value - base_value, torch.full_like(value, neg))
        per_head = torch.where(own, gain[:, :, None], torch.full_like(own, neg, dtype=gain.dtype))
        top = per_head.topk(min(2, size), dim=1)  # [B, 2, head]: the two best dependents
        gains.append((top.values, top.indices))
        picks.append(label)
    (gs, ds), (go, do) = gains
    zero = torch.zeros_like(gs[:, 0])
    positive = lambda v: torch.where(v > 0, v, zero)  # a gain not taken is 0
    s1, o1 = positive(gs[:, 0]), positive(go[:, 0])
    clash = (ds[:, 0] == do[:, 0]) & (s1 > 0) & (o1 > 0)
    s2 = positive(gs[:, 1]) if size > 1 else zero
    o2 = positive(go[:, 1]) if size > 1 else zero
    # Under a clash, the better of (best subject, second object) and (second subject, best object).
    subject_first = s1 + o2 >= s2 + o1
    take_s = torch.where(clash & ~subject_first, s2 > 0, s1 > 0)
    take_o = torch.where(clash & subject_first, o2 > 0, o1 > 0)
    dep_s = torch.where(clash & ~subject_first, ds[:, 1 % size], ds[:, 0])
    dep_o = torch.where(clash & subject_first, do[:, 1 % size], do[:, 0])
    for take, dep, label in ((take_s, dep_s, picks[0]), (take_o, dep_o, picks[1])):
        # Scatter the choice of each head onto its dependent: a word is chosen when its head's
        # pick is this word.
        picked = torch.zeros_like(words)
        picked.scatter_(1, torch.where(take, dep, 0), take)
        picked &= words
        chosen = torch.where(picked, label, chosen)
    # A word whose only allowed relations are subjects/objects keeps its best (nothing else fits).
    stuck = words & (base_value <= neg)
    return torch.where(stuck, best, chosen)
