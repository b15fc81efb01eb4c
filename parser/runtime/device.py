"""The torch device a run or a command-line tool uses."""

from __future__ import annotations

import os

import torch

__all__ = ["bound_kernel_cache", "resolve_device"]

# Compiled oneDNN kernels kept at once by a prediction process (see bound_kernel_cache).
PREDICTION_KERNEL_CACHE = 8


def bound_kernel_cache() -> None:
    """Bound oneDNN's cache of compiled kernels (1,024 by default, one per input shape of the CPU
    LSTM), unless the user set ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``: every batch shape of a long
    file is new, and the cache, not the data, made prediction's peak memory grow with the file
    (experiments/results/predict_memory.md). oneDNN reads the variable at its first kernel, so
    this takes effect when called before the first batch."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(PREDICTION_KERNEL_CACHE))


def resolve_device(name: str) -> torch.device:
    """``auto``: CUDA when present, else the CPU; otherwise a torch device name."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"trainer.device={name!r}: not a device name ({error})") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"trainer.device={name!r}: CUDA is not available on this machine")
    return device
