"""A weighted sum of named objectives, itself an objective.

Each term has a weight with a linear warm-up (``weight * min(1, step / warmup)``; ``warmup=0``
means the full weight from step 0) and the stream of batches it consumes: ``"labeled"`` (batches
with gold heads), ``"unlabeled"`` (batches without) or ``"any"``. Terms that do not apply to a
batch are skipped. A model's own auxiliary losses (``out.auxiliary``, e.g. the UPOS head's,
already weighted by the model config) are added as terms of their own. Logs are prefixed by the term name (``likelihood/loss``), with each applied
term's current ``<name>/weight`` and the weighted ``total``.

Annealing, for any term, here and nowhere else (``parser.objectives.schedule``): ``weight_schedule``
anneals the weight from a start value to ``weight`` (the warm-up factor still multiplies it), and
``temperature`` anneals a temperature ``T``: the term then sees the tree distribution ``p^(1/T)``
(scores divided by ``T``) instead of ``p``, and ``<name>/temperature`` is logged.

Data parallelism is a hook of the sum, not a copy of it: called with ``ranks=`` (a
``parser.objectives.base.Ranks``), each term reduces its own statistics across ranks. A term whose
objective defines ``across_ranks`` (a batch or corpus statistic, e.g. GE: the expectations are
summed over ranks before the divergence) returns the global loss, the same on every rank; any other
term is a per-token loss, and its loss and logs are multiplied by the rank's token share
``W * T_r / T``, so that the average over ranks (DDP's, for gradients; the trainer's, for logs) is
the 1-process value of the global batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from parser.objectives.base import Objective, Output, ParserOutput, Ranks
from parser.objectives.schedule import Schedule, tempered

if TYPE_CHECKING:
    from parser.data.batch import Batch

STREAMS = ("labeled", "unlabeled", "any")


@dataclass(frozen=True)
class Term:
    """One named, weighted objective of a ``WeightedSum``. ``weight_schedule`` (ending at
    ``weight``) anneals the weight; ``temperature`` the temperature of the distribution the
    objective sees (None: 1)."""

    name: str
    objective: Objective
    weight: float = 1.0
    warmup: int = 0
    stream: str = "any"
    weight_schedule: Schedule | None = None
    temperature: Schedule | None = None

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"Term: name must be non-empty without '/', got {self.name!r}")
        if self.stream not in STREAMS:
            raise ValueError(f"Term {self.name!r}: stream must be one of {STREAMS}, got {self.stream!r}")
        if self.warmup < 0:
            raise ValueError(f"Term {self.name!r}: warmup must be >= 0, got {self.warmup}")
        if not callable(self.objective):
            raise ValueError(f"Term {self.name!r}: objective must be callable, got {self.objective!r}")  # noqa: TRY004 (project convention: bad input is a ValueError)
        if self.weight_schedule is not None and self.weight_schedule.end != self.weight:
            raise ValueError(
                f"Term {self.name!r}: the weight schedule ends at {self.weight_schedule.end}, not at weight={self.weight}"
            )
        if self.temperature is not None and not (self.temperature.first > 0 and self.temperature.end > 0):
            raise ValueError(f"Term {self.name!r}: temperatures must be > 0, got {self.temperature}")

    def weight_at(self, step: int) -> float:
        """The (annealed, then warmed-up) weight at training step ``step``."""
        weight = float(self.weight) if self.weight_schedule is None else self.weight_schedule.at(step)
        if self.warmup == 0:
            return weight
        return weight * min(1.0, max(step, 0) / self.warmup)

    def temperature_at(self, step: int) -> float:
        """The temperature of the term's distribution at training step ``step`` (1: ``p``)."""
        return 1.0 if self.temperature is None else self.temperature.at(step)

    def applies_to(self, batch: Batch) -> bool:
        if self.stream == "any":
            return True
        return batch.is_labeled == (self.stream == "labeled")


@dataclass(frozen=True)
class WeightedSum:
    """``sum_t weight_t(step) * loss_t`` over the terms that apply to the batch."""

    terms: tuple[Term, ...]

    def __post_init__(self) -> None:
        terms = tuple(self.terms)
        object.__setattr__(self, "terms", terms)
        names = [term.name for term in terms]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"WeightedSum: duplicate term names {duplicates}")

    @property
    def names(self) -> list[str]:
        return [term.name for term in self.terms]

    def streams(self) -> set[str]:
        """The streams the terms consume (``any`` counts as both)."""
        found = {term.stream for term in self.terms}
        return {"labeled", "unlabeled"} if "any" in found else found

    def state_dict(self) -> dict[str, dict]:
        """The mutable state of the terms that keep some (GE's corpus cache), by term name; the
        trainer checkpoints it so that a resumed run continues exactly."""
        return {term.name: term.objective.state_dict() for term in self.terms if _stateful(term)}

    def load_state_dict(
        self, state: dict[str, dict], *, strict: bool = True
    ) -> tuple[list[str], list[str]]:
        """Restore :meth:`state_dict`'s output. Returns ``(missing, unexpected)`` term names (as
        ``torch.nn.Module.load_state_dict`` does); ``strict`` raises ``ValueError`` unless both
        are empty. Matching terms are loaded either way."""
        stateful = {term.name for term in self.terms if _stateful(term)}
        missing, unexpected = sorted(stateful - set(state)), sorted(set(state) - stateful)
        if strict and (missing or unexpected):
            raise ValueError(
                f"WeightedSum.load_state_dict: no state for terms {missing}, state for unknown "
                f"terms {unexpected} (stateful terms here: {sorted(stateful)})"
            )
        for term in self.terms:
            if term.name in stateful and term.name in state:
                term.objective.load_state_dict(state[term.name])
        return missing, unexpected

    def __call__(self, out: ParserOutput, batch: Batch, *, step: int = 0, ranks: Ranks | None = None) -> Output:
        """The weighted sum at training ``step``; with ``ranks``, this rank's share of the global
        batch's (see the module docstring)."""
        share = ranks.token_share(batch) if ranks is not None else 1.0
        total = None
        logs = {}
        # A model that predicts its own UPOS (a tag head) hands the tags its terms must read (GE
        # features on text without gold tags) and its weighted tagging loss (per token).
        own_upos = getattr(out, "upos", None)
        if own_upos is not None:
            batch = replace(batch, upos=own_upos)
        for name, loss in (getattr(out, "auxiliary", None) or {}).items():
            total = share * loss if total is None else total + share * loss
            logs[f"{name}/loss"] = loss.detach() * share
        for term in self.terms:
            if not term.applies_to(batch):
                continue
            weight = term.weight_at(step)
            temperature = term.temperature_at(step)
            seen = tempered(out, temperature) if temperature != 1.0 else out
            result, scale = _reduced(term.objective, seen, batch, ranks=ranks, share=share)
            if weight != 0.0:
                part = weight * scale * result.loss
                total = part if total is None else total + part
            logs.update({f"{term.name}/{key}": value * scale for key, value in result.logs.items()})
            logs[f"{term.name}/weight"] = torch.tensor(weight)
            if term.temperature is not None:
                logs[f"{term.name}/temperature"] = torch.tensor(temperature)
        if total is None:
            # A zero inside the graph, so that backward (and DDP) still run when no term contributes.
            scores = out.dist.scores
            total = torch.where(torch.isfinite(scores), scores, 0.0).sum() * 0.0
        logs["total"] = total.detach()
        return Output(total, logs)


def _reduced(
    objective: Objective, out: ParserOutput, batch: Batch, *, ranks: Ranks | None, share: float
) -> tuple[Output, float]:
    """The objective's output on this rank and the factor its loss and logs take: its own
    ``across_ranks`` hook (global already: 1) when it has one, else the token share."""
    if ranks is None:
        return objective(out, batch), 1.0
    across_ranks = getattr(objective, "across_ranks", None)
    if callable(across_ranks):
        return across_ranks(out, batch, ranks), 1.0
    return objective(out, batch), share


def _stateful(term: Term) -> bool:
    objective = term.objective
    return callable(getattr(objective, "state_dict", None)) and callable(
        getattr(objective, "load_state_dict", None)
    )


def weighted_sum(terms: Sequence[Term]) -> WeightedSum:
    """A ``WeightedSum`` of ``terms`` (a convenience for a list)."""
    return WeightedSum(tuple(terms))
