"""Estimated-target GE constraints (issue 19): targets and confidences measured on the labeled
trees of the run, not rounded.

For a constraint feature ``f`` (a written constraint of a set, or a generated template), on the
labeled trees: ``n_f`` = the annotated words ``f`` constrains (its normaliser), ``c_f`` = those whose
gold head fires ``f``. Its target is the smoothed proportion

    t_f = (c_f + alpha * prior_f) / (n_f + alpha)

with ``alpha`` = ``smoothing`` and ``prior_f`` the written target (a set's constraint) or
``prior`` (0.5; a template). With ``alpha = 1`` and prior 0.5 it is the Krichevsky-Trofimov
estimator ``(c + 1/2) / (n + 1)``. Its weight, the factor on its divergence in the GE loss, is
(``confidence="count"``)

    w_f = n_f / (n_f + kappa)

Bühlmann's credibility factor (Bühlmann 1967: the weight of the mean of ``n`` observations against
a prior worth ``kappa`` of them): near 1 for a well supported feature, near 0 for a rare one, and
bounded, so the GE term keeps the scale of a written set whatever the labeled size. (The inverse
binomial variance ``n_f / (t_f (1 - t_f))`` grows with ``n`` and has no bound at ``t`` in {0, 1}: the
GE weight tuned per arm would then mean something else at each labeled size.)
``confidence="none"``: every weight 1.

Templates, Druck, Mann & McCallum (2009)'s feature family: "a word of UPOS ``c`` attaches to a head
of UPOS ``p`` in direction ``d``" (``left``: the head precedes the word; ``right``; parent ROOT has
no direction), the target its proportion among the annotated ``c`` words. A template is kept when
at least ``min_count`` labeled words attach that way (its support); ranked by support, then name.

Estimated constraints are two-sided (``bound: equal``: a measured proportion, not a guideline's
inequality). A ``consistent`` (harmony) constraint has no target and is kept as written. A set's
constraint with no annotated child word in the labeled trees has nothing to be estimated from and
is dropped. Words whose UPOS is missing or outside the vocabulary are no child of any feature.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from parser.constraints.features import ConstraintSet
from parser.constraints.spec import ROOT, UPOS_TAGS, Constraint, ConstraintSpecError

__all__ = [
    "CONFIDENCES",
    "FEATURES",
    "EstimateOptions",
    "estimated_constraints",
    "gold_counts",
    "template_constraints",
]

FEATURES = ("set", "templates", "both")
CONFIDENCES = ("count", "none")
_UNKNOWN = "_"  # the UPOS of a word without one: no spec tag matches it


@dataclass(frozen=True)
class EstimateOptions:
    """How targets are estimated (see the module docstring).

    features:   ``set`` (the written set's constraints), ``templates`` or ``both``.
    smoothing:  ``alpha`` >= 0, the prior's weight in words.
    min_count:  a template's least support (labeled words attaching that way), >= 1.
    confidence: ``count`` (``n / (n + kappa)``) or ``none`` (weight 1).
    kappa:      >= 0, the count at which a feature's weight is 1/2.
    prior:      a template's prior target, in [0, 1].
    """

    features: str = "set"
    smoothing: float = 1.0
    min_count: int = 10
    confidence: str = "count"
    kappa: float = 10.0
    prior: float = 0.5

    def __post_init__(self) -> None:
        if self.features not in FEATURES:
            raise ValueError(f"estimated targets: features must be one of {FEATURES}, got {self.features!r}")
        if self.confidence not in CONFIDENCES:
            raise ValueError(f"estimated targets: confidence must be one of {CONFIDENCES}, got {self.confidence!r}")
        if not self.smoothing >= 0 or not self.kappa >= 0:
            raise ValueError(f"estimated targets: smoothing and kappa must be >= 0, got {self.smoothing}, {self.kappa}")
        if isinstance(self.min_count, bool) or not isinstance(self.min_count, int) or self.min_count < 1:
            raise ValueError(f"estimated targets: min_count must be an integer >= 1, got {self.min_count!r}")
        if not 0.0 <= self.prior <= 1.0:
            raise ValueError(f"estimated targets: prior must be in [0, 1], got {self.prior}")


def _tag_names(tags: Sequence, upos_names: Sequence[str] | None, *, sentence: int) -> list[str]:
    """UPOS as names (ids looked up in ``upos_names``; None stays unknown)."""
    names = []
    for tag in tags:
        if tag is None or isinstance(tag, str):
            names.append(_UNKNOWN if tag is None else tag)
            continue
        if upos_names is None or not 0 <= int(tag) < len(upos_names):
            raise ValueError(f"estimated targets: sentence {sentence}: UPOS id {tag} has no name in upos_names")
        names.append(upos_names[int(tag)])
    return names


def _sentences(heads: Sequence[Sequence[int]], upos: Sequence[Sequence], upos_names: Sequence[str] | None):
    """Validated ``(heads, tag names)`` per sentence."""
    if len(heads) != len(upos):
        raise ValueError(f"estimated targets: {len(heads)} head lists but {len(upos)} UPOS lists")
    if not heads:
        raise ConstraintSpecError("estimated targets: no labeled sentences to estimate from")
    rows = []
    for s, (sentence_heads, sentence_upos) in enumerate(zip(heads, upos)):
        tags = _tag_names(sentence_upos, upos_names, sentence=s)
        sentence_heads = [int(h) for h in sentence_heads]
        if len(tags) != len(sentence_heads):
            raise ValueError(f"estimated targets: sentence {s} has {len(sentence_heads)} heads but {len(tags)} UPOS tags")
        for dep, head in enumerate(sentence_heads, start=1):
            if head != -1 and (not 0 <= head <= len(tags) or head == dep):
                raise ValueError(f"estimated targets: sentence {s}, word {dep}: head {head} out of range")
        rows.append((sentence_heads, tags))
    return rows


def gold_counts(
    constraints: Sequence[Constraint],
    heads: Sequence[Sequence[int]],
    upos: Sequence[Sequence[str | int | None]],
    *,
    upos_names: Sequence[str],
) -> tuple[Tensor, Tensor]:
    """``([K] c, [K] n)`` float64: for each constraint, the annotated words it constrains whose
    gold head fires it, and the annotated words it constrains (the normaliser), over the labeled
    sentences. ``heads``/``upos`` as in ``oracle_constraints`` (UPOS as names, ids into
    ``upos_names``, or None). Counted with the GE features themselves (``ConstraintSet``), so that
    a target means what the model's proportion means."""
    rows = _sentences(heads, upos, upos_names)
    names = (*upos_names, _UNKNOWN)
    ids = {name: i for i, name in enumerate(upos_names)}
    features = ConstraintSet(constraints, names, source="estimated targets")
    width = max(len(tags) for _, tags in rows) + 1
    upos_ids = torch.full((len(rows), width), len(upos_names), dtype=torch.long)
    gold = torch.full((len(rows), width), -1, dtype=torch.long)  # [B, dep] gold head, -1: none
    for b, (sentence_heads, tags) in enumerate(rows):
        upos_ids[b, 1 : len(tags) + 1] = torch.tensor([ids.get(t, len(upos_names)) for t in tags], dtype=torch.long)
        gold[b, 1 : len(tags) + 1] = torch.tensor(sentence_heads, dtype=torch.long)
    lengths = torch.tensor([len(tags) for _, tags in rows])
    batch = features.features(upos_ids, lengths)
    words = (features.children(upos_ids, lengths) & (gold >= 0)).sum((1, 2)).to(torch.float64)  # [F]
    b, dep, head = batch.arc_index.unbind(1)
    fired = torch.zeros(batch.n_features, dtype=torch.float64)
    fired.index_add_(0, batch.feature_ids, (gold[b, dep] == head).to(torch.float64))
    if batch.has_pairs:  # second order: both arcs of the pair are gold
        first, second = batch.pair_first.unbind(1), batch.pair_second.unbind(1)
        both = (gold[first[0], first[1]] == first[2]) & (gold[second[0], second[1]] == second[2])
        fired.index_add_(0, batch.pair_feature_ids, both.to(torch.float64))
    k = len(features)
    return fired[:k], words[:k]


def template_constraints(
    heads: Sequence[Sequence[int]],
    upos: Sequence[Sequence[str | int | None]],
    *,
    min_count: int,
    upos_names: Sequence[str] | None = None,
    prior: float = 0.5,
) -> tuple[Constraint, ...]:
    """The (parent UPOS or ROOT, child UPOS, direction) templates that at least ``min_count``
    annotated words of the labeled sentences instantiate, most supported first (ties by name),
    each with target ``prior`` (``estimated_constraints`` measures the real one)."""
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"templates: min_count must be an integer >= 1, got {min_count!r}")
    support: Counter[tuple[str, str, str]] = Counter()
    for sentence_heads, tags in _sentences(heads, upos, upos_names):
        for dep, head in enumerate(sentence_heads, start=1):
            child = tags[dep - 1]
            if head == -1 or child not in UPOS_TAGS:
                continue
            if head == 0:
                support[(ROOT, child, "any")] += 1
            elif tags[head - 1] in UPOS_TAGS:
                support[(tags[head - 1], child, "left" if head < dep else "right")] += 1
    kept = sorted((item for item in support.items() if item[1] >= min_count), key=lambda item: (-item[1], item[0]))
    templates = []
    for (parent, child, direction), _ in kept:
        template = Constraint((child,), (parent,), prior, direction)
        templates.append(replace(template, name=template.describe()))
    return tuple(templates)


def estimated_constraints(
    base: Sequence[Constraint],
    heads: Sequence[Sequence[int]],
    upos: Sequence[Sequence[str | int | None]],
    *,
    options: EstimateOptions,
    upos_names: Sequence[str],
) -> tuple[Constraint, ...]:
    """The constraints of ``options.features`` (``base``, a written set's; the templates; or both,
    a template named like a base constraint left out) with targets and weights estimated from the
    labeled sentences ``heads``/``upos`` (module docstring)."""
    candidates: list[tuple[Constraint, float | None]] = []
    if options.features in ("set", "both"):
        if not base:
            raise ValueError(f"estimated targets: features={options.features!r} needs a constraint set")
        candidates += [(c, c.target) for c in base]
    if options.features in ("templates", "both"):
        taken = {c.name for c, _ in candidates}
        templates = template_constraints(
            heads, upos, min_count=options.min_count, upos_names=upos_names, prior=options.prior
        )
        candidates += [(t, options.prior) for t in templates if t.name not in taken]
    estimable = [c for c, _ in candidates if not c.consistent]
    fired, words = gold_counts(estimable, heads, upos, upos_names=upos_names) if estimable else ((), ())
    counts = iter(zip(fired, words))
    estimated = []
    for constraint, prior in candidates:
        if constraint.consistent:
            estimated.append(constraint)
            continue
        c, n = (float(x) for x in next(counts))
        if n == 0:
            continue
        alpha = options.smoothing
        target = (c + alpha * prior) / (n + alpha)
        weight = n / (n + options.kappa) if options.confidence == "count" else 1.0
        new = replace(constraint, target=target, bound="equal", weight=weight)
        if constraint.name == constraint.describe():  # a generated name follows the bound
            new = replace(new, name=new.describe())
        estimated.append(new)
    if not estimated:
        raise ConstraintSpecError(
            f"estimated targets (features={options.features!r}): no constraint has a child word in "
            f"the labeled trees{'' if options.features == 'set' else f' or a template {options.min_count} of them support'}"
        )
    return tuple(estimated)
