"""The interface every training objective implements, and how objectives compose.

An objective is a pure function of the model's distribution and the batch: it never touches the
optimiser, the writer or the disk. It returns a scalar loss, normalised per token unless stated,
and detached scalars to log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from torch import Tensor

from parser.structs import ParserOutput

__all__ = ["Objective", "Output", "ParserOutput"]

if TYPE_CHECKING:  # objectives never import data loading; Batch is only a type here
    from parser.data.batch import Batch


@dataclass(frozen=True)
class Output:
    loss: Tensor  # scalar, normalised (per token unless stated)
    logs: dict[str, Tensor] = field(default_factory=dict)  # detached scalars for TensorBoard


class Objective(Protocol):
    def __call__(self, out: ParserOutput, batch: Batch) -> Output: ...
