"""Data-parallel training with ``torch.distributed`` and ``DistributedDataParallel`` (``torchrun``).

``trainer.distributed``: ``auto`` (distributed when ``torchrun`` set ``RANK``/``WORLD_SIZE`` with
more than one process), ``on`` (required; a plain launch is an error), ``off`` (one process;
a multi-process launch is an error). The same config runs either way.

What each rank does (``W`` ranks, rank ``r``):

- the process group is gloo on the CPU, NCCL on CUDA (``cuda:LOCAL_RANK``);
- the training streams split each global batch by sentence (``BucketBatcher(num_replicas=W,
  rank=r)``): together the ranks see exactly the batches of one process;
- the scorer runs under DDP, which averages gradients over ranks. The objective reduces itself:
  ``WeightedSum(..., ranks=)`` with ``ProcessGroupRanks`` (:mod:`parser.train.ddp`, beside DDP's
  wrappers; see ``parser.objectives.weighted``).
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

What crosses between ranks is tensors (:mod:`parser.train.rank_messages`: no pickled object is
accepted from another rank); on one machine the store the ranks meet at listens on loopback only
(:mod:`parser.train.rank_store`).
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

from parser.objectives.weighted import WeightedSum
from parser.runtime.checkpoint import capture_rng
from parser.runtime.device import resolve_device
from parser.train.ddp import DistributedObjective, DistributedParser, ProcessGroupRanks
from parser.train.rank_messages import JSON, Codec, decode_error, encode_error, pack_rng, unpack_rng
from parser.train.rank_store import loopback_store

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

    def broadcast_flag(self, value: bool) -> bool:
        """Rank 0's ``value`` on every rank."""
        if not self.enabled:
            return value
        flag = torch.tensor([1.0 if value else 0.0], device=self.device)
        dist.broadcast(flag, src=0)
        return bool(flag.item() > 0)

    def on_main(self, compute: Callable[[], Any], *, send: Codec = JSON) -> Any:
        """``compute()`` on rank 0 only, its result (or its exception, re-raised) on every rank:
        dev evaluation, reading the checkpoint to resume from. ``send`` turns the result into the
        bytes that travel (plain JSON values by default; see :mod:`parser.train.rank_messages`)."""
        if not self.enabled:
            return compute()
        data, result, error = b"", None, None
        if self.is_main:
            try:
                result = compute()
                data = b"r" + send.encode(result)
            except Exception as caught:  # noqa: BLE001 (handed to every rank, then raised)
                data, error = b"e" + encode_error(caught), caught
        data = self._broadcast_bytes(data)
        if error is not None:
            raise error
        if data[:1] == b"e":
            raise decode_error(data[1:])
        return result if self.is_main else send.decode(data[1:])

    def gather_rng(self) -> list[dict[str, Any]]:
        """Every rank's ``capture_rng()`` state, in rank order, on every rank."""
        own = capture_rng()
        if not self.enabled:
            return [own]
        vector = pack_rng(own).to(self.device)
        size = torch.tensor([vector.numel()], dtype=torch.int64, device=self.device)
        sizes = [torch.empty_like(size) for _ in range(self.world_size)]
        dist.all_gather(sizes, size)
        if any(int(s.item()) != vector.numel() for s in sizes):  # every rank sees it: all raise
            raise ValueError(f"RNG states of {[int(s.item()) for s in sizes]} values on ranks 0.."
                             f"{self.world_size - 1}: the ranks run different torch or CUDA set-ups")
        found = [torch.empty_like(vector) for _ in range(self.world_size)]
        dist.all_gather(found, vector)
        return [unpack_rng(v, like=own) for v in found]

    def _broadcast_bytes(self, data: bytes) -> bytes:
        """Rank 0's ``data`` on every rank (its length first, then the bytes as a uint8 tensor)."""
        size = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        dist.broadcast(size, src=0)
        if self.is_main:
            payload = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
        else:
            payload = torch.empty(int(size.item()), dtype=torch.uint8, device=self.device)
        if payload.numel():
            dist.broadcast(payload, src=0)
        return data if self.is_main else payload.cpu().numpy().tobytes()

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
    process group when distributed (``MASTER_ADDR``, ``MASTER_PORT`` from torchrun: a store bound
    to loopback when that address is loopback, :mod:`parser.train.rank_store`; else ``env://``)."""
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
        store = loopback_store(rank=rank, world_size=world_size)  # None: env://, as torch does
        dist.init_process_group(backend, init_method="env://" if store is None else None, store=store,
                                rank=rank, world_size=world_size)
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
