"""Data-parallel training with ``torch.distributed`` and ``DistributedDataParallel`` (``torchrun``).

``trainer.distributed``: ``auto`` (distributed when ``torchrun`` set ``RANK``/``WORLD_SIZE`` with
more than one process), ``on`` (required; a plain launch is an error), ``off`` (one process;
a multi-process launch is an error). The same config runs either way.

What each rank does (``W`` ranks, rank ``r``):

- the process group is gloo on the CPU, NCCL on CUDA (``cuda:LOCAL_RANK``);
- the training streams split each global batch by sentence (``BucketBatcher(num_replicas=W,
  rank=r)``): together the ranks see exactly the batches of one process;
- the scorer runs under DDP, which averages gradients over ranks. The objective reduces itself:
  ``WeightedSum(..., ranks=)`` with this module's ``ProcessGroupRanks`` (see
  ``parser.objectives.weighted``).
  Per-token losses are multiplied by ``W * T_r / T`` (``T_r`` this rank's words, ``T`` the global
  batch's), so the averaged gradient is that of ``sum / T``: the 1-process gradient of the same
  global batch. A term with an ``across_ranks`` hook (GE) sums its statistics over ranks
  (differentiably; the backward sums the ranks' gradients, which DDP's average undoes), so every
  rank holds its global loss, unscaled. The corpus-level GE cache is kept identical on every rank
  from all ranks' sentences (rank 0 checkpoints it; on resume every rank loads it);
- logged scalars are averaged over ranks (after the scaling above that is the global value);
  a step is skipped on every rank when the loss is non-finite on any;
- rank 0 alone evaluates on dev (the scores are broadcast, so early stopping agrees), writes
  TensorBoard, checkpoints (with every rank's RNG state) and predictions; the others wait.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from parser.models import EdgeScores
from parser.objectives.base import Output, ParserOutput
from parser.objectives.weighted import WeightedSum
from parser.runtime.device import resolve_device

__all__ = [
    "MODES",
    "DistributedContext",
    "DistributedObjective",
    "DistributedParser",
    "ProcessGroupRanks",
    "init_distributed",
]

log = logging.getLogger(__name__)

MODES = ("auto", "off", "on")


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in the run; the default is one process (every call a no-op)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None  # None: no process group
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def enabled(self) -> bool:
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # -- wrapping ----------------------------------------------------------------------------------

    def wrap(self, model: nn.Module):
        """``batch -> ParserOutput``: the model itself, or its DDP replica when distributed."""
        return DistributedParser(model, self) if self.enabled else model

    def objective(self, objective: WeightedSum):
        """The objective itself, or one with the global normalisation when distributed."""
        return DistributedObjective(objective, self) if self.enabled else objective

    def reseed(self, seed: int) -> None:
        """Distinct dropout streams per rank (``seed + rank``); one process keeps its stream."""
        if self.enabled:
            random.seed(seed + self.rank)
            np.random.seed(seed + self.rank)
            torch.manual_seed(seed + self.rank)

    # -- collectives (no-ops in one process) -------------------------------------------------------

    def all_finite(self, loss: Tensor) -> bool:
        """True when ``loss`` is finite on every rank (all ranks must agree to step)."""
        finite = bool(torch.isfinite(loss.detach()).all())
        if not self.enabled:
            return finite
        flag = torch.tensor([1.0 if finite else 0.0], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item() > 0)

    def sum_scalars(self, values: Mapping[str, float | Tensor]) -> dict[str, float]:
        """Each value summed over ranks (keys must be the same on every rank)."""
        keys = sorted(values)
        if not self.enabled:
            return {k: float(values[k]) for k in keys}
        stacked = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=self.device)
        dist.all_reduce(stacked)
        return dict(zip(keys, stacked.tolist()))

    def mean_scalars(self, values: Mapping[str, float | Tensor]) -> dict[str, float]:
        """Each value averaged over ranks."""
        return {k: v / self.world_size for k, v in self.sum_scalars(values).items()}

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank (pickled)."""
        if not self.enabled:
            return value
        box = [value if self.is_main else None]
        dist.broadcast_object_list(box, src=0, device=self.device if self.backend == "nccl" else None)
        return box[0]

    def on_main(self, compute: Callable[[], Any]) -> Any:
        """``compute()`` on rank 0 only, its result (or its exception, re-raised) on every rank:
        dev evaluation, reading the checkpoint to resume from."""
        if not self.enabled:
            return compute()
        result = error = None
        if self.is_main:
            try:
                result = compute()
            except Exception as caught:  # noqa: BLE001 (handed to every rank, then raised)
                error = caught
        result, error = self.broadcast_object((result, error))
        if error is not None:
            raise error
        return result

    def gather_object(self, value: Any) -> list[Any]:
        """Every rank's ``value``, in rank order, on every rank."""
        if not self.enabled:
            return [value]
        found: list[Any] = [None] * self.world_size
        dist.all_gather_object(found, value)
        return found

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier(device_ids=[self.local_rank]) if self.backend == "nccl" else dist.barrier()

    def shutdown(self) -> None:
        """Wait for every rank, then leave the process group."""
        if self.enabled and dist.is_initialized():
            self.barrier()
            dist.destroy_process_group()


def _env_int(name: str) -> int:
    raw = os.environ.get(name)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"environment variable {name}={raw!r}: expected an integer (set by torchrun)") from None


def init_distributed(mode: str, *, device: str) -> DistributedContext:
    """The context for ``trainer.distributed=mode`` and ``trainer.device=device``; joins the
    process group when distributed (``env://``: ``MASTER_ADDR``, ``MASTER_PORT`` from torchrun)."""
    mode = str(getattr(mode, "value", mode))
    if mode not in MODES:
        raise ValueError(f"trainer.distributed={mode!r}: expected one of {', '.join(MODES)}")
    launched = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    world_size = _env_int("WORLD_SIZE") if launched else 1
    if mode == "on" and not launched:
        raise ValueError(
            "trainer.distributed=on: RANK/WORLD_SIZE are not set; launch with "
            "`torchrun --nproc_per_node=N -m parser.cli.train ...`"
        )
    if mode == "off" and world_size > 1:
        raise ValueError(
            f"trainer.distributed=off but torchrun started {world_size} processes: each would "
            "train alone and write the same files; use trainer.distributed=auto"
        )
    if mode == "off" or (mode == "auto" and world_size <= 1):
        return DistributedContext(device=resolve_device(device))
    rank, local_rank = _env_int("RANK"), _env_int("LOCAL_RANK") if "LOCAL_RANK" in os.environ else 0
    if not 0 <= rank < world_size:
        raise ValueError(f"environment: RANK={rank} not in 0..{world_size - 1}")
    local = _local_device(device, local_rank)
    backend = "nccl" if local.type == "cuda" else "gloo"
    if local.type == "cuda":
        torch.cuda.set_device(local)
    if dist.is_initialized():
        if dist.get_world_size() != world_size or dist.get_rank() != rank:
            raise ValueError(
                f"a process group of world size {dist.get_world_size()} (rank {dist.get_rank()}) "
                f"already exists; the environment says {world_size} (rank {rank})"
            )
        backend = dist.get_backend()
    else:
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size)
    log.info("distributed: rank %d of %d (local rank %d), %s on %s", rank, world_size,
             local_rank, backend, local)
    if rank != 0:  # one copy of the run's progress messages; warnings still come from every rank
        logging.getLogger("parser").setLevel(logging.WARNING)
    return DistributedContext(rank=rank, world_size=world_size, local_rank=local_rank,
                              backend=backend, device=local)


def _local_device(name: str, local_rank: int) -> torch.device:
    """``auto``/``cuda``: ``cuda:LOCAL_RANK`` when CUDA exists (``auto``: else the CPU)."""
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if name not in ("auto", "cuda"):
        raise ValueError(
            f"trainer.device={name!r}: under torchrun each process uses cuda:LOCAL_RANK; "
            "set trainer.device=cuda, auto or cpu"
        )
    if not torch.cuda.is_available():
        raise ValueError(f"trainer.device={name!r}: CUDA is not available on this machine")
    if local_rank >= torch.cuda.device_count():
        raise ValueError(
            f"LOCAL_RANK={local_rank} but this node has {torch.cuda.device_count()} GPU(s): "
            "start at most one process per GPU (torchrun --nproc_per_node)"
        )
    return torch.device("cuda", local_rank)


class _EdgeScoreTensors(nn.Module):
    """The parser's scorer with plain tensors out, so that DDP sees every output: arcs, labels
    and tags feed its unused-parameter detection (the label scorer and the tag head are idle on
    unlabeled steps)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch) -> tuple[Tensor, Tensor | None, Tensor | None]:
        scores = self.model.scorer(batch)
        return scores.arcs, scores.labels, scores.tags


class DistributedParser:
    """``batch -> ParserOutput`` through DDP; ``model`` (a ``ParserModel``) keeps the weights
    (checkpoints, evaluation and decoding use it directly)."""

    def __init__(self, model: nn.Module, context: DistributedContext) -> None:
        from torch.nn.parallel import DistributedDataParallel

        self.model = model
        ids = [context.local_rank] if context.device.type == "cuda" else None
        # DDP copies rank 0's weights to every rank here.
        self.ddp = DistributedDataParallel(
            _EdgeScoreTensors(model), device_ids=ids, find_unused_parameters=True
        )

    def __call__(self, batch) -> ParserOutput:
        arcs, labels, tags = self.ddp(batch)
        return self.model.output(EdgeScores(arcs, labels, tags), batch)  # tags: the tag loss too


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
