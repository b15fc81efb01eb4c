"""``model.init``: a run that starts from another run's weights and vocabularies (active
learning's next round), with its own step, optimiser and schedule."""

from __future__ import annotations

import pytest
import torch

from parser.runtime.checkpoint import load_checkpoint
from parser.train.loop import Trainer
from parser.train.objective import taught_from_start
from tests.train.helpers import tiny_config

STEPS = ["trainer.max_steps=4", "trainer.eval_every=2"]


def test_a_warm_started_run_begins_with_the_checkpoints_weights_and_vocabularies(tmp_path):
    first = Trainer(tiny_config(*STEPS), run_dir=tmp_path / "first")
    first.fit()
    checkpoint = tmp_path / "first" / "checkpoints" / "step-00000004.pt"
    stored = load_checkpoint(checkpoint)
    fresh = Trainer(tiny_config(*STEPS), run_dir=tmp_path / "fresh")
    warm = Trainer(tiny_config(*STEPS, f"model.init={checkpoint}"), run_dir=tmp_path / "warm")
    for name, value in warm.model.state_dict().items():
        assert torch.equal(value, stored["model"][name]), name
    assert any(not torch.equal(value, stored["model"][name])
               for name, value in fresh.model.state_dict().items())
    assert warm.task.vocabs.state_dict() == stored["vocabs"]
    state = warm.fit()
    assert state.step == 4  # its own steps, not the first run's 4 more
    assert any(not torch.equal(value, stored["model"][name])
               for name, value in warm.model.state_dict().items())  # it trained


def test_a_checkpoint_of_other_sizes_is_refused_naming_the_option(tmp_path):
    first = Trainer(tiny_config(*STEPS), run_dir=tmp_path / "first")
    first.fit()
    checkpoint = tmp_path / "first" / "checkpoints" / "step-00000004.pt"
    with pytest.raises(ValueError, match="model.init=.*do not fit this run's model options"):
        Trainer(tiny_config(*STEPS, f"model.init={checkpoint}", "model.lstm_hidden=24"),
                run_dir=tmp_path / "other")
    with pytest.raises(Exception, match="model.init"):
        Trainer(tiny_config(*STEPS, f"model.init={tmp_path / 'missing.pt'}"), run_dir=tmp_path / "x")


def test_a_student_warm_started_from_its_own_teacher_is_warned_about(tmp_path, fixtures, caplog):
    first = Trainer(tiny_config(*STEPS), run_dir=tmp_path / "first")
    first.fit()
    start, other = (tmp_path / "first" / "checkpoints" / f"step-0000000{k}.pt" for k in (4, 2))
    unlabeled = f"data.unlabeled_file={fixtures / 'tiny-dev.conllu'}"

    def student(teacher) -> list[str]:
        caplog.clear()
        Trainer(tiny_config(*STEPS, f"model.init={start}", unlabeled, "objective=confident_arcs",
                            f"objective.terms.confident_arcs.checkpoint={teacher}"),
                run_dir=tmp_path / f"student-{teacher.stem}")
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"
                and "checkpoint is model.init" in r.getMessage()]

    assert student(start) == [(
        "objective.terms.confident_arcs.checkpoint is model.init: the student starts at its "
        "teacher, whose terms hold it near that start (to learn new trees, train a likelihood "
        "teacher on them first: docs/annotation.md)")]
    assert student(other) == []  # another teacher: nothing to say
    same_file = start.parent / ".." / "checkpoints" / start.name
    assert taught_from_start({"kl": {"checkpoint": str(start)}}, same_file) == ["kl"]
    assert taught_from_start({"kl": {"checkpoint": str(start)}}, None) == []
