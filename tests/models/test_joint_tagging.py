"""A parser that predicts its own UPOS: trained on the tiny fixture, it parses text with no tags
and no tagger, and GE reads its tags."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path

import pytest
import torch

from parser.data.batching import collate, encode_all
from parser.data.conllu_io import read_conllu
from parser.inference import load_parser, predict_file, reads_upos
from parser.objectives.base import Output
from parser.objectives.weighted import Term, WeightedSum
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
JOINT = ["model.tag_loss_weight=1.0", "model.upos_input=predicted", "optim.lr=1e-2",
         "model.dropout=0.0", "model.lstm_hidden=32"]


def train(tmp_path: Path, *overrides: str) -> Path:
    cfg = tiny_config("trainer.max_steps=200", "trainer.eval_every=200", *JOINT, *overrides)
    Trainer(cfg, run_dir=tmp_path).fit()
    return tmp_path / "checkpoints" / "best.pt"


def text_file(tmp_path: Path) -> Path:
    sentences = read_conllu(FIXTURES / "tiny-dev.conllu").sentences
    path = tmp_path / "input.txt"
    path.write_text("".join(" ".join(s.forms) + "\n" for s in sentences), encoding="utf-8")
    return path


def test_joint_head_learns_the_tags_and_predict_needs_no_tagger(tmp_path):
    checkpoint = train(tmp_path / "run")
    model, vocabs, config = load_parser(checkpoint)
    assert not reads_upos(config) and model.own_tags
    # the head learns the training tags (the tiny fixture: 32 sentences)
    train_sentences = read_conllu(FIXTURES / "tiny-train.conllu").sentences
    batch = collate(encode_all(train_sentences, vocabs), labeled=True)
    out = model(batch)
    words = batch.word_mask
    accuracy = (out.upos == batch.upos)[words].float().mean()
    assert accuracy > 0.8
    # text: no UPOS column, no tagger= given; the output carries the parser's own tags
    output = tmp_path / "out.conllu"
    n = predict_file(checkpoint, text_file(tmp_path), output)
    parsed = read_conllu(output).sentences
    assert len(parsed) == n and all(tag is not None for s in parsed for tag in s.upos)
    assert all(h >= 0 for s in parsed for h in s.heads)


def test_gold_input_without_a_head_still_needs_tags(tmp_path):
    checkpoint = train(tmp_path / "run", "model.tag_loss_weight=0", "model.upos_input=gold")
    _, _, config = load_parser(checkpoint)
    assert reads_upos(config)
    with pytest.raises(ValueError, match="no UPOS tags"):
        predict_file(checkpoint, text_file(tmp_path), tmp_path / "out.conllu")


def test_predicted_upos_needs_a_head():
    with pytest.raises(ValueError, match="tag_loss_weight > 0"):
        Trainer(tiny_config("model.upos_input=predicted"), run_dir="/nonexistent-not-created")


def test_terms_read_the_models_tags_and_its_loss_is_added(tmp_path):
    cfg = tiny_config(*JOINT, "model.layers=[]")  # the UPOS head's loss alone
    trainer = Trainer(cfg, run_dir=tmp_path)
    batch = next(iter(trainer.task.data.stream.next() for _ in range(1)))[1]
    trainer.model.train()
    out = trainer.model(batch)
    assert set(out.auxiliary) == {"tags"}
    seen = {}

    def spy(out, batch):
        seen["upos"] = batch.upos
        return Output(out.dist.scores.sum() * 0.0, {})

    result = WeightedSum((Term("spy", spy),))(out, batch)
    assert torch.equal(seen["upos"], out.upos)  # GE features read the model's own tags
    torch.testing.assert_close(result.loss, out.auxiliary["tags"])
    assert "tags/loss" in result.logs


def test_transformer_parser_trains_with_joint_tags(tmp_path, minilm):
    checkpoint = train(tmp_path / "run", "model/encoder=transformer", f"model.encoder.name={minilm}",
                       "model.encoder.lstm_layers=1", "trainer.max_steps=30")
    model, _, _ = load_parser(checkpoint)
    assert model.scorer.transformer is not None and model.own_tags
    output = tmp_path / "out.conllu"
    assert predict_file(checkpoint, text_file(tmp_path), output) > 0
