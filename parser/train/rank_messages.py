"""What the ranks of a distributed run send each other, as tensors: nothing that arrives from
another rank is unpickled into arbitrary objects.

- flags, counts and scalars: float tensors (``DistributedContext.all_finite``, ``sum_scalars``);
- RNG states: one float64 vector per rank (:func:`pack_rng`; every entry an integer below 2**32,
  a byte or a float64, so the round trip is exact), its layout that of the receiver's own state;
- rank 0's results (:meth:`DistributedContext.on_main`): bytes in a uint8 tensor, written and
  read by a :class:`Codec`: JSON for plain values and dataclasses of them (a dev score, None), a
  path as its file-system bytes, an error as its class name and message (rebuilt from
  :data:`ERRORS`, else a RuntimeError that names it);
- the checkpoint being resumed (:data:`CHECKPOINT`): the one nested object that crosses, a dict of
  tensors, numbers, strings and containers of any shape. It is read with ``weights_only=True``,
  torch's restricted unpickler that builds tensors and plain containers only (the loader of
  checkpoint files on disk), never arbitrary objects.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from parser.runtime.checkpoint_file import CheckpointError
from parser.runtime.errors import CheckpointWriteError, NonFiniteError, Preempted, RunStopped

__all__ = ["CHECKPOINT", "ERRORS", "JSON", "PATH", "Codec", "decode_error", "encode_error", "json_codec",
           "pack_rng", "unpack_rng"]

# Errors rank 0 may hand to the others, rebuilt as the same class (exit statuses follow the class).
ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (ValueError, RuntimeError, OSError, FileNotFoundError, PermissionError, KeyError,
                CheckpointError, CheckpointWriteError, NonFiniteError, Preempted, RunStopped)
}


@dataclasses.dataclass(frozen=True)
class Codec:
    """How one kind of value becomes bytes and back."""

    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


def json_codec(cls: type | None = None) -> Codec:
    """JSON of plain values (``cls`` None), or of a dataclass ``cls`` of them (or None)."""

    def encode(value: Any) -> bytes:
        if cls is not None and value is not None:
            value = dataclasses.asdict(value)
        return json.dumps(value, default=float).encode()  # numpy or tensor scalars: floats

    def decode(data: bytes) -> Any:
        value = json.loads(data.decode())
        return cls(**value) if cls is not None and value is not None else value

    return Codec(encode, decode)


JSON = json_codec()


def _save(state: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _load(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


CHECKPOINT = Codec(_save, _load)
PATH = Codec(os.fsencode, lambda data: Path(os.fsdecode(data)))  # a file rank 0 wrote


def encode_error(error: BaseException) -> bytes:
    return json.dumps({"type": type(error).__name__, "message": str(error)}).encode()


def decode_error(data: bytes) -> Exception:
    """The error rank 0 raised: its class when listed in :data:`ERRORS`, else a RuntimeError."""
    found = json.loads(data.decode())
    cls = ERRORS.get(found["type"])
    if cls is None:
        return RuntimeError(f"on rank 0: {found['type']}: {found['message']}")
    return cls(found["message"])


# -- RNG states -----------------------------------------------------------------------------------

def pack_rng(state: dict[str, Any]) -> Tensor:
    """``capture_rng()``'s state as one float64 vector: Python's Mersenne Twister (version, 625
    words, gauss flag and value), NumPy's (624 keys, position, gauss flag and value), torch's
    CPU bytes, then each CUDA device's bytes."""
    version, words, gauss = state["python"]
    _, keys, pos, has_gauss, cached = state["numpy"]
    parts = [
        torch.tensor([float(version), *map(float, words), float(gauss is None),
                      0.0 if gauss is None else float(gauss)], dtype=torch.float64),
        keys.to(torch.float64),
        torch.tensor([float(pos), float(has_gauss), float(cached)], dtype=torch.float64),
        state["torch"].to(torch.float64),
        *(cuda.to(torch.float64) for cuda in state.get("cuda", [])),
    ]
    return torch.cat(parts)


def unpack_rng(vector: Tensor, *, like: dict[str, Any]) -> dict[str, Any]:
    """The state :func:`pack_rng` packed, laid out as ``like`` (this rank's own state: every rank
    runs the same software, so the sizes agree; a vector of another length is refused)."""
    vector = vector.to("cpu", torch.float64)
    expected = pack_rng(like).numel()
    if vector.numel() != expected:
        raise ValueError(f"an RNG state of {vector.numel()} values from another rank; this rank's has "
                         f"{expected} (the ranks run different torch or CUDA set-ups)")
    values = iter(vector.tolist())

    def take(n: int) -> list[float]:
        return [next(values) for _ in range(n)]

    words = len(like["python"][1])
    version, *mt = take(1 + words)
    gauss_none, gauss = take(2)
    keys = torch.tensor(take(like["numpy"][1].numel()), dtype=torch.int64)
    pos, has_gauss, cached = take(3)
    state = {
        "python": [int(version), [int(w) for w in mt], None if gauss_none else gauss],
        "numpy": [like["numpy"][0], keys, int(pos), int(has_gauss), cached],
        "torch": torch.tensor(take(like["torch"].numel()), dtype=torch.uint8),
    }
    if "cuda" in like:
        state["cuda"] = [torch.tensor(take(c.numel()), dtype=torch.uint8) for c in like["cuda"]]
    return state
