from __future__ import annotations

import math

import pytest
import torch

from parser.config import OptimConfig
from parser.runtime.optim import build_optimizer, build_scheduler, lr_factor


def test_warmup_then_exponential_decay():
    cfg = OptimConfig(warmup_steps=2, decay="exponential", decay_rate=0.5, decay_steps=4)
    factors = [lr_factor(s, cfg, total_steps=100) for s in range(7)]
    assert factors[:2] == [0.5, 1.0]
    assert factors[2:] == pytest.approx([1.0, 0.5**0.25, 0.5**0.5, 0.5**0.75, 0.5])


def test_cosine_reaches_zero():
    cfg = OptimConfig(warmup_steps=0, decay="cosine")
    assert lr_factor(0, cfg, total_steps=10) == 1.0
    assert lr_factor(5, cfg, total_steps=10) == pytest.approx(0.5)
    assert lr_factor(10, cfg, total_steps=10) == pytest.approx(0.0)


def test_optimizer_and_scheduler_follow_the_config():
    weight = torch.nn.Parameter(torch.ones(3))
    cfg = OptimConfig(name="adam", lr=0.1, warmup_steps=4, decay="none", betas=[0.8, 0.7])
    optimizer = build_optimizer([weight], cfg)
    assert isinstance(optimizer, torch.optim.Adam) and not isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.param_groups[0]["betas"] == (0.8, 0.7)
    scheduler = build_scheduler(optimizer, cfg, total_steps=10)
    lrs = []
    for _ in range(5):
        lrs.append(optimizer.param_groups[0]["lr"])
        weight.sum().backward()
        optimizer.step(), scheduler.step()
    assert lrs == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1])
    assert isinstance(build_optimizer([weight], OptimConfig(name="adamw")), torch.optim.AdamW)


def test_bad_options_raise():
    weight = torch.nn.Parameter(torch.ones(1))
    with pytest.raises(ValueError, match="optim.lr"):
        build_optimizer([weight], OptimConfig(lr=0.0))
    with pytest.raises(ValueError, match="no trainable"):
        build_optimizer([torch.nn.Parameter(torch.ones(1), requires_grad=False)], OptimConfig())
    assert math.isfinite(lr_factor(3, OptimConfig(), total_steps=1))
