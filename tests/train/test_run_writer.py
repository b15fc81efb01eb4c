"""``run_training`` closes the run's TensorBoard writer on every way out: success, a non-finite
loss, a preemption signal, a user error mid-run (and before the loop starts)."""

from __future__ import annotations

import os
import signal

import pytest

from parser.runtime.errors import NonFiniteError, Preempted
from parser.train import loop
from parser.train.run import run_training
from parser.train.tasks.parser_task import ParserTask
from tests.train.helpers import tiny_config

OPTIONS = ["logger.tensorboard=true", "trainer.max_steps=4", "trainer.eval_every=2",
           "trainer.final_eval=false", "trainer.num_threads=1"]


@pytest.fixture
def writers(monkeypatch) -> list:
    """The trainer's loggers, each recording whether it was closed."""
    made = []

    class Recording(loop.RunLogger):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.closed = False
            made.append(self)

        def close(self) -> None:
            self.closed = True
            super().close()

    monkeypatch.setattr(loop, "RunLogger", Recording)
    return made


def _task(fault):
    """ParserTask with ``fault(task, batch, step)`` run inside each step's loss."""

    def build(context):
        task = ParserTask(context)
        loss = task.loss

        def faulty(batch, *, step):
            result = loss(batch, step=step)
            return fault(task, result, step) or result

        task.loss = faulty
        return task

    return build


def _assert_closed(writers: list) -> None:
    assert len(writers) == 1 and writers[0].enabled is False and writers[0].closed
    assert any((writers[0].log_dir).iterdir())  # a real writer, with its event file


def test_success_closes_the_writer(tmp_path, writers):
    results = run_training(tiny_config(*OPTIONS), run_dir=tmp_path)
    assert results["state"].step == 4
    _assert_closed(writers)


def test_a_non_finite_loss_closes_the_writer(tmp_path, writers):
    def nan(task, result, step):
        result.output.loss.data.fill_(float("nan"))

    with pytest.raises(NonFiniteError):
        run_training(tiny_config(*OPTIONS, "trainer.max_nonfinite=2"), run_dir=tmp_path,
                     task=_task(nan))
    _assert_closed(writers)


def test_preemption_closes_the_writer(tmp_path, writers):
    def preempt(task, result, step):  # as tests/faults/test_preemption.py: a signal mid-step
        if step == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Preempted, match="SIGTERM received: training stopped after step 2"):
        run_training(tiny_config(*OPTIONS), run_dir=tmp_path, task=_task(preempt))
    _assert_closed(writers)


def test_a_user_error_mid_run_closes_the_writer(tmp_path, writers):
    def refuse(task, result, step):
        if step == 2:
            raise ValueError("data.train_file=x.conllu:7: a bad sentence met mid-run")

    with pytest.raises(ValueError, match="met mid-run"):
        run_training(tiny_config(*OPTIONS), run_dir=tmp_path, task=_task(refuse))
    _assert_closed(writers)


def test_an_error_before_the_loop_closes_the_writer(tmp_path, writers):
    def on_ready():
        raise ValueError("the run's record cannot be written")

    with pytest.raises(ValueError, match="record cannot be written"):
        run_training(tiny_config(*OPTIONS), run_dir=tmp_path, on_ready=on_ready)
    _assert_closed(writers)
