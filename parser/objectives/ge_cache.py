"""Per-sentence GE expectations of the whole unlabeled corpus, for corpus-level GE.

Rows are indexed by ``batch.index`` (a sentence's position in its dataset) and grow on demand;
sentences not seen yet contribute nothing. Values are detached, float64, on the CPU-or-device of
the first update.
"""

from __future__ import annotations

import torch
from torch import Tensor


class ExpectationCache:
    """Detached ``[S, K]`` expected firing arcs and child-word counts of each seen sentence."""

    def __init__(self) -> None:
        self.expected: Tensor | None = None  # [S, K] float64
        self.counts: Tensor | None = None  # [S, K] float64
        self.seen: Tensor | None = None  # [S] bool

    def __len__(self) -> int:
        return 0 if self.seen is None else int(self.seen.sum())

    def corpus_totals(self, index: Tensor, expected: Tensor, counts: Tensor) -> tuple[Tensor, Tensor]:
        """``[K]`` totals over the corpus with the rows of ``index [B]`` replaced by the live
        ``expected [B, K]`` (gradient kept) and ``counts [B, K]``."""
        self._check(index, expected, counts)
        if self.expected is None:
            return expected.sum(0), counts.sum(0)
        rows = index.to(self.expected.device)
        inside = rows < self.expected.shape[0]
        rows = rows[inside]
        cached_expected = self.expected.sum(0) - self.expected[rows].sum(0)
        cached_counts = self.counts.sum(0) - self.counts[rows].sum(0)
        device = expected.device
        return cached_expected.to(device) + expected.sum(0), cached_counts.to(device) + counts.sum(0)

    def update(self, index: Tensor, expected: Tensor, counts: Tensor) -> None:
        """Store detached copies of the rows of ``index``."""
        self._check(index, expected, counts)
        size = int(index.max()) + 1 if index.numel() else 0
        if self.expected is None:
            n_features = expected.shape[1]
            self.expected = torch.zeros(0, n_features, dtype=torch.float64, device=expected.device)
            self.counts = torch.zeros_like(self.expected)
            self.seen = torch.zeros(0, dtype=torch.bool, device=expected.device)
        if size > self.expected.shape[0]:
            grow = max(size, 2 * self.expected.shape[0]) - self.expected.shape[0]
            pad = self.expected.new_zeros(grow, self.expected.shape[1])
            self.expected = torch.cat([self.expected, pad])
            self.counts = torch.cat([self.counts, pad])
            self.seen = torch.cat([self.seen, self.seen.new_zeros(grow)])
        rows = index.to(self.expected.device)
        self.expected[rows] = expected.detach().to(self.expected)
        self.counts[rows] = counts.detach().to(self.counts)
        self.seen[rows] = True

    def state_dict(self) -> dict[str, Tensor | None]:
        return {"expected": self.expected, "counts": self.counts, "seen": self.seen}

    def load_state_dict(self, state: dict[str, Tensor | None]) -> None:
        """Restore :meth:`state_dict`'s output (copied: later updates never touch ``state``)."""
        missing = sorted({"expected", "counts", "seen"} - set(state))
        if missing:
            raise ValueError(f"ExpectationCache.load_state_dict: missing entries {missing}")
        expected, counts, seen = state["expected"], state["counts"], state["seen"]
        if expected is None or counts is None or seen is None:
            if not (expected is None and counts is None and seen is None):
                raise ValueError("ExpectationCache.load_state_dict: expected, counts and seen must "
                                 "all be tensors or all None")
            self.expected = self.counts = self.seen = None
            return
        if expected.dim() != 2 or counts.shape != expected.shape or seen.shape != expected.shape[:1]:
            raise ValueError(
                f"ExpectationCache.load_state_dict: expected {tuple(expected.shape)}, counts "
                f"{tuple(counts.shape)} and seen {tuple(seen.shape)} must be [S, K], [S, K], [S]"
            )
        self.expected = expected.detach().to(torch.float64).clone()
        self.counts = counts.detach().to(torch.float64).clone()
        self.seen = seen.detach().to(torch.bool).clone()

    def _check(self, index: Tensor, expected: Tensor, counts: Tensor) -> None:
        if index.dim() != 1 or expected.shape != (index.shape[0], expected.shape[-1]):
            raise ValueError(
                f"ExpectationCache: batch.index {tuple(index.shape)} and expectations "
                f"{tuple(expected.shape)} must be [B] and [B, K]"
            )
        if counts.shape != expected.shape:
            raise ValueError(f"ExpectationCache: counts {tuple(counts.shape)} != expected {tuple(expected.shape)}")
        if index.numel() and int(index.min()) < 0:
            raise ValueError(f"ExpectationCache: batch.index has a negative id {int(index.min())}")
        if index.unique().numel() != index.numel():
            raise ValueError(f"ExpectationCache: batch.index repeats a sentence: {index.tolist()}")
        if self.expected is not None and expected.shape[1] != self.expected.shape[1]:
            raise ValueError(
                f"ExpectationCache: {expected.shape[1]} constraints, cache holds {self.expected.shape[1]}"
            )
