"""What every distribution over dependency trees offers: the :class:`TreeDistribution` protocol.

:class:`parser.structs.TreeCRF` (non-projective, matrix-tree theorem) and
:class:`parser.structs.ProjectiveTreeCRF` (projective, Eisner's inside algorithm) both satisfy it,
so objectives and decoders take either through ``ParserOutput.dist``. Shapes: ``scores [B, N+1,
N+1]`` (``[B, N+1, N+1, L]`` when ``labeled``), ``lengths [B]``, ``heads [B, N+1]``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor

__all__ = ["TreeDistribution"]


@runtime_checkable
class TreeDistribution(Protocol):
    """A distribution over the dependency trees of each sentence of a batch."""

    scores: Tensor
    lengths: Tensor
    single_root: bool
    labeled: bool

    @property
    def log_partition(self) -> Tensor:
        """``[B]`` log Z (-inf where no tree is allowed)."""
        ...

    @property
    def arc_mask(self) -> Tensor:
        """``[B, dep, head]`` bool: the real arcs."""
        ...

    @property
    def arc_marginals(self) -> Tensor:
        """``[B, dep, head]`` p(head(dep) = head), 0 off arcs."""
        ...

    @property
    def marginals(self) -> Tensor:
        """Marginals with the shape of ``scores``."""
        ...

    def log_prob(self, heads: Tensor) -> Tensor:
        """``[B]`` log p(heads); -inf for a tree outside the support."""
        ...

    def score(self, heads: Tensor) -> Tensor:
        """``[B]`` summed arc scores of ``heads``."""
        ...

    def entropy(self) -> Tensor:
        """``[B]`` Shannon entropy (nats)."""
        ...

    def argmax(self, *, projective: bool = ...):
        """The best tree ``heads [B, N+1]`` (``(heads, labels)`` when labeled)."""
        ...

    def restrict(self, allowed: Tensor) -> TreeDistribution:
        """The distribution conditioned on arcs in ``allowed [B, dep, head]`` (bool)."""
        ...

    def expect_sparse(self, arc_index: Tensor, feature_ids: Tensor, values: Tensor,
                      n_features: int) -> Tensor:
        """E[features] ``[B, n_features]`` from sparse ``(b, dep, head)`` rows."""
        ...
