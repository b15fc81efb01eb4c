"""Distilling a parser into a lean student (issue 47): the student is any model config trained with
the KL objective to a teacher checkpoint (``objective=kl_only``: KL(teacher || student) on
unlabeled text), not a loop of its own; here a convolutional student scoring labels at the heads
learns a BiLSTM teacher's trees from text alone. (The KL term itself is checked against
enumeration in tests/objectives/test_unsupervised.py.)"""

from __future__ import annotations

from pathlib import Path

import torch

from parser.data.conllu_io import read_conllu
from parser.inference import load_parser, parse
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STUDENT = ["model/encoder=cnn", "model.encoder.conv_width=16", "model.encoder.conv_depth=2",
           "model.encoder.conv_dilation=2", "model.label_grid=false"]


def _agreement(student, vocabs, sentences, teacher_heads) -> float:
    predicted = parse(student, sentences, vocabs, tokens_per_batch=500, score=False).heads
    pairs = [(a, b) for mine, theirs in zip(predicted, teacher_heads) for a, b in zip(mine, theirs)]
    return sum(a == b for a, b in pairs) / len(pairs)


def test_a_convolutional_student_learns_its_teachers_trees_from_text(tmp_path):
    torch.manual_seed(0)
    train = FIXTURES / "tiny-train.conllu"
    Trainer(tiny_config("trainer.max_steps=150", "trainer.eval_every=150", f"data.dev_file={train}"),
            run_dir=tmp_path / "teacher").fit()
    teacher_checkpoint = tmp_path / "teacher" / "checkpoints" / "best.pt"
    teacher, teacher_vocabs, _ = load_parser(teacher_checkpoint)
    sentences = read_conllu(train).sentences
    teacher_heads = parse(teacher, sentences, teacher_vocabs, tokens_per_batch=500, score=False).heads

    student = Trainer(tiny_config(*STUDENT, "objective=kl_only",
                                  f"objective.terms.kl.checkpoint={teacher_checkpoint}",
                                  f"data.unlabeled_file={train}",
                                  "trainer.max_steps=150", "trainer.eval_every=150",
                                  f"data.dev_file={train}"),
                      run_dir=tmp_path / "student")
    assert student.task.objective.names == ["kl"] and student.model.scorer.conv is not None
    before = _agreement(student.model, student.task.vocabs, sentences, teacher_heads)
    student.fit()
    model, vocabs, _ = load_parser(tmp_path / "student" / "checkpoints" / "best.pt")
    assert model.decoder.label_grid is False
    after = _agreement(model, vocabs, sentences, teacher_heads)
    assert after > before + 0.2, (before, after)  # 0.20 -> 0.48 of the words when written


def test_a_student_reads_with_its_teachers_vocabularies(tmp_path, caplog):
    """Likelihood on the training trees plus KL on the same file read again as text: built from
    both, the vocabularies would count every word twice (and keep the once-seen ones the teacher
    reads as UNK); a new student takes its teacher's instead."""
    train = FIXTURES / "tiny-train.conllu"
    Trainer(tiny_config("data.min_freq=2", "trainer.max_steps=2", "trainer.eval_every=2", f"data.dev_file={train}"),
            run_dir=tmp_path / "teacher").fit()
    teacher_checkpoint = tmp_path / "teacher" / "checkpoints" / "best.pt"
    teacher_vocabs = load_parser(teacher_checkpoint)[1]
    student = Trainer(tiny_config(*STUDENT, "objective=kl", f"objective.terms.kl.checkpoint={teacher_checkpoint}",
                                  f"data.unlabeled_file={train}", "trainer.max_steps=2",
                                  "model.layers=[xpos]", f"data.dev_file={train}"),
                      run_dir=tmp_path / "student")
    assert student.task.vocabs.state_dict() == teacher_vocabs.state_dict()
    doubled = Trainer(tiny_config("data.min_freq=2", f"data.unlabeled_file={train}", "trainer.max_steps=2", f"data.dev_file={train}"),
                      run_dir=tmp_path / "doubled").task.vocabs
    assert len(doubled.words) > len(teacher_vocabs.words)  # what the student would have read
    assert "model.layers ['xpos']" in caplog.text  # the tiny teacher has no XPOS classes
