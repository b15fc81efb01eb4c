"""DistributedDataParallel around the parser's scorer, and the objective and cross-rank reductions
that make N ranks compute the 1-process gradients (see :mod:`parser.train.distributed`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from parser.models import EdgeScores
from parser.objectives.base import Output, ParserOutput
from parser.objectives.weighted import WeightedSum

if TYPE_CHECKING:
    from parser.train.distributed import DistributedContext

__all__ = ["DistributedObjective", "DistributedParser", "ProcessGroupRanks"]


class _EdgeScoreTensors(nn.Module):
    """The parser's scorer with plain tensors out, so that DDP sees every output: arcs, labels
    and tags feed its unused-parameter detection (the label scorer and the tag head are idle on
    unlabeled steps)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch) -> tuple[Tensor, Tensor | None, Tensor | None, dict[str, Tensor]]:
        scores = self.model.scorer(batch)
        return scores.arcs, scores.labels, scores.tags, dict(scores.layers)


class DistributedParser:
    """``batch -> ParserOutput`` through DDP; ``model`` (a ``ParserModel``) keeps the weights
    (checkpoints, evaluation and decoding use it directly)."""

    def __init__(self, model: nn.Module, context: DistributedContext) -> None:
        self.model = model
        ids = [context.local_rank] if context.device.type == "cuda" else None
        # DDP copies rank 0's weights to every rank here.
        self.ddp = DistributedDataParallel(
            _EdgeScoreTensors(model), device_ids=ids, find_unused_parameters=True
        )

    def __call__(self, batch) -> ParserOutput:
        arcs, labels, tags, layers = self.ddp(batch)
        # every field: the tag and layer heads' losses are computed from them
        return self.model.output(EdgeScores(arcs, labels, tags, layers), batch)


class DistributedObjective:
    """A ``WeightedSum`` evaluated on one rank's share of a global batch, so that DDP's averaged
    gradient and the rank-averaged logs equal the 1-process ones (see the module docstring)."""

    def __init__(self, objective: WeightedSum, context: DistributedContext) -> None:
        if not isinstance(objective, WeightedSum):
            raise ValueError(f"DistributedObjective: expected a WeightedSum, got {type(objective).__name__}")  # noqa: TRY004
        self.objective = objective
        self.context = context
        self.ranks = ProcessGroupRanks(context)

    def state_dict(self) -> dict[str, dict]:
        """The wrapped objective's state (the corpus GE cache is the same on every rank)."""
        return self.objective.state_dict()

    def load_state_dict(
        self, state: dict[str, dict], *, strict: bool = True
    ) -> tuple[list[str], list[str]]:
        return self.objective.load_state_dict(state, strict=strict)

    def __call__(self, out: ParserOutput, batch, *, step: int = 0) -> Output:
        return self.objective(out, batch, step=step, ranks=self.ranks)


class ProcessGroupRanks:
    """The process group as ``parser.objectives.base.Ranks``: what the objectives' reductions
    across ranks call."""

    def __init__(self, context: DistributedContext) -> None:
        self.context = context
        self.world_size = context.world_size

    def token_share(self, batch) -> float:
        """``W * T_r / T``: this rank's words over the global batch's, times the world size."""
        tokens = torch.tensor([float(batch.n_tokens)], dtype=torch.float64, device=self.context.device)
        dist.all_reduce(tokens)
        return self.world_size * batch.n_tokens / max(float(tokens.item()), 1.0)

    def sum(self, tensor: Tensor) -> Tensor:
        return _SumOverRanks.apply(tensor)

    def gather_rows(self, *rows: Tensor) -> tuple[Tensor, ...]:
        """All ranks' ``rows`` (``[B_r]`` or ``[B_r, K]``) concatenated in rank order (gloo
        gathers equal shapes only: rows are packed as float64, padded to the largest ``B_r`` and
        cut again)."""
        first = rows[0]
        sizes = torch.tensor([first.shape[0]], device=first.device)
        all_sizes = [torch.zeros_like(sizes) for _ in range(self.world_size)]
        dist.all_gather(all_sizes, sizes)
        width = int(max(s.item() for s in all_sizes))
        columns = [row.reshape(first.shape[0], -1).to(torch.float64) for row in rows]
        packed = torch.cat(columns, dim=1)
        packed = torch.cat([packed, packed.new_zeros(width - first.shape[0], packed.shape[1])])
        gathered = [torch.zeros_like(packed) for _ in range(self.world_size)]
        dist.all_gather(gathered, packed)
        together = torch.cat([g[: int(s.item())] for g, s in zip(gathered, all_sizes)])
        found, start = [], 0
        for row, column in zip(rows, columns):
            part = together[:, start : start + column.shape[1]]
            start += column.shape[1]
            part = part.reshape(-1, *row.shape[1:])
            found.append(part.to(row.dtype) if row.dtype.is_floating_point else part.round().to(row.dtype))
        return tuple(found)


class _SumOverRanks(torch.autograd.Function):
    """All-reduce (sum) with autograd: the backward sums the ranks' incoming gradients, as
    ``torch.distributed.nn.functional.all_reduce`` does (deprecated in torch 2.13)."""

    @staticmethod
    def forward(ctx, tensor: Tensor) -> Tensor:
        total = tensor.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        total = grad.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(total)
        return total
