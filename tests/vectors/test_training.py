"""model.vectors in training and prediction: the rows kept are stored in the checkpoint (the
vectors file is not needed to predict), frozen rows stay as read while fine-tuned ones train,
and a parser without vectors is as before."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hydra.errors import ConfigCompositionException

from parser.data.conllu_io import read_conllu
from parser.data.vectors import read_vectors
from parser.data.vocab import N_SPECIAL
from parser.inference import parse
from parser.inference.loading import load_parser
from parser.models.parser_model import build_parser
from parser.runtime.checkpoint import load_checkpoint
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config

STEPS = ["trainer.max_steps=2", "trainer.eval_every=2", "trainer.final_eval=false"]


@pytest.fixture
def vectors_file(tmp_path, fixtures):
    """A .vec of 40 words that training never sees, then the lowercased training forms."""
    forms = {f for s in read_conllu(fixtures / "tiny-train.conllu").sentences for f in s.forms}
    words = [f"extra{i}" for i in range(40)] + sorted({f.lower() for f in forms})
    rng = np.random.default_rng(0)
    path = tmp_path / "vectors" / "v.vec"
    path.parent.mkdir()
    with path.open("w") as handle:
        handle.write(f"{len(words)} 6\n")
        for word in words:
            handle.write(word + " " + " ".join(f"{v:.5f}" for v in rng.normal(size=6)) + "\n")
    return path


def _train(tmp_path, name: str, *overrides: str):
    trainer = Trainer(tiny_config(*STEPS, *overrides), run_dir=tmp_path / name)
    trainer.fit()
    return trainer, tmp_path / name / "checkpoints" / "best.pt"


def _predictions(checkpoint, sentences):
    model, vocabs, _ = load_parser(checkpoint)
    out = parse(model, sentences, vocabs, tokens_per_batch=500)
    return out.heads, out.deprels


def test_a_checkpoint_with_vectors_predicts_the_same_without_the_vectors_file(tmp_path, fixtures, vectors_file):
    _, best = _train(tmp_path, "run", f"model.vectors.path={vectors_file}", "model.vectors.max_rows=10")
    state = load_checkpoint(best)
    kept = state["vocabs"]["vectors"]["tokens"].split("\n")[N_SPECIAL:]
    assert kept[:10] == [f"extra{i}" for i in range(10)] and "extra10" not in kept  # max_rows
    assert state["model"]["scorer.word_vectors.rows"].shape == (N_SPECIAL + len(kept), 6)
    sentences = read_conllu(fixtures / "tiny-dev.conllu").sentences
    before = _predictions(best, sentences)
    vectors_file.unlink()
    vectors_file.parent.rmdir()
    assert _predictions(best, sentences) == before
    # the rows are read: other rows give other scores
    model, vocabs, _ = load_parser(best)
    with torch.no_grad():
        model.scorer.word_vectors.rows.mul_(-3.0)
    changed = parse(model, sentences, vocabs, tokens_per_batch=500)
    assert (changed.heads, changed.deprels) != before


@pytest.mark.parametrize("finetune", [False, True])
def test_frozen_rows_stay_as_read_and_finetuned_rows_train(tmp_path, vectors_file, finetune):
    trainer, best = _train(tmp_path, f"run-{finetune}", f"model.vectors.path={vectors_file}",
                           f"model.vectors.finetune={str(finetune).lower()}")
    words = trainer.task.vocabs.vectors.tokens[N_SPECIAL:]
    read = read_vectors(vectors_file, wanted=words, max_rows=0, reserved=N_SPECIAL)
    assert read.words == words
    stored = load_checkpoint(best)["model"]
    assert torch.equal(stored["scorer.word_vectors.rows"], torch.from_numpy(read.matrix)) != finetune
    assert trainer.model.scorer.word_vectors.rows.requires_grad == finetune
    # the linear map trains either way
    assert stored["scorer.word_vectors.project.weight"].abs().sum() > 0


def test_a_parser_without_vectors_is_as_before(tmp_path):
    trainer, best = _train(tmp_path, "plain")
    state = load_checkpoint(best)
    assert "vectors" not in state["vocabs"]
    assert not any("word_vectors" in name for name in state["model"])
    assert trainer.task.vocabs.sizes().keys() == {"words", "chars", "upos", "rels"}
    assert next(iter(trainer.task.data.stream))[1].vectors is None


def test_vectors_are_refused_where_they_cannot_enter(vectors_file):
    sizes = {"words": 10, "chars": 10, "upos": 5, "rels": 5, "vectors": 8, "vector_dim": 6}
    cfg = tiny_config(f"model.vectors.path={vectors_file}", "model=loglinear")
    with pytest.raises(NotImplementedError, match="model.vectors with model.kind=loglinear"):
        build_parser(cfg.model, sizes)
    cfg = tiny_config(f"model.vectors.path={vectors_file}", "model.use_words=false")
    with pytest.raises(NotImplementedError, match="model.use_words=true"):
        build_parser(cfg.model, sizes)
    cfg = tiny_config(f"model.vectors.path={vectors_file}")
    with pytest.raises(ValueError, match="the vocabularies hold no vector rows"):
        build_parser(cfg.model, {k: v for k, v in sizes.items() if "vector" not in k})
    with pytest.raises(ConfigCompositionException, match="model.vectors.max_row"):
        tiny_config("model.vectors.max_row=5")
    with pytest.raises(ConfigCompositionException):
        tiny_config("model.vectors.finetune=maybe")


def test_a_cnn_encoder_reads_vectors_too(tmp_path, vectors_file):
    _, best = _train(tmp_path, "cnn", f"model.vectors.path={vectors_file}", "model/encoder=cnn",
                           "model.encoder.conv_width=16", "model.encoder.conv_depth=1")
    assert "scorer.word_vectors.rows" in load_checkpoint(best)["model"]
