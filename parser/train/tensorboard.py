"""The run's TensorBoard writer; only the trainer holds one.

Scalars go under ``train/<term>/<key>`` (objective logs), ``train/lr``, ``train/grad_norm``,
``train/sentences_per_s``, ``train/tokens_per_s``, ``train/arc_entropy``, ``dev/uas``,
``dev/las``; the run's hyper-parameters and final metrics go to the hparams plugin at the end.
A disabled logger (``logger.tensorboard=false``, or a non-zero distributed rank) does nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["RunLogger", "flatten_hparams"]


def flatten_hparams(config: Mapping[str, Any], *, prefix: str = "") -> dict[str, Any]:
    """Nested config as ``{"model.lstm_hidden": 400, ...}`` with values TensorBoard accepts
    (numbers, strings, booleans; lists and None written as text).

    >>> flatten_hparams({"optim": {"lr": 0.002, "betas": [0.9, 0.9]}, "seed": None})
    {'optim.lr': 0.002, 'optim.betas': '[0.9, 0.9]', 'seed': 'None'}
    """
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_hparams(value, prefix=f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:
            flat[name] = str(value)
    return flat


class RunLogger:
    """A ``SummaryWriter`` in ``log_dir``, or nothing when ``log_dir`` is None."""

    def __init__(self, log_dir: str | Path | None, *, flush_secs: int = 30) -> None:
        self.log_dir = None if log_dir is None else Path(log_dir)
        self._writer = None
        if self.log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter  # imports tensorboard: only when used

            self._writer = SummaryWriter(str(self.log_dir), flush_secs=flush_secs)

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def scalars(self, values: Mapping[str, float], *, step: int) -> None:
        if self._writer is None:
            return
        for tag, value in values.items():
            value = float(value)
            if math.isfinite(value):
                self._writer.add_scalar(tag, value, global_step=step)

    def hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float | None]) -> None:
        """Hyper-parameters with the run's final metrics (non-numbers left out)."""
        if self._writer is None:
            return
        numbers = {
            f"hparam/{k}": float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and math.isfinite(float(v))
        }
        self._writer.add_hparams(dict(hparams), numbers, run_name=".")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None
