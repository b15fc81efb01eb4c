"""Decayed running totals of GE expectations, for corpus-level GE in bounded memory.

The alternative to ``ExpectationCache`` (one row per sentence, linear in the corpus): two ``[K]``
float64 vectors, the expected firing arcs and the child-word counts of every batch seen so far,
each batch's totals weighted by ``decay ** (batches since)``. The aggregate a step sees is
``decay * (totals so far) + (this batch's live totals)``: the past is detached, the batch carries
the gradient. Since GE compares the ratio ``expected / counts``, the decay cancels from a single
batch and the aggregate is a count-weighted moving average of batch proportions, remembering about
``1 / (1 - decay)`` batches (``decay = 1``: every batch since the start, a sentence counted once
per visit).

Under data parallelism the totals fold in the global batch (``Ranks.sum`` of the ranks' totals),
so every rank holds the same state, and a checkpoint of any rank resumes exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor


class RunningTotals:
    """Detached ``[K]`` decayed totals of expected firing arcs and child-word counts."""

    def __init__(self, *, decay: float) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"RunningTotals: decay must be in (0, 1], got {decay} (0 would be aggregate=batch)")
        self.decay = float(decay)
        self.expected: Tensor | None = None  # [K] float64
        self.counts: Tensor | None = None  # [K] float64
        self.batches = 0

    def fold(self, expected: Tensor, counts: Tensor) -> tuple[Tensor, Tensor]:
        """``([K], [K])`` totals: the decayed past plus this batch's live ``expected [K]``
        (gradient kept) and ``counts [K]``; the batch is then folded into the past (detached)."""
        if expected.dim() != 1 or counts.shape != expected.shape:
            raise ValueError(
                f"RunningTotals: expected {tuple(expected.shape)} and counts {tuple(counts.shape)} must both be [K]"
            )
        if self.expected is not None and self.expected.shape != expected.shape:
            raise ValueError(f"RunningTotals: {expected.shape[0]} constraints, the totals hold {self.expected.shape[0]}")
        expected, counts = expected.to(torch.float64), counts.to(torch.float64)
        if self.expected is None:
            total_expected, total_counts = expected, counts
        else:
            past_expected = self.decay * self.expected.to(expected.device)
            past_counts = self.decay * self.counts.to(counts.device)
            total_expected, total_counts = past_expected + expected, past_counts + counts
        self.expected, self.counts = total_expected.detach().clone(), total_counts.detach().clone()
        self.batches += 1
        return total_expected, total_counts

    def state_dict(self) -> dict[str, Tensor | float | int | None]:
        return {"expected": self.expected, "counts": self.counts, "batches": self.batches, "decay": self.decay}

    def load_state_dict(self, state: dict[str, Tensor | float | int | None]) -> None:
        """Restore :meth:`state_dict`'s output (copied). Totals saved with another ``decay`` are
        refused: they would continue under a different memory."""
        missing = sorted({"expected", "counts", "batches", "decay"} - set(state))
        if missing:
            raise ValueError(f"RunningTotals.load_state_dict: missing entries {missing}")
        if state["expected"] is not None and float(state["decay"]) != self.decay:
            raise ValueError(
                f"RunningTotals.load_state_dict: the state was saved with decay={state['decay']}, "
                f"this term has decay={self.decay}"
            )
        expected, counts = state["expected"], state["counts"]
        if (expected is None) != (counts is None):
            raise ValueError("RunningTotals.load_state_dict: expected and counts must both be tensors or both None")
        if expected is not None and (expected.dim() != 1 or counts.shape != expected.shape):
            raise ValueError(
                f"RunningTotals.load_state_dict: expected {tuple(expected.shape)} and counts "
                f"{tuple(counts.shape)} must both be [K]"
            )
        self.expected = None if expected is None else expected.detach().to(torch.float64).clone()
        self.counts = None if counts is None else counts.detach().to(torch.float64).clone()
        self.batches = int(state["batches"])
