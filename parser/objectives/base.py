"""The interface every training objective implements, and how objectives compose.

An objective is a pure function of the model's distribution and the batch: it never touches the
optimiser, the writer or the disk. It returns a scalar loss, normalised per token unless stated,
and detached scalars to log. Under data parallelism an objective whose loss is not per token (a
batch or corpus statistic, e.g. GE) also defines ``across_ranks(out, batch, ranks) -> Output``: its
loss on the global batch, from statistics reduced with ``ranks`` (a :class:`Ranks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from torch import Tensor

from parser.structs import ParserOutput

__all__ = ["Objective", "Output", "ParserOutput", "Ranks"]

if TYPE_CHECKING:  # objectives never import data loading; Batch is only a type here
    from parser.data.batch import Batch


@dataclass(frozen=True)
class Output:
    loss: Tensor  # scalar, normalised (per token unless stated)
    logs: dict[str, Tensor] = field(default_factory=dict)  # detached scalars for TensorBoard


class Objective(Protocol):
    def __call__(self, out: ParserOutput, batch: Batch) -> Output: ...


class Ranks(Protocol):
    """The data-parallel ranks, as objectives see them (``parser.train.distributed`` gives one).
    Every rank must make the same calls in the same order."""

    world_size: int

    def token_share(self, batch: Batch) -> float:
        """``W * T_r / T``: this rank's words over the global batch's, times the world size (the
        factor that makes DDP's average of per-token losses the 1-process gradient)."""
        ...

    def sum(self, tensor: Tensor) -> Tensor:
        """``tensor`` summed over ranks, differentiably (the backward sums the ranks' gradients)."""
        ...

    def gather_rows(self, *rows: Tensor) -> tuple[Tensor, ...]:
        """Each of ``rows`` (``[B_r]`` or ``[B_r, K]``, same ``B_r``) concatenated over ranks in
        rank order, dtypes kept; not differentiable."""
        ...
