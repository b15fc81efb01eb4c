"""The transformer encoder (all-MiniLM-L6-v2, unpacked offline) through the real trainer: every
objective of ``configs/objective/`` on a labeled + unlabeled mix, under the non-projective and
the projective tree CRF, frozen and fine-tuned (issue 16: "works with both CRFs, every
objective"). DDP with the encoder: tests/train/test_distributed_transformer.py."""

from __future__ import annotations

import math
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never the network

from pathlib import Path

import pytest
import torch
from transformers import AutoModel  # the optional extra, installed where MiniLM is

from parser.train.loop import Trainer
from tests.train.helpers import Recorder, tiny_config

STEPS = 3
# The tiny fixture split into 16 labeled trees and unlabeled text, so that the unlabeled terms
# (entropy, GE, KL) see batches; a small scorer on the encoder's layer mix.
SETUP = ["data.labeled_size=16", "data.unlabeled_ratio=1.0", "data.tokens_per_batch=100",
         f"trainer.max_steps={STEPS}", f"trainer.eval_every={STEPS}", "trainer.log_every=1",
         "trainer.final_eval=false", "logger.arc_entropy=false", "optim.lr=1e-2"]


def fit(run_dir: Path, folder: Path, *overrides: str) -> tuple[Trainer, dict[int, dict[str, float]]]:
    cfg = tiny_config("model/encoder=transformer", f"model.encoder.name={folder}", *SETUP, *overrides)
    trainer = Trainer(cfg, run_dir=run_dir)
    trainer.logger = recorder = Recorder()
    trainer.fit()
    return trainer, recorder.values


@pytest.fixture(scope="module")
def teachers(minilm, tmp_path_factory) -> dict[str, Path]:
    """A likelihood run's checkpoint per tree CRF: the teachers of the KL (self-training) terms,
    which compare the student's distribution with one of its own kind."""
    found = {}
    for crf, overrides in CRFS.items():
        run = tmp_path_factory.mktemp(f"teacher_{crf}")
        fit(run, minilm, "objective=likelihood", *overrides)
        found[crf] = run / "checkpoints" / "best.pt"
    return found


OBJECTIVES = ["likelihood", "entropy", "entropy_annealed", "risk", "risk_annealed", "ge",
              "likelihood_ge", "likelihood_ge_estimated", "local", "kl", "kl_only"]
CRFS = {"matrix_tree": [], "projective": ["model.crf=projective", "model.projective=true"]}


@pytest.mark.parametrize("crf", CRFS)
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_every_objective_trains_the_encoder_mix_under_both_crfs(minilm, teachers, tmp_path, objective, crf):
    extra = [f"objective={objective}", *CRFS[crf]]
    if objective.startswith("kl"):
        extra.append(f"objective.terms.kl.checkpoint={teachers[crf]}")
    if objective == "likelihood_ge_estimated":  # the tiny fixture supports few templates
        extra += ["objective.terms.ge.min_count=1", "objective.terms.ge.warmup=0"]
    trainer, steps = fit(tmp_path, minilm, *extra)
    mix = trainer.model.scorer.transformer.mix
    assert sorted(steps) == list(range(1, STEPS + 1))
    for step, values in steps.items():
        assert math.isfinite(values["train/total"]) and values["train/grad_norm"] > 0, (step, values)
    # The gradient reached the encoder: its layer mix moved from the uniform start.
    assert not torch.allclose(mix.weights.detach(), torch.zeros_like(mix.weights))
    # Frozen: no transformer weight is trained.
    assert not any(p.requires_grad for p in trainer.model.scorer.transformer.model.parameters())
    assert (tmp_path / "checkpoints" / "best.pt").is_file()


def test_a_teacher_of_the_other_crf_is_refused_by_name(minilm, teachers, tmp_path):
    with pytest.raises(ValueError, match="teacher's TreeCRF and the model's ProjectiveTreeCRF differ"):
        fit(tmp_path, minilm, "objective=kl", f"objective.terms.kl.checkpoint={teachers['matrix_tree']}",
            *CRFS["projective"])


def test_finetuned_encoder_weights_move(minilm, tmp_path):
    trainer, steps = fit(tmp_path, minilm, "objective=likelihood", "model.encoder.finetune=true",
                         "model.encoder.cache=false", "model.encoder.lr=1e-3",
                         "model.encoder.warmup_steps=1")
    model = trainer.model.scorer.transformer.model
    start = pretrained_weights(minilm)
    moved = [name for name, p in model.named_parameters() if not torch.equal(p.detach(), start[name])]
    assert all(math.isfinite(v["train/total"]) for v in steps.values())
    assert len(moved) > len(start) // 2, f"{len(moved)} of {len(start)} encoder tensors trained"


def pretrained_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The encoder's weights as unpacked, before any training."""
    return {name: p.detach().clone() for name, p in AutoModel.from_pretrained(str(folder)).named_parameters()}
