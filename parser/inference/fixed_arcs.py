"""Fixed and forbidden arcs at prediction time: the model's tree CRF conditioned on trees that
contain some arcs (``parser-predict keep_heads=given``: the heads the input already has; the API's
``required=``) and avoid others (``forbidden=``), through :meth:`TreeCRF.restrict`.

Per sentence an :class:`ArcConstraints` holds ``(dep, head)`` pairs (word ids 1..n, head 0 is
ROOT). The mask given to ``restrict`` is ``allowed[b, dep, head]``: a word with a required head
may take only that head, a forbidden arc is never allowed. A set that admits no tree is found
exactly, first from the arcs alone (:func:`structural_problem`: out of range, self-loop, two heads
for a word, several roots under the root constraint, a cycle, an arc both required and
forbidden), then from the model: the restricted CRF's log Z is -inf (every tree with those arcs
has a -inf score, e.g. under the UD rules of :mod:`parser.models.ud_rules`). Such a sentence is
left unconstrained in the tensors (so that decoding the batch never fails) and reported by the
caller (:mod:`parser.inference.alternatives`).

Relations: a required arc may carry the input's relation (``labels``). When the model knows it
and allows it on that arc, it is fixed in the scores, so that the model's other relations (the
one-subject / one-object limits) are chosen around it; the writer keeps the given relation in
any case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import torch
from torch import Tensor

from parser.data.conllu_io import Sentence
from parser.data.validate import find_cycle
from parser.data.vocab import Vocabularies
from parser.models.decoder import N_SPECIAL_RELS
from parser.structs import ParserOutput, TreeCRF
from parser.structs.common import NEG_INF

__all__ = ["ArcConstraints", "constrain_output", "given_heads", "structural_problem"]


@dataclass(frozen=True)
class ArcConstraints:
    """Arcs every tree of one sentence must contain (``required``) or avoid (``forbidden``), as
    ``(dep, head)`` pairs; ``labels``: the relation name kept on a required arc, by dependent."""

    required: frozenset[tuple[int, int]] = frozenset()
    forbidden: frozenset[tuple[int, int]] = frozenset()
    labels: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, *, required=(), forbidden=()) -> ArcConstraints:
        """From iterables of ``(dep, head)`` pairs (the API's ``required=`` / ``forbidden=``)."""
        return cls(frozenset(_pairs(required, "required")), frozenset(_pairs(forbidden, "forbidden")))

    @property
    def required_heads(self) -> dict[int, int]:
        return dict(sorted(self.required))

    def __bool__(self) -> bool:
        return bool(self.required or self.forbidden)


def _pairs(pairs, name: str) -> list[tuple[int, int]]:
    result = []
    for pair in pairs:
        try:
            dep, head = pair
        except (TypeError, ValueError):
            raise ValueError(f"{name}: {pair!r} is not a (dep, head) pair") from None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (dep, head)):
            raise ValueError(f"{name}: {pair!r} is not a pair of integer word ids")
        result.append((dep, head))
    return result


def given_heads(sentence: Sentence) -> ArcConstraints:
    """``keep_heads=given``: every annotated HEAD of ``sentence`` required, with its DEPREL."""
    required = frozenset((dep, head) for dep, head in enumerate(sentence.heads, start=1) if head >= 0)
    labels = {dep: rel for (dep, _), rel in
              ((pair, sentence.deprels[pair[0] - 1]) for pair in required) if rel is not None}
    return ArcConstraints(required=required, labels=labels)


def structural_problem(constraints: ArcConstraints, n: int, *, single_root: bool) -> str | None:
    """Why no tree of ``n`` words contains the required arcs and avoids the forbidden ones, as
    far as the arcs alone tell (naming the words), or None.

    >>> structural_problem(ArcConstraints.of(required=[(1, 2), (2, 1)]), 3, single_root=True)
    'the given heads form a cycle: words 1 -> 2 -> 1'
    >>> structural_problem(ArcConstraints.of(required=[(1, 0), (3, 0)]), 3, single_root=True)
    'words 1, 3 are all given head 0 (ROOT) but a tree has one root'
    """
    for dep, head in sorted(constraints.required | constraints.forbidden):
        if not 1 <= dep <= n or not 0 <= head <= n:
            return f"word {dep}: head {head} out of range (the sentence has {n} words)"
    for dep, head in sorted(constraints.required):
        if dep == head:
            return f"word {dep}: given itself as head"
    heads: dict[int, list[int]] = {}
    for dep, head in sorted(constraints.required):
        heads.setdefault(dep, []).append(head)
    for dep, options in heads.items():
        if len(options) > 1:
            return f"word {dep}: several required heads {options}"
    both = sorted(constraints.required & constraints.forbidden)
    if both:
        return f"word {both[0][0]}: head {both[0][1]} both required and forbidden"
    roots = [dep for dep, options in heads.items() if options[0] == 0]
    if single_root and len(roots) > 1:
        return f"words {', '.join(map(str, roots))} are all given head 0 (ROOT) but a tree has one root"
    cycle = find_cycle([heads.get(dep, [-1])[0] for dep in range(1, n + 1)])
    if cycle:
        return f"the given heads form a cycle: words {' -> '.join(map(str, [*cycle, cycle[0]]))}"
    return None


def allowed_arcs(constraints: Sequence[ArcConstraints | None], size: int, *,
                 device: torch.device) -> Tensor:
    """``[B, dep, head]`` bool: True where an arc is allowed (all True for None)."""
    allowed = torch.ones(len(constraints), size, size, dtype=torch.bool)
    fixed = [(b, d, h) for b, c in enumerate(constraints) if c for d, h in c.required]
    banned = [(b, d, h) for b, c in enumerate(constraints) if c for d, h in c.forbidden]
    if fixed:
        b, d, h = torch.tensor(fixed).T
        allowed[b, d] = False
        allowed[b, d, h] = True
    if banned:
        b, d, h = torch.tensor(banned).T
        allowed[b, d, h] = False
    return allowed.to(device)


def required_labels(constraints: Sequence[ArcConstraints | None], vocabs: Vocabularies,
                    size: int, *, device: torch.device) -> Tensor:
    """``[B, dep]`` long: the id of each required arc's given relation; -1 where none, or where
    the model does not know it."""
    labels = torch.full((len(constraints), size), -1, dtype=torch.long)
    for b, c in enumerate(constraints):
        for dep, name in (c.labels.items() if c else ()):
            rel = vocabs.rels.index(name)
            if rel >= N_SPECIAL_RELS:
                labels[b, dep] = rel
    return labels.to(device)


def constrain_output(out: ParserOutput, constraints: Sequence[ArcConstraints | None],
                     vocabs: Vocabularies) -> tuple[ParserOutput, list[str | None]]:
    """``(out restricted to the constraints, problems)``: ``problems[b]`` is None, or why row
    ``b`` admits no tree (that row is then left unconstrained in the returned output).
    ``constraints`` has one entry per row of the batch (None: unconstrained)."""
    dist = out.dist
    if not isinstance(dist, TreeCRF):
        raise NotImplementedError(f"fixed or forbidden arcs need the non-projective tree CRF; this "
                                  f"model's distribution is {type(dist).__name__} (model.crf)")
    lengths = dist.lengths.tolist()
    problems = [None if not c else structural_problem(c, n, single_root=dist.single_root)
                for c, n in zip(constraints, lengths)]
    usable = [None if p else c for c, p in zip(constraints, problems)]
    restricted = _restricted(out, usable, vocabs)
    no_tree = torch.isneginf(restricted.dist.log_partition).tolist()
    for b, (c, empty) in enumerate(zip(usable, no_tree)):
        if c and empty:
            words = ", ".join(str(dep) for dep in sorted({d for d, _ in c.required | c.forbidden}))
            problems[b] = (f"the model allows no tree with the given arcs of words {words} (its UD "
                           "rules, or the forbidden arcs, exclude every such tree)")
    if any(c and p for c, p in zip(usable, problems)):
        restricted = _restricted(out, [None if p else c for c, p in zip(usable, problems)], vocabs)
    return restricted, problems


def _restricted(out: ParserOutput, constraints: Sequence[ArcConstraints | None],
                vocabs: Vocabularies) -> ParserOutput:
    dist = out.dist
    size = dist.scores.shape[1]
    allowed = allowed_arcs(constraints, size, device=dist.scores.device)
    labels = required_labels(constraints, vocabs, size, device=dist.scores.device)
    fixed = labels >= 0  # [B, dep]
    if not dist.labeled:
        label_scores, label_at = out.label_scores, out.label_at
        if bool(fixed.any()):
            if label_scores is not None:
                label_scores = _only_label(label_scores, labels, fixed)
            if label_at is not None:
                label_at = partial(_only_label_at, label_at, labels, fixed)
        return replace(out, dist=dist.restrict(allowed), label_scores=label_scores, label_at=label_at)
    scores = _only_label(dist.scores, labels, fixed)
    scores = scores.masked_fill(~allowed[..., None], NEG_INF)
    return replace(out, dist=TreeCRF(scores, dist.lengths, single_root=dist.single_root))


def _only_label_at(label_at: Callable[[Tensor], Tensor], labels: Tensor, fixed: Tensor,
                   heads: Tensor) -> Tensor:
    """:func:`_only_label` on the arcs of ``heads`` only (``ParserOutput.label_at``)."""
    return _only_label(label_at(heads)[:, :, None, :], labels, fixed)[:, :, 0, :]


def _only_label(scores: Tensor, labels: Tensor, fixed: Tensor) -> Tensor:
    """``scores [B, dep, head, L]`` with every relation but ``labels[b, dep]`` at -inf for the
    words where ``fixed``, on the arcs where that relation is allowed (finite)."""
    rel = labels.clamp(min=0)[:, :, None, None].expand(*labels.shape, scores.shape[2], 1)
    finite = torch.isfinite(scores.gather(3, rel))  # [B, dep, head, 1]
    others = torch.arange(scores.shape[-1], device=scores.device) != rel
    return scores.masked_fill(fixed[:, :, None, None] & finite & others, NEG_INF)
