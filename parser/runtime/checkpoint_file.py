"""One checkpoint file: atomic writes, a digest checked on load, RNG state.

A checkpoint is a plain dict saved with ``torch.save`` and read back with ``weights_only=True``
(only tensors and Python containers/scalars inside: the trainer converts everything else). The
file is one header line, ``parser-checkpoint 2 sha256=<hex>``, then the ``torch.save`` bytes:
a flipped byte fails the digest and the file is refused by name (torch's zip reader does not
check its CRCs, so such a file would load, and parse wrongly or with NaN scores). Files of format
1 (no header) still load, unchecked. Writes go through
:func:`parser.runtime.io_atomic.atomic_write` (temporary file, fsync, rename), so a crash (kill
-9 included) leaves either the old file or the new one, never half of one; the temporary file
such a crash leaves is removed by the next run's
:meth:`parser.runtime.checkpoint.CheckpointManager.prepare`. The set of files a run keeps
(``step-N.pt``, ``best.pt`` and the manifest naming them) is :mod:`parser.runtime.checkpoint`.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from parser.runtime.io_atomic import atomic_write

__all__ = [
    "CheckpointError",
    "capture_rng",
    "file_digest",
    "load_checkpoint",
    "restore_rng",
    "save_checkpoint",
]

FORMAT = 2
_MAGIC = b"parser-checkpoint 2 sha256="
_HEADER = len(_MAGIC) + 64 + 1  # magic, hex digest, newline


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used (truncated, corrupt, wrong format)."""


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``state`` to ``path`` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    payload = buffer.getbuffer()
    with atomic_write(path, binary=True) as handle:
        handle.write(_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n")
        handle.write(payload)
    return path


def load_checkpoint(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint; :class:`CheckpointError` naming the file if it is unreadable."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise CheckpointError(
            f"checkpoint {path}: is a directory, not a checkpoint file (e.g. {path / 'best.pt'})"
        )
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: no such file")
    source: Path | io.BytesIO = path
    with open(path, "rb") as handle:
        header = handle.read(_HEADER)
        # the payload read as its own bytes object, which BytesIO shares instead of copying
        payload = handle.read() if header.startswith(_MAGIC) else None
    if payload is not None:
        expected = header[len(_MAGIC) : _HEADER - 1].decode("ascii", "replace")
        if hashlib.sha256(payload).hexdigest() != expected:
            raise CheckpointError(
                f"checkpoint {path} ({len(header) + len(payload)} bytes) is truncated or corrupt (its "
                "content does not match the sha256 digest written with it) and was refused"
            )
        source = io.BytesIO(payload)
    del payload
    try:
        state = torch.load(source, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError ...
        size = path.stat().st_size
        raise CheckpointError(
            f"checkpoint {path} ({size} bytes) is truncated or corrupt, or not a checkpoint, "
            f"and was refused: {_load_failure(error)}"
        ) from error
    version = state.get("format") if isinstance(state, dict) else type(state).__name__
    # format 1 has no header; a format-2 payload without its header lost it: refused
    if version not in (1, FORMAT) or (version == FORMAT) != isinstance(source, io.BytesIO):
        raise CheckpointError(f"checkpoint {path}: unknown format {version!r} (expected {FORMAT})")
    return state


def _load_failure(error: Exception) -> str:
    """The part of torch's message that says what broke (not its advice to load unsafely)."""
    text = str(error).strip()
    if "WeightsUnpickler error:" in text:  # not a torch.save file, or objects beyond tensors
        detail = text.split("WeightsUnpickler error:", 1)[1].strip().split("\n\n", 1)[0]
        return f"{type(error).__name__}: {detail.strip()}"
    return f"{type(error).__name__}: {text.split('. ', 1)[0]}"


def file_digest(path: str | os.PathLike) -> str | None:
    """The sha256 written in a checkpoint's header (read from the header alone, not checked
    against the content: :func:`load_checkpoint` does that); None for a file of format 1."""
    with open(path, "rb") as handle:
        header = handle.read(_HEADER)
    if not header.startswith(_MAGIC) or len(header) < _HEADER:
        return None
    return header[len(_MAGIC) : _HEADER - 1].decode("ascii", "replace")


def capture_rng() -> dict[str, Any]:
    """Python, NumPy and torch (CPU and CUDA) generator states, as checkpoint-safe values."""
    version, mt_state, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(mt_state), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    version, mt_state, gauss = state["python"]
    random.setstate((version, tuple(mt_state), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
