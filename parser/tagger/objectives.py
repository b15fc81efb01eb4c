"""Tagging objectives on the parser's pattern (``parser.objectives``): each a pure function of
``(TaggerOutput, Batch)`` returning a scalar loss and detached logs, composable by
``parser.objectives.weighted.WeightedSum`` (``build_tag_objective``).

- ``TagLikelihood`` (labeled): ``-log p(gold tags)`` per word; words without a gold tag (``_`` or a
  tag unseen in training) may take any tag (the restricted partition function).
- ``TagEntropy`` (unlabeled): the entropy of the chain per word, its gradient by the Mann &
  McCallum (2007) entropy lattices or by autograd through forward-backward.
- ``TagGE`` (unlabeled): generalized expectation on word-feature / tag proportions; for constraint
  ``k`` the model distribution is ``m_k = sum_{words firing k} p(y_i) / #words firing k`` over the
  batch, compared with ``targets[k]`` by squared error (Druck et al.) or ``KL(t_k || m_k)`` (Mann &
  McCallum 2008), summed over the constraints that fire in the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from parser.data.vocab import N_SPECIAL
from parser.objectives.base import Output
from parser.objectives.weighted import Term, WeightedSum
from parser.structs import LinearChainCRF
from parser.structs.chain.entropy import entropy_mann_mccallum
from parser.tagger.features import TagConstraints
from parser.tagger.model import TaggerOutput, upos_ids_to_tags

if TYPE_CHECKING:
    from parser.data.batch import Batch

__all__ = ["TagEntropy", "TagGE", "TagLikelihood", "build_tag_objective", "gold_tags"]

FORBID = -1e4  # a large negative score, not -inf (the chain's convention)
ENTROPY_METHODS = ("mann_mccallum", "autograd")
CRITERIA = ("squared", "kl")


def gold_tags(batch: Batch, *, n_tags: int, who: str) -> Tensor:
    """``[B, T]`` gold tags from ``batch.upos``, ``-1`` where unannotated or padding."""
    tags = upos_ids_to_tags(batch.upos)
    if bool((tags >= n_tags).any()):
        raise ValueError(
            f"{who}: batch.upos holds tag {int(tags.max())} (UPOS id {int(tags.max()) + N_SPECIAL}) "
            f"but the tagger has {n_tags} tags"
        )
    present = torch.arange(tags.shape[1], device=tags.device) < batch.lengths[:, None]
    return torch.where(present, tags, torch.full_like(tags, -1))


def _per_word(total: Tensor, batch: Batch) -> Tensor:
    return total / max(batch.n_tokens, 1)


@dataclass(frozen=True)
class TagLikelihood:
    """Negative log-likelihood of the gold tags per word. Logs ``loss``."""

    def __call__(self, out: TaggerOutput, batch: Batch) -> Output:
        dist = out.dist
        tags = gold_tags(batch, n_tags=dist.num_states, who="TagLikelihood")
        present = torch.arange(tags.shape[1], device=tags.device) < batch.lengths[:, None]
        if bool((tags[present] >= 0).all()):
            nll = -dist.log_prob(tags.clamp(min=0))
        else:
            states = torch.arange(dist.num_states, device=tags.device)
            allowed = (tags[..., None] < 0) | (tags[..., None] == states)  # [B, T, cur]
            restricted = dist.scores.masked_fill(~allowed[:, :, None, :], FORBID)
            nll = dist.log_partition - LinearChainCRF(restricted, dist.lengths).log_partition
        loss = _per_word(nll.sum(), batch)
        return Output(loss, {"loss": loss.detach()})


@dataclass(frozen=True)
class TagEntropy:
    """Entropy of the tag sequence distribution per word (minimised: confident on unlabeled
    text). ``method``: ``"mann_mccallum"`` (O(n s^2) lattices, first order only) or ``"autograd"``.
    Logs ``loss`` and ``value``."""

    method: str = "mann_mccallum"

    def __post_init__(self) -> None:
        if self.method not in ENTROPY_METHODS:
            raise ValueError(f"TagEntropy: method must be one of {ENTROPY_METHODS}, got {self.method!r}")

    def __call__(self, out: TaggerOutput, batch: Batch) -> Output:
        dist = out.dist
        if self.method == "autograd":
            values = dist.entropy()
        else:
            values = entropy_mann_mccallum(dist.scores, dist.lengths)
        loss = _per_word(values.sum(), batch)
        return Output(loss, {"loss": loss.detach(), "value": loss.detach()})


@dataclass(frozen=True)
class TagGE:
    """GE criterion over ``constraints`` (a :class:`~parser.tagger.features.TagConstraints`).

    criterion: ``"squared"`` or ``"kl"``; ``eps`` floors model proportions inside the KL.
    Logs ``loss``, ``mean_abs_error`` (mean over active constraints of the mean |t - m| over
    tags) and ``active`` (constraints firing in the batch).
    """

    constraints: TagConstraints
    criterion: str = "kl"
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"TagGE: criterion must be one of {CRITERIA}, got {self.criterion!r}")
        if not 0 < self.eps < 1:
            raise ValueError(f"TagGE: eps must be in (0, 1), got {self.eps}")

    def model_proportions(self, out: TaggerOutput, batch: Batch) -> tuple[Tensor, Tensor]:
        """``([K, S] model tag proportions among the words firing each constraint, [K] counts)``,
        float64; rows of constraints that do not fire are 0."""
        dist = out.dist
        if dist.num_states != self.constraints.n_tags:
            raise ValueError(
                f"TagGE: the tagger has {dist.num_states} tags, the constraints {self.constraints.n_tags}"
            )
        fires = self.constraints.fires(batch.chars, batch.lengths).to(torch.float64)  # [B, T, K]
        marginals = dist.unary_marginals.to(torch.float64)  # [B, T, S]
        expected = torch.einsum("btk,bts->ks", fires, marginals)
        counts = fires.sum(dim=(0, 1))
        return expected / counts.clamp(min=1)[:, None], counts

    def __call__(self, out: TaggerOutput, batch: Batch) -> Output:
        model, counts = self.model_proportions(out, batch)
        target = self.constraints.targets.to(model.device)
        active = counts > 0
        if self.criterion == "squared":
            divergence = ((target - model) ** 2).sum(-1)
        else:
            divergence = (torch.xlogy(target, target) - target * model.clamp(min=self.eps).log()).sum(-1)
        loss = torch.where(active, divergence, torch.zeros_like(divergence)).sum()
        n_active = active.sum()
        error = torch.where(active, (target - model).abs().mean(-1), torch.zeros_like(divergence))
        logs = {
            "loss": loss.detach(),
            "mean_abs_error": (error.sum() / n_active.clamp(min=1)).detach(),
            "active": n_active.detach().to(torch.float64),
        }
        return Output(loss.to(out.dist.scores.dtype), logs)


KINDS = {"likelihood": "labeled", "entropy": "unlabeled", "ge": "unlabeled"}
_OPTIONS = {"likelihood": set(), "entropy": {"method"}, "ge": {"criterion", "eps"}}
_TERM = {"type", "weight", "warmup", "stream"}
# options the trainer reads to build the constraints; ignored here
GE_SETUP = {"top_forms", "suffixes", "smoothing"}


def build_tag_objective(
    spec: Mapping, *, constraints: TagConstraints | None = None
) -> WeightedSum:
    """A ``WeightedSum`` from ``{name: {type?, weight, warmup, stream, <kind options>}}``; the kind
    is ``type`` or the name (``likelihood``, ``entropy``, ``ge``); a zero or null weight leaves the
    term out. A ``ge`` term needs ``constraints``."""
    terms = []
    for name, options in spec.items():
        options = dict(options or {})
        kind = options.get("type", name)
        if kind not in KINDS:
            raise ValueError(f"objective.terms.{name}: unknown kind {kind!r}; known: {sorted(KINDS)}")
        unknown = set(options) - _TERM - _OPTIONS[kind] - (GE_SETUP if kind == "ge" else set())
        if unknown:
            raise ValueError(f"objective.terms.{name}: unknown options {sorted(unknown)} for {kind}")
        weight = options.get("weight", 1.0)
        if weight is None or float(weight) == 0.0:
            continue
        kind_options = {k: options[k] for k in _OPTIONS[kind] if options.get(k) is not None}
        if kind == "likelihood":
            objective = TagLikelihood()
        elif kind == "entropy":
            objective = TagEntropy(**kind_options)
        else:
            if constraints is None:
                raise ValueError(f"objective.terms.{name}: a ge term needs constraints")
            objective = TagGE(constraints, **kind_options)
        terms.append(Term(
            name, objective, weight=float(weight), warmup=int(options.get("warmup") or 0),
            stream=options.get("stream") or KINDS[kind],
        ))
    if not terms:
        raise ValueError("objective.terms: no term with a non-zero weight")
    return WeightedSum(tuple(terms))
