"""Training on the fixtures: the loss goes down, the Hydra entry point runs end to end (supervised
and semi-supervised), checkpoints round-trip, and tagging stays aligned with the words."""

from __future__ import annotations

import json

import pytest
import torch
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from parser.cli.train_tagger import train
from parser.data.vocab import N_SPECIAL
from parser.runtime.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from parser.tagger.config import TagDataConfig
from parser.tagger.data import load_tag_data
from parser.tagger.model import Tagger
from parser.tagger.objectives import TagLikelihood
from parser.tagger.predict import (
    TrainedTagger,
    load_tagger,
    tag_sentences,
    tagger_state,
    upos_accuracy,
)
from tests.tagger.helpers import tagger_config


@pytest.fixture(scope="module")
def tiny(fixtures):
    cfg = TagDataConfig(treebank="tiny", train_file=str(fixtures / "tiny-train.conllu"),
                        dev_file=str(fixtures / "tiny-dev.conllu"),
                        test_file=str(fixtures / "tiny-dev.conllu"), min_freq=1,
                        tokens_per_batch=100)
    return load_tag_data(cfg, max_train_sentences=None, seed=0)


def small_model(vocabs) -> Tagger:
    torch.manual_seed(0)
    return Tagger(n_words=len(vocabs.words), n_chars=len(vocabs.chars),
                  n_tags=len(vocabs.upos) - N_SPECIAL, word_dim=16, char_dim=8, char_hidden=8,
                  char_out=8, lstm_hidden=16, lstm_layers=1, dropout=0.0, word_dropout=0.0)


def test_a_few_steps_lower_the_loss(tiny):
    model = small_model(tiny.vocabs)
    _, batch = tiny.stream.next()
    objective = TagLikelihood()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = float(objective(model(batch), batch).loss.detach())
    for _ in range(15):
        optimizer.zero_grad()
        objective(model(batch), batch).loss.backward()
        optimizer.step()
    after = float(objective(model(batch), batch).loss.detach())
    assert after < 0.5 * before


def test_checkpoint_round_trip(tiny, tmp_path):
    model = small_model(tiny.vocabs).eval()
    path = save_checkpoint(tagger_state(model, tiny.vocabs, step=3), tmp_path / "t.pt")
    loaded = load_tagger(path)
    assert loaded.vocabs == tiny.vocabs and not loaded.model.training
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor), name
    sentences = tiny.dev.sentences
    assert tag_sentences(loaded, sentences) == tag_sentences(TrainedTagger(model, tiny.vocabs), sentences)
    save_checkpoint({"kind": "parser"}, tmp_path / "p.pt")
    with pytest.raises(CheckpointError, match="not a UPOS tagger"):
        load_tagger(tmp_path / "p.pt")


def test_tag_sentences_is_aligned_with_the_words(tiny):
    tagger = TrainedTagger(small_model(tiny.vocabs).eval(), tiny.vocabs)
    sentences = list(tiny.dev.sentences)
    inputs = [sentences[0], [], ["Unseenword", "zzz", "."], sentences[1].forms, sentences[-1]]
    tags = tag_sentences(tagger, inputs, tokens_per_batch=7)
    assert [len(t) for t in tags] == [len(sentences[0]), 0, 3, len(sentences[1]), len(sentences[-1])]
    assert all(t in tiny.vocabs.upos.tokens[N_SPECIAL:] for sentence in tags for t in sentence)
    assert tags[3] == tag_sentences(tagger, [sentences[1]])[0]  # forms or Sentence: the same
    with pytest.raises(ValueError, match="sentence 0"):
        tag_sentences(tagger, ["not a list of forms"])


def test_hydra_training_end_to_end_writes_results(tmp_path):
    cfg = tagger_config("trainer.max_epochs=12", "trainer.eval_every=10", "trainer.log_every=1")
    results = train(cfg, run_dir=tmp_path)
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["dev"] == results["dev"] and written["test"]["total"] == results["dev"]["total"]
    assert results["dev"]["total"] == 88
    best = results["checkpoint"]
    assert best == tmp_path / "checkpoints" / "best.pt" and best.is_file()
    tagger = load_tagger(best)
    # the training fixture is learnt well past chance (15 tags) in a dozen epochs
    assert upos_accuracy(tagger, tagger_train_sentences())["accuracy"] > 0.6
    # best.pt holds the best dev accuracy of the evaluations (the loop's "higher is better")
    assert results["dev"]["accuracy"] == pytest.approx(results["state"].best_score)
    assert results["state"].best_step == load_checkpoint(best)["trainer"]["best_step"]


def tagger_train_sentences():
    from parser.data.conllu_io import read_conllu
    from tests.conftest import FIXTURES
    return read_conllu(FIXTURES / "tiny-train.conllu").sentences


def test_semi_supervised_objective_runs(tmp_path):
    cfg = tagger_config("objective=semisup", "data.labeled_size=8", "trainer.max_steps=6",
                        "trainer.eval_every=3", "objective.entropy.warmup=0")
    results = train(cfg, run_dir=tmp_path)
    assert results["train_sentences"] == 8 and results["unlabeled_sentences"] == 24
    assert 0.0 <= results["test"]["accuracy"] <= 1.0


def test_config_typos_fail_at_composition():
    with pytest.raises(ConfigCompositionException):
        tagger_config("tagger.lstm_hiden=3")
    with pytest.raises(ConfigCompositionException):
        tagger_config("tagger.max_steps=3")  # the loop's options are trainer.* for every task
    cfg = tagger_config()
    assert OmegaConf.select(cfg, "data.max_train_sentences") is None
    assert cfg.trainer.max_nonfinite == 5 and cfg.logger.log_dir == "tb"
    assert cfg.data.treebank == "tiny" and "likelihood" in cfg.objective
