"""Generalized expectation (Druck, Mann & McCallum 2009): make the model's expected proportions
of constrained attachments match target proportions.

For constraint ``k`` (see ``parser.constraints``) the model value is
``m_k = E[# arcs firing k] / # words with a child UPOS of k``, the expectations from the CRF's
sparse first-order ``expect`` (exact gradient by autograd, Zmigrod et al. 2021), or for a
second-order constraint (``grandparent``) from the pairwise marginals of its arc pairs
(``TreeCRF.arc_pair_marginals``, equally exact and differentiable), summed over the
batch (``aggregate="batch"``) or over the corpus (``"corpus"``), kept one of two ways (``corpus``):
``"running"`` (default; ``parser.objectives.ge_running``), two ``[K]`` vectors of decayed totals of
every batch seen so far plus the batch's live values, bounded whatever the corpus size; or
``"cache"`` (``parser.objectives.ge_cache``), the exact sum over every unlabeled sentence seen so
far from detached per-sentence vectors indexed by ``batch.index``, the current batch's entries
replaced by their live values, linear in the corpus. The loss compares ``m`` with the targets ``t`` over the constraints that have
at least one child word: ``sum_k (t_k - m_k)^2`` (``criterion="squared"``, Druck et al.) or
``sum_k KL(Bernoulli(t_k) || Bernoulli(m_k))`` (``"kl"``). A one-sided constraint (``bound:
lower`` or ``upper``) contributes only while it is violated (``m_k < t_k``, resp. ``m_k > t_k``):
an inequality, as in posterior regularisation (Naseem et al. 2010); both criteria have zero slope
at ``m_k = t_k``, so the penalty is smooth there. It is a sum over constraints, not a per-word
quantity: proportions are already normalised.

A ``direction: consistent`` constraint (word-order harmony, no target) adds, per child tag ``t``
(or once for all its tags when pooled), a penalty on ``q = E[left arcs] / E[left + right arcs]``
over the aggregate, i.e. ``p_L / (p_L + p_R)`` with the common normaliser ``# t-words`` cancelled:
the binary entropy ``H(q) = -q log q - (1 - q) log(1 - q)`` in nats (``kl``: at most ``log 2``,
the scale of one KL constraint; 0 exactly when every arc goes one way) or ``q (1 - q)``
(``squared``: at most 1/4, the squared criterion's scale; it is the squared error of a Bernoulli
side against its own mean, as the entropy is its log loss). Both are symmetric in the two sides, so the data pick the direction;
both have zero slope at ``q = 1/2`` (a tie is not pushed either way) and are exactly 0 at ``q`` in
``{0, 1}``, where the entropy's slope is taken as 0 (its one-sided limit is infinite). A group is
active when it has a child word and some expected left or right arc. A constraint's ``weight``
multiplies its groups' penalties.

Under data parallelism ``WeightedSum`` calls ``across_ranks``: the per-sentence expectations and
counts are summed over ranks (a differentiable all-reduce) before the divergence, so every rank
holds the loss of the global batch, and the corpus cache (or the running totals) is updated with
every rank's sentences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from parser.objectives.base import Output, ParserOutput, Ranks
from parser.objectives.ge_cache import ExpectationCache
from parser.objectives.ge_running import RunningTotals
from parser.objectives.registry import Resources, register

if TYPE_CHECKING:
    from parser.constraints import ConstraintSet
    from parser.data.batch import Batch

CRITERIA = ("squared", "kl")
AGGREGATES = ("batch", "corpus")
CORPORA = ("running", "cache")
TARGETS = ("given", "estimated")


@dataclass(frozen=True)
class GEAggregate:
    """Totals over the aggregate (batch or corpus), float64.

    expected: ``[K]`` expected number of firing arcs (live: carries the gradient).
    counts:   ``[K]`` number of child words (the normalisers).
    """

    expected: Tensor
    counts: Tensor


@dataclass(frozen=True)
class GEOptions:
    """The options of a ``ge`` term: ``criterion``, ``aggregate``, ``corpus``, ``decay``, ``eps``
    (see ``GeneralizedExpectation``), and the constraint set the trainer loads and passes as
    ``constraints=``: ``constraints`` (a set name or YAML file, ``oracle`` from the labeled trees)
    and ``top_k`` (an oracle set's size). ``targets: estimated`` re-estimates the targets on the
    run's labeled trees, unrounded, each constraint weighted by a confidence
    (``parser.constraints.estimated``), over ``features``: ``set`` (the set's constraints),
    ``templates`` (parent UPOS, child UPOS, direction, kept from ``min_count`` supporting words)
    or ``both``; ``smoothing`` (alpha: the prior's weight in words), ``confidence`` (``count``:
    ``n / (n + kappa)``; ``none``) and ``kappa``. ``targets: given`` (default) uses the set's
    written targets."""

    criterion: str = "squared"
    aggregate: str = "batch"
    corpus: str = "running"
    decay: float = 0.99
    eps: float = 1e-6
    constraints: str = "ud_universal"
    top_k: int = 20
    targets: str = "given"
    features: str = "set"
    smoothing: float = 1.0
    min_count: int = 10
    confidence: str = "count"
    kappa: float = 10.0

    def __post_init__(self) -> None:
        if self.targets not in TARGETS:
            raise ValueError(f"ge: targets must be one of {TARGETS}, got {self.targets!r}")
        # The estimator's choices (parser.constraints.estimated), checked when the config is
        # resolved rather than after the data are read.
        if self.features not in ("set", "templates", "both"):
            raise ValueError(f"ge: features must be one of ('set', 'templates', 'both'), got {self.features!r}")
        if self.confidence not in ("count", "none"):
            raise ValueError(f"ge: confidence must be one of ('count', 'none'), got {self.confidence!r}")
        if self.targets == "given" and self.features != "set":
            raise ValueError(f"ge: features={self.features!r} needs targets=estimated (templates have no written target)")
        if self.targets == "estimated" and self.constraints == "oracle":
            raise ValueError("ge: targets=estimated re-estimates a written set; 'oracle' is estimated already")


@register("ge", stream="unlabeled", per_token=False, needs=("upos", "constraints"), options=GEOptions)
@dataclass(frozen=True)
class GeneralizedExpectation:
    """GE criterion over ``constraints`` (a ``parser.constraints.ConstraintSet``).

    criterion: ``"squared"`` or ``"kl"``; aggregate: ``"batch"`` or ``"corpus"``; corpus (how
    ``aggregate="corpus"`` keeps the corpus): ``"running"`` (totals decayed by ``decay`` per batch,
    in ``running``) or ``"cache"`` (exact, per sentence, in ``cache``); ``eps`` keeps the model
    proportions inside ``[eps, 1 - eps]`` for the KL. ``cache`` and ``running`` are mutable state
    (saved by ``state_dict()``).
    Logs ``loss``, ``mean_abs_error`` (mean |t - m| over active constraints; 0 for a satisfied
    one-sided constraint; ``min(q, 1 - q)`` for a consistency group) and ``active`` (constraints
    plus consistency groups), and, with consistency groups, ``consistency`` (their penalty sum).
    """

    constraints: ConstraintSet
    criterion: str = "squared"
    aggregate: str = "batch"
    corpus: str = "running"
    decay: float = 0.99
    eps: float = 1e-6
    cache: ExpectationCache = field(default_factory=ExpectationCache, compare=False, repr=False)
    running: RunningTotals = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"GeneralizedExpectation: criterion must be one of {CRITERIA}, got {self.criterion!r}")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"GeneralizedExpectation: aggregate must be one of {AGGREGATES}, got {self.aggregate!r}")
        if self.corpus not in CORPORA:
            raise ValueError(f"GeneralizedExpectation: corpus must be one of {CORPORA}, got {self.corpus!r}")
        if not 0 < self.eps < 0.5:
            raise ValueError(f"GeneralizedExpectation: eps must be in (0, 0.5), got {self.eps}")
        object.__setattr__(self, "running", RunningTotals(decay=self.decay))

    @classmethod
    def from_options(cls, options: GEOptions, resources: Resources) -> GeneralizedExpectation:
        return cls(
            resources.constraints, criterion=options.criterion, aggregate=options.aggregate,
            corpus=options.corpus, decay=options.decay, eps=options.eps,
        )

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        result = self.loss_of(self.aggregate_of(out, batch))
        return Output(result.loss.to(out.dist.scores.dtype), result.logs)

    def across_ranks(self, out: ParserOutput, batch: Batch, ranks: Ranks) -> Output:
        """The loss of the global batch (``aggregate="batch"``) or of the corpus seen so far by all
        ranks (``"corpus"``), the same on every rank: this rank's expectations summed over ranks
        (with autograd) before the divergence; the corpus cache or running totals, identical on
        every rank, take every rank's sentences."""
        expected, counts = self.sentence_expectations(out, batch)  # [B_r, K]
        live_expected, live_counts = ranks.sum(expected.sum(0)), ranks.sum(counts.sum(0))
        if self.aggregate == "batch":
            aggregate = GEAggregate(live_expected, live_counts)
        elif self.corpus == "running":
            aggregate = GEAggregate(*self.running.fold(live_expected, live_counts))
        else:
            if batch.index is None:
                raise ValueError("GeneralizedExpectation(aggregate='corpus') needs batch.index (sentence ids)")
            index, rows_expected, rows_counts = ranks.gather_rows(
                batch.index.to(expected.device), expected.detach(), counts
            )
            # Totals outside the global batch from the cache, plus the batch's live sum.
            zeros = torch.zeros_like(rows_expected)
            cached_expected, cached_counts = self.cache.corpus_totals(index, zeros, zeros)
            self.cache.update(index, rows_expected, rows_counts)
            aggregate = GEAggregate(cached_expected + live_expected, cached_counts + live_counts)
        result = self.loss_of(aggregate)
        return Output(result.loss.to(out.dist.scores.dtype), result.logs)

    def state_dict(self) -> dict[str, dict]:
        """The mutable state (the corpus cache and the running totals) for a checkpoint."""
        return {"cache": self.cache.state_dict(), "running": self.running.state_dict()}

    def load_state_dict(self, state: dict[str, dict]) -> None:
        """Restore :meth:`state_dict`'s output. A checkpoint from before the running totals
        (no ``running`` entry) resumes a ``corpus="running"`` term only if it never used them."""
        if "cache" not in state:
            raise ValueError(f"GeneralizedExpectation.load_state_dict: no 'cache' entry in {sorted(state)}")
        if "running" not in state and self.aggregate == "corpus" and self.corpus == "running":
            raise ValueError(
                "GeneralizedExpectation.load_state_dict: the checkpoint has the exact corpus cache but no "
                "running totals; resume it with objective.terms.<ge term>.corpus=cache"
            )
        self.cache.load_state_dict(state["cache"])
        if "running" in state:
            self.running.load_state_dict(state["running"])

    def sentence_expectations(self, out: ParserOutput, batch: Batch) -> tuple[Tensor, Tensor]:
        """``([B, K] expected firing arcs, [B, K] child-word counts)`` of each sentence, float64."""
        dist = out.dist
        features = self.constraints.features(batch.upos, batch.lengths)
        expected = dist.expect_sparse(
            features.arc_index, features.feature_ids, features.values.to(dist.scores.dtype), features.n_features
        ).to(torch.float64)
        if features.has_pairs:  # second-order constraints: sums of pairwise marginals
            if not hasattr(dist, "arc_pair_marginals"):
                raise ValueError(
                    f"GeneralizedExpectation: second-order constraints ({self.constraints.source}) need "
                    f"pairwise marginals, which {type(dist).__name__} does not give (use model.crf=matrix_tree)"
                )
            both = dist.arc_pair_marginals(features.pair_first, features.pair_second).to(torch.float64)
            flat = features.pair_first[:, 0] * features.n_features + features.pair_feature_ids
            expected = expected.reshape(-1).index_add(0, flat, both).reshape(expected.shape)
        return expected, features.counts.to(torch.float64)

    def aggregate_of(self, out: ParserOutput, batch: Batch) -> GEAggregate:
        """Totals over the batch, or over the corpus (updating the cache or the running totals
        with this batch)."""
        expected, counts = self.sentence_expectations(out, batch)
        if self.aggregate == "batch":
            return GEAggregate(expected.sum(0), counts.sum(0))
        if self.corpus == "running":
            return GEAggregate(*self.running.fold(expected.sum(0), counts.sum(0)))
        if batch.index is None:
            raise ValueError("GeneralizedExpectation(aggregate='corpus') needs batch.index (sentence ids)")
        total_expected, total_counts = self.cache.corpus_totals(batch.index, expected, counts)
        self.cache.update(batch.index, expected, counts)
        return GEAggregate(total_expected, total_counts)

    def proportions(self, aggregate: GEAggregate) -> tuple[Tensor, Tensor]:
        """``([K] model proportions m, [K] bool active)``; inactive constraints (no child word)
        read 0."""
        active = aggregate.counts > 0
        # Not clamp(min=1): decayed running totals hold fractional counts.
        model = aggregate.expected / torch.where(active, aggregate.counts, torch.ones_like(aggregate.counts))
        return torch.where(active, model, torch.zeros_like(model)), active

    def loss_of(self, aggregate: GEAggregate) -> Output:
        model, active = self.proportions(aggregate)
        device = model.device
        active = active & self.constraints.proportions_mask.to(device)
        target = self.constraints.column_targets.to(device)
        if self.criterion == "squared":
            divergence = (target - model) ** 2
        else:
            m = model.clamp(self.eps, 1 - self.eps)
            divergence = (
                torch.xlogy(target, target) - target * m.log()
                + torch.xlogy(1 - target, 1 - target) - (1 - target) * (1 - m).log()
            )  # fmt: skip
        # A constraint's weight: 1 for a written one, its confidence for an estimated one.
        divergence = divergence * self.constraints.column_weights.to(device)
        lower, upper = (bound.to(device) for bound in self.constraints.column_bounds)
        satisfied = (lower & (model >= target)) | (upper & (model <= target))
        violated = active & ~satisfied
        loss = torch.where(violated, divergence, torch.zeros_like(divergence)).sum()
        n_active = active.sum()
        error = torch.where(violated, (target - model).abs(), torch.zeros_like(model)).sum()
        logs = {}
        pairs = self.constraints.consistency_columns.to(device)
        if pairs.numel():
            penalty, group_error, group_active = self.consistency_of(aggregate, pairs)
            loss = loss + penalty.sum()
            error = error + group_error.sum()
            n_active = n_active + group_active.sum()
            logs["consistency"] = penalty.sum().detach()
        logs = {
            "loss": loss.detach(),
            "mean_abs_error": (error / n_active.clamp(min=1)).detach(),
            "active": n_active.detach().to(torch.float64),
            **logs,
        }
        return Output(loss, logs)

    def consistency_of(self, aggregate: GEAggregate, pairs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``([G] weighted penalty, [G] min(q, 1 - q), [G] bool active)`` of the consistency groups whose
        (left, right) columns are ``pairs [G, 2]`` (see the module docstring)."""
        left, right = aggregate.expected[pairs[:, 0]], aggregate.expected[pairs[:, 1]]
        total = left + right
        active = (aggregate.counts[pairs[:, 0]] > 0) & (total > 0)
        q = left / torch.where(active, total, torch.ones_like(total))
        interior = active & (q > 0) & (q < 1)
        if self.criterion == "squared":
            penalty = q * (1 - q)
        else:
            # The entropy at an interior point only: at q in {0, 1} its value is 0 and its slope
            # (infinite one-sided limit) would be NaN; the where() keeps both out of the graph.
            safe = torch.where(interior, q, torch.full_like(q, 0.5))
            penalty = -(torch.xlogy(safe, safe) + torch.xlogy(1 - safe, 1 - safe))
        weight = self.constraints.consistency_weights.to(q.device)
        penalty = weight * torch.where(interior, penalty, torch.zeros_like(penalty))
        error = torch.where(active, torch.minimum(q, 1 - q), torch.zeros_like(q))
        return penalty, error.detach(), active
