"""The torch device a run or a command-line tool uses."""

from __future__ import annotations

import torch

__all__ = ["resolve_device"]


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
