from __future__ import annotations

import pytest
import torch
from torch import nn

from parser.runtime.checkpoint import load_checkpoint
from parser.train.averaging import WeightAverage, build_average, restore_average
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config

STEPS = [[1.0, -2.0], [3.0, 0.5], [-1.0, 4.0], [2.0, 2.0]]  # the weight after each update


def _model() -> nn.Linear:
    model = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(7.0)  # the initial weights must not enter any average
    return model


def _run(average: WeightAverage, model: nn.Linear, steps: list[list[float]]) -> None:
    for values in steps:
        with torch.no_grad():
            model.weight.copy_(torch.tensor([values]))
        average.update()


def test_ema_equals_the_hand_computed_bias_corrected_average() -> None:
    model, d = _model(), 0.9
    average = WeightAverage(model, kind="ema", decay=d)
    _run(average, model, STEPS[:1])
    assert average.average["weight"].tolist() == [[1.0, -2.0]]  # t = 1: the weights themselves
    _run(average, model, STEPS[1:])
    t = len(STEPS)
    for j in range(2):
        expected = sum((1 - d) * d ** (t - k) * STEPS[k - 1][j] for k in range(1, t + 1))
        expected /= 1 - d**t
        assert average.average["weight"][0, j].item() == pytest.approx(expected, rel=1e-12)
    # By hand for the first component: weights 1, 3, -1, 2 with d = 0.9.
    by_hand = (0.1 * 0.729 * 1 + 0.1 * 0.81 * 3 + 0.1 * 0.9 * -1 + 0.1 * 2) / (1 - 0.6561)
    assert average.average["weight"][0, 0].item() == pytest.approx(by_hand, rel=1e-12)
    assert average.updates == 4


def test_uniform_is_the_mean_of_the_updates() -> None:
    model = _model()
    average = build_average(model, kind="uniform", decay=0.5)
    _run(average, model, STEPS)
    assert average.average["weight"].tolist() == [[1.25, 1.125]]


def test_swapped_in_shows_the_average_then_gives_the_raw_weights_back() -> None:
    model = _model()
    average = WeightAverage(model, kind="uniform")
    _run(average, model, STEPS)
    with average.swapped_in():
        assert model.weight.tolist() == [[1.25, 1.125]]
        assert average.raw_weights()["weight"].tolist() == [[2.0, 2.0]]
        with pytest.raises(RuntimeError, match="swapped in"):
            average.update()
    assert model.weight.tolist() == [[2.0, 2.0]]


def test_state_round_trip_continues_exactly() -> None:
    straight_model = _model()
    straight = WeightAverage(straight_model, kind="ema", decay=0.7)
    _run(straight, straight_model, STEPS)

    first_model = _model()
    first = WeightAverage(first_model, kind="ema", decay=0.7)
    _run(first, first_model, STEPS[:2])
    with first.swapped_in():  # saved as a checkpoint is: inside the swap
        state = first.state_dict()
    resumed_model = _model()
    resumed = WeightAverage(resumed_model, kind="ema", decay=0.7)
    restore_average(resumed, state)
    assert resumed_model.weight.tolist() == [STEPS[1]]  # raw weights, not the average
    _run(resumed, resumed_model, STEPS[2:])
    assert torch.equal(resumed.average["weight"], straight.average["weight"])
    assert resumed.updates == straight.updates


def test_mismatched_options_are_refused() -> None:
    model = _model()
    state = WeightAverage(model, kind="ema", decay=0.9).state_dict()
    with pytest.raises(ValueError, match="ema_decay"):
        WeightAverage(model, kind="ema", decay=0.99).load_state_dict(state)
    with pytest.raises(ValueError, match="optim.average=ema"):
        restore_average(None, state)
    with pytest.raises(ValueError, match="optim.average"):
        WeightAverage(model, kind="polyak")
    with pytest.raises(ValueError, match="ema_decay"):
        WeightAverage(model, kind="ema", decay=1.0)
    assert build_average(model, kind=None, decay=0.9) is None


def _params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


COMMON = ["trainer.eval_every=4", "trainer.keep_last=10", "trainer.patience=null",
          "optim.lr=0.01", "model.dropout=0.3"]


def test_trainer_evaluates_and_saves_the_average_and_trains_the_raw_weights(tmp_path) -> None:
    plain = Trainer(tiny_config("trainer.max_steps=8", *COMMON), run_dir=tmp_path / "plain")
    plain.fit()
    trainer = Trainer(
        tiny_config("trainer.max_steps=8", "optim.average=ema", "optim.ema_decay=0.8", *COMMON),
        run_dir=tmp_path / "avg",
    )
    seen = []
    dev_score = trainer.task.dev_score
    trainer.task.dev_score = lambda: (seen.append(_params(trainer.model)), dev_score())[1]
    trainer.fit()
    # Training itself is untouched by averaging: the raw weights equal the plain run's.
    for name, value in _params(plain.model).items():
        assert torch.equal(value, dict(trainer.model.named_parameters())[name]), name
    # The dev evaluation at step 8 saw the average, and the checkpoint keeps it as its model.
    average = {name: t.float() for name, t in trainer.average.average.items()}
    assert len(seen) == 2 and trainer.average.updates == 8
    checkpoint = load_checkpoint(tmp_path / "avg" / "checkpoints" / "step-00000008.pt")
    for name, value in average.items():
        assert torch.equal(seen[-1][name], value), name
        assert torch.equal(checkpoint["model"][name], value), name
        assert torch.equal(checkpoint["average"]["raw"][name], trainer.model.state_dict()[name])
        assert not torch.equal(value, trainer.model.state_dict()[name]), name


def test_trainer_resume_restores_the_average_exactly(tmp_path) -> None:
    options = ["trainer.max_steps=10", "optim.average=ema", "optim.ema_decay=0.8", *COMMON]
    straight = Trainer(tiny_config(*options), run_dir=tmp_path / "a")
    straight.fit()
    checkpoint = tmp_path / "a" / "checkpoints" / "step-00000004.pt"
    resumed = Trainer(tiny_config(*options, f"trainer.resume={checkpoint}"), run_dir=tmp_path / "b")
    assert resumed.average.updates == 4
    resumed.fit()
    for name, value in _params(straight.model).items():
        assert torch.equal(value, dict(resumed.model.named_parameters())[name]), name
    for name, value in straight.average.average.items():
        assert torch.equal(value, resumed.average.average[name]), name
    with pytest.raises(ValueError, match="optim.average"):
        Trainer(tiny_config(*COMMON, f"trainer.resume={checkpoint}"), run_dir=tmp_path / "c")
