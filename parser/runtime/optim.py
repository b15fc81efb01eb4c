"""Optimiser and learning-rate schedule from the ``optim`` config group.

The schedule is a multiplier of ``optim.lr``: a linear warm-up over ``warmup_steps`` followed by
a decay counted from the end of the warm-up (none, linear or cosine to 0 at ``total_steps``, or
exponential by ``decay_rate`` every ``decay_steps``). It is a pure function of the step, so a
resumed run's schedule only needs the scheduler's step count back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from parser.config import Decay, OptimConfig, OptimName

__all__ = ["build_optimizer", "build_scheduler", "lr_factor"]


def build_optimizer(params: Iterable[torch.nn.Parameter], cfg: OptimConfig) -> torch.optim.Optimizer:
    """Adam or AdamW over the trainable ``params`` with the config's lr, betas, eps, decay."""
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("build_optimizer: the model has no trainable parameters")
    # A parameter may carry ``optim_group = {"name", "lr", "warmup_steps"}`` (a fine-tuned
    # pretrained encoder): it goes into a group of its own with that lr and warm-up.
    groups: dict[str, dict] = {}
    for p in params:
        spec = getattr(p, "optim_group", None)
        key = spec["name"] if spec else ""
        if key not in groups:
            groups[key] = {"params": []} if not spec else {
                "params": [], "name": key, "lr": float(spec["lr"]),
                "warmup_steps": int(spec["warmup_steps"])}
        groups[key]["params"].append(p)
    if cfg.lr <= 0:
        raise ValueError(f"optim.lr must be positive, got {cfg.lr}")
    if len(cfg.betas) != 2:
        raise ValueError(f"optim.betas must have two values, got {list(cfg.betas)}")
    betas = (float(cfg.betas[0]), float(cfg.betas[1]))
    name = OptimName(cfg.name)
    cls = torch.optim.AdamW if name is OptimName.adamw else torch.optim.Adam
    return cls(list(groups.values()), lr=cfg.lr, betas=betas, eps=cfg.eps,
               weight_decay=cfg.weight_decay)


def lr_factor(step: int, cfg: OptimConfig, *, total_steps: int,
              warmup_steps: int | None = None) -> float:
    """The multiplier of ``optim.lr`` at optimiser step ``step`` (0-based).

    >>> from parser.config import OptimConfig
    >>> cfg = OptimConfig(warmup_steps=4, decay="linear")
    >>> [round(lr_factor(s, cfg, total_steps=8), 3) for s in range(9)]
    [0.25, 0.5, 0.75, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0]
    """
    warmup = max(int(cfg.warmup_steps if warmup_steps is None else warmup_steps), 0)
    if step < warmup:
        return (step + 1) / warmup
    after = step - warmup
    span = max(total_steps - warmup, 1)
    decay = Decay(cfg.decay)
    if decay is Decay.none:
        return 1.0
    if decay is Decay.linear:
        return max(0.0, 1.0 - after / span)
    if decay is Decay.cosine:
        return 0.5 * (1.0 + math.cos(math.pi * min(after, span) / span))
    if cfg.decay_steps <= 0:
        raise ValueError(f"optim.decay_steps must be positive, got {cfg.decay_steps}")
    return float(cfg.decay_rate) ** (after / cfg.decay_steps)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: OptimConfig, *, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` applying :func:`lr_factor` (a group's own ``warmup_steps``, where it has
    one); call ``step()`` after each optimiser step."""
    def factor(warmup: int | None):
        return lambda step: lr_factor(step, cfg, total_steps=total_steps, warmup_steps=warmup)

    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, [factor(group.get("warmup_steps")) for group in optimizer.param_groups]
    )
