"""Entropy, cross-entropy, KL and log-probabilities of :class:`parser.structs.TreeCRF` exact at
any score scale (the plain formulas are in :mod:`.crf`; this module takes over where they lose).

The plain formulas subtract quantities of the size of the scores (``H = log Z - E[score]``): at
|score| ~ 1e20 the float64 rounding of each is ~1e4 nats and the difference is noise. Sentences
whose scores are that large (:func:`needs_exact`) take two exact routes, in order:

1. Centred scores. Subtracting a constant from every arc (and label) score of one dependent shifts
   every tree's score by the same amount: the distribution is unchanged. With each dependent's best
   arc at 0 (``t <= 0``), ``E[t]`` is a sum of terms of one sign and ``log Z(t)`` lies between the
   best tree's ``t`` and log #trees, so nothing cancels unless the best tree's ``t`` is itself
   large. Each value comes with a bound on its rounding (the trust tolerance on each marginal and
   log Z, :data:`.laplacian.TOLERANCE`, plus a few ulps per term, over the terms that carry mass);
   it is kept where the bound is within :data:`REL` of the value.
2. Few trees. Where the centred values still cancel (each word's best head forms a cycle, so the
   best tree's centred score is huge), the distribution is in float64 that of the k best trees
   (:func:`parser.structs.decoding.kbest.k_best_trees`) once the next tree is more than
   :data:`GAP` nats (plus log #trees) below the best: every further tree's probability is below
   float64's smallest number. Score differences to the best tree are exactly rounded sums of the
   raw scores (``math.fsum``), and every quantity is a sum over those trees.

Labeled scores in a lower precision at ordinary scales take the plain formulas on a float64
copy (the log-sum-exp over labels in float32 alone is off by 1e-7 per nat of score).

A sentence neither route resolves is a ValueError naming it, never a wrong number; so is a value
that the input dtype cannot hold.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["cross_entropy", "entropy", "kl", "log_prob64", "needs_exact"]

# The plain formulas' rounding, eps * (N + 1) * max |score|, is at most this many nats there.
PLAIN_ROUNDING = 1e-10
REL = 1e-7  # a centred value is kept where its rounding bound is within this fraction of it
K_BEST = 16  # trees tried by the few-trees route
GAP = 746.0  # exp(-GAP) is below float64's smallest subnormal number (4.9e-324)
EPS64 = torch.finfo(torch.float64).eps


def _extent(crf) -> float:
    """The largest |score| over the finite scores."""
    low = crf._highest - crf._span
    if math.isfinite(low):
        return max(abs(crf._highest), abs(low))
    finite = torch.nan_to_num(crf.scores.detach(), neginf=0.0, posinf=0.0)  # -inf arcs, no tree
    return float(finite.abs().max()) if finite.numel() else 0.0


def needs_exact(crf) -> bool:
    """True when the plain formulas' rounding on ``crf``'s scores may exceed
    :data:`PLAIN_ROUNDING` (float64; labeled scores' log-sum-exp over labels: the input dtype)."""
    eps = torch.finfo(crf.scores.dtype).eps if crf.labeled else EPS64
    return _extent(crf) * crf.scores.shape[1] * eps > PLAIN_ROUNDING


def _plain64(crf):
    """``crf`` over float64 scores where the plain formulas are exact in float64 (labeled
    lower-precision input at ordinary scales), else None."""
    if crf.scores.dtype == torch.float64 or not (
            _extent(crf) * crf.scores.shape[1] * EPS64 <= PLAIN_ROUNDING):
        return None
    twin = crf.__dict__.get("_plain64")
    if twin is None:
        twin = crf.__dict__["_plain64"] = type(crf)(crf.scores.to(torch.float64), crf.lengths,
                                                    single_root=crf.single_root)
    return twin


# ----------------------------------------------------------------- route 1: centred scores
def _centred(crf) -> tuple[Tensor, object]:
    """``(t, crf over t)``: float64 masked scores minus each dependent's best (arc, label) score."""
    cached = crf.__dict__.get("_centred_pair")
    if cached is not None:
        return cached
    masked = (crf.labeled_scores if crf.labeled else crf.arc_scores).to(torch.float64)
    dims = (2, 3) if crf.labeled else (2,)
    best = masked.detach().amax(dims, keepdim=True)
    t = masked - torch.where(torch.isfinite(best), best, torch.zeros_like(best))
    pair = crf.__dict__["_centred_pair"] = (t, type(crf)(t, crf.lengths, single_root=crf.single_root))
    return pair


def _mass(crf) -> Tensor:
    """Marginals with the shape of the scores, float64 (labeled: arc x label)."""
    marginals = crf._partition[1]
    if crf.labeled:
        marginals = marginals[..., None] * crf._label_probs.to(torch.float64)
    return marginals


def _bound(crf, *, log_z: list[Tensor], spread: Tensor, mass: Tensor) -> Tensor:
    """``[B]`` rounding bound of ``sum log_z - sum mass * spread``: the trust tolerance on each
    marginal (and log Z) plus a few ulps per term, over the arcs with mass."""
    per = crf._tolerance + 16 * crf.scores.shape[1] * EPS64
    carried = torch.where(mass > 0, spread.abs(), torch.zeros_like(spread)).flatten(1).sum(-1)
    sizes = sum(z.abs() for z in log_z)
    return per * (carried + sizes)


def _cleared(value: Tensor, bound: Tensor, crf) -> Tensor:
    """``value`` (>= 0 exactly) with 0 where it is below 0 by at most its rounding bound (plus a
    few ulps of the O(1) sums)."""
    slack = bound + 16 * crf.scores.shape[1] * EPS64
    return torch.where((value < 0) & (-value <= slack), torch.zeros_like(value), value)


def _zeroed(t: Tensor) -> Tensor:
    return torch.nan_to_num(t, neginf=0.0)


def _kept(value: Tensor, bound: Tensor) -> Tensor:
    """``[B]`` bool: the centred value is within :data:`REL` of exact (or its bound is 0)."""
    return (bound <= REL * value.abs()).detach() | (bound == 0)


# ----------------------------------------------------------------- route 2: few trees
class _FewTrees:
    """The k best (labeled) trees of each sentence; ``log_p[b]`` their exact log-probabilities,
    or None where the last of them is not :data:`GAP` (plus log #trees) below the best."""

    def __init__(self, crf) -> None:
        self.crf = crf
        self.heads, self.labels, _ = crf.kbest(K_BEST)
        self.raw = (crf.labeled_scores if crf.labeled else crf.arc_scores).detach().to(torch.float64)
        n_labels = crf.scores.shape[-1] if crf.labeled else 1
        self.log_p: list[list[float] | None] = []
        self.reference: dict[int, tuple[list[float], float]] = {}  # b: (rank 0's arc scores, -log Z)
        for b in range(crf.scores.shape[0]):
            n = int(crf.lengths[b])
            first = self._values(b, self.heads[0, b].tolist(), self._labels(0, b))
            diffs = [math.fsum(self._values(b, self.heads[k, b].tolist(), self._labels(k, b))
                               + [-v for v in first])
                     for k in range(K_BEST) if int(self.heads[k, b, 1]) >= 0]
            top = max(diffs, default=-math.inf)
            count = n * math.log(n + 1) + n * math.log(n_labels)  # log #(labeled) trees, above
            if not math.isfinite(top) or (len(diffs) == K_BEST and diffs[-1] - top > -(GAP + count)):
                self.log_p.append(None)
                continue
            log_z = top + math.log(math.fsum(math.exp(d - top) for d in diffs))
            self.log_p.append([d - log_z for d in diffs])
            self.reference[b] = (first, log_z)

    def _labels(self, k: int, b: int) -> list[int] | None:
        return self.labels[k, b].tolist() if self.labels is not None else None

    def _values(self, b: int, heads: list[int], labels: list[int] | None) -> list[float]:
        """The raw score of each word's arc (labeled without labels: its best label's)."""
        raw, n = self.raw[b], int(self.crf.lengths[b])
        if not self.crf.labeled:
            return [float(raw[d, heads[d]]) for d in range(1, n + 1)]
        if labels is None:
            return [float(raw[d, heads[d]].max()) for d in range(1, n + 1)]
        return [float(raw[d, heads[d], labels[d]]) for d in range(1, n + 1)]

    def log_prob(self, b: int, heads: list[int], labels: list[int] | None) -> float:
        """Exact log p of one tree of a resolved sentence ``b`` (a labeled CRF's tree without
        labels: summed over its labelings)."""
        first, log_z = self.reference[b]
        value = math.fsum(self._values(b, heads, labels) + [-v for v in first]) - log_z
        if self.crf.labeled and labels is None:  # + sum_d log sum_l exp(s_l - max_l s_l)
            rows = self.raw[b, torch.arange(1, int(self.crf.lengths[b]) + 1), torch.tensor(heads[1:][:int(self.crf.lengths[b])])]
            value += float(torch.logsumexp(rows - rows.amax(-1, keepdim=True), -1).sum())
        return value


def _few(crf) -> _FewTrees:
    few = crf.__dict__.get("_few_trees")
    if few is None:
        few = crf.__dict__["_few_trees"] = _FewTrees(crf)
    return few


def _resolve(crf, value: Tensor, kept: Tensor, what: str, per_sentence) -> Tensor:
    """``value`` where ``kept``; elsewhere the few-trees route's ``per_sentence(few, b)``, or a
    ValueError naming the sentence."""
    if bool(kept.all()):
        return value
    if crf._has_graph:
        b = int((~kept).nonzero()[0, 0])
        raise ValueError(f"{what} of sentence {b}: scores up to |{crf._highest:g}| are too large for an "
                         "exact value with a gradient; scale them down")
    few = _few(crf)
    value = value.detach().clone()
    for b in (~kept).nonzero().squeeze(1).tolist():
        exact = per_sentence(few, b) if few.log_p[b] is not None else None
        if exact is None:
            raise ValueError(f"{what} of sentence {b}: no exact value in float64 at this score scale "
                             f"(scores up to |{crf._highest:g}|, the best trees closer than {GAP:g} nats "
                             f"beyond the {K_BEST} best); scale the scores down")
        value[b] = exact
    return value


def _in_dtype(value: Tensor, dtype: torch.dtype, what: str) -> Tensor:
    """``value`` in ``dtype``; a ValueError where a finite value does not fit it."""
    out = value.to(dtype)
    bad = torch.isinf(out) & torch.isfinite(value)
    if bool(bad.any()):
        b = int(bad.nonzero()[0, 0])
        raise ValueError(f"{what} of sentence {b} = {float(value[b]):g} is beyond {dtype}'s range")
    return out


# ----------------------------------------------------------------- the quantities
def entropy(crf) -> Tensor:
    """``[B]`` Shannon entropy in the input dtype (see the module docstring)."""
    if (twin := _plain64(crf)) is not None:
        return twin.entropy().to(crf.scores.dtype)
    t, centred = _centred(crf)
    mass = _mass(centred)
    log_z = centred._log_z64()
    value = log_z - (mass * _zeroed(t)).flatten(1).sum(-1)
    bound = _bound(centred, log_z=[log_z], spread=_zeroed(t), mass=mass)
    value = _cleared(value, bound, crf)

    def exact(few, b):
        return -math.fsum(math.exp(lp) * lp for lp in few.log_p[b])
    value = _resolve(crf, value, _kept(value, bound), "entropy", exact)
    return _in_dtype(value, crf.scores.dtype, "entropy")


def log_prob64(crf, heads: Tensor, labels: Tensor | None) -> Tensor:
    """``[B]`` float64 log p(heads[, labels]) exactly (see the module docstring)."""
    if (twin := _plain64(crf)) is not None:
        return twin.log_prob(heads, labels)
    _, centred = _centred(crf)
    score = centred._score64(heads, labels)
    log_z = centred._log_z64()
    value = score - log_z
    # The LU's log Z is within the trust tolerance (absolute); the sums, a few ulps each.
    bound = centred._tolerance + 16 * crf.scores.shape[1] * EPS64 * (score.abs() + log_z.abs())
    value = torch.where((value > 0) & (value <= bound), torch.zeros_like(value), value)
    # An absolute error e in log p is a relative error e in p: within REL of p is exact.
    kept = (bound <= REL) | torch.isneginf(value)
    rows, label_rows = heads.tolist(), labels.tolist() if labels is not None else None

    def exact(few, b):
        return few.log_prob(b, rows[b], label_rows[b] if label_rows is not None else None)
    return _resolve(crf, value, kept, "log_prob", exact)


def _few_expectation(crf, other, combine) -> object:
    """``per_sentence(few, b)``: sum over ``crf``'s few trees of p * combine(log p, log q)."""
    few = _few(crf)
    ranks = []
    for k in range(K_BEST):
        heads = few.heads[k].clamp(min=0)
        labels = few.labels[k].clamp(min=0) if few.labels is not None else None
        heads = torch.where(few.heads[k] >= 0, heads, few.heads[0])
        if labels is not None:
            labels = torch.where(few.labels[k] >= 0, labels, few.labels[0])
        ranks.append(log_prob64(other, heads, labels).tolist())

    def exact(few, b):
        terms = [math.exp(lp) * combine(lp, ranks[k][b]) for k, lp in enumerate(few.log_p[b])
                 if math.exp(lp) > 0]
        return math.fsum(terms)
    return exact


def cross_entropy(crf, other, forbid) -> Tensor:
    """``[B]`` -E_crf[log other] exactly; ``forbid(value, marginals, other_scores)`` puts inf
    where ``crf`` has mass on arcs ``other`` forbids."""
    if (mine := _plain64(crf)) is not None and (theirs := _plain64(other)) is not None:
        return mine.cross_entropy(theirs).to(crf.scores.dtype)
    t_q, centred_q = _centred(other)
    mass = _mass(_centred(crf)[1])
    log_z = centred_q._log_z64()
    value = log_z - (mass * _zeroed(t_q)).flatten(1).sum(-1)
    bound = _bound(centred_q, log_z=[log_z], spread=_zeroed(t_q), mass=mass)
    value = _cleared(value, bound, crf)
    value = forbid(value, mass, t_q)
    kept = _kept(value, bound) | torch.isinf(value)
    if not bool(kept.all()):
        value = _resolve(crf, value, kept, "cross_entropy", _few_expectation(crf, other, lambda lp, lq: -lq))
    return _in_dtype(value, crf.scores.dtype, "cross_entropy")


def kl(crf, other, forbid) -> Tensor:
    """``[B]`` KL(crf || other) exactly; ``forbid`` as for :func:`cross_entropy`."""
    if (mine := _plain64(crf)) is not None and (theirs := _plain64(other)) is not None:
        return mine.kl(theirs).to(crf.scores.dtype)
    if other is crf:  # (exactly 0; the bound of 0 could not certify it)
        return crf.scores.new_zeros(crf.scores.shape[0])
    t_p, centred_p = _centred(crf)
    t_q, centred_q = _centred(other)
    mass = _mass(centred_p)
    log_zp, log_zq = centred_p._log_z64(), centred_q._log_z64()
    spread = _zeroed(t_p) - _zeroed(t_q)
    value = log_zq - log_zp + (mass * spread).flatten(1).sum(-1)
    bound = _bound(centred_p, log_z=[log_zp, log_zq], spread=spread, mass=mass)
    value = _cleared(value, bound, crf)
    value = forbid(value, mass, t_q)
    kept = _kept(value, bound) | torch.isinf(value)
    if not bool(kept.all()):
        value = _resolve(crf, value, kept, "kl", _few_expectation(crf, other, lambda lp, lq: lp - lq))
    return _in_dtype(value, crf.scores.dtype, "kl")
