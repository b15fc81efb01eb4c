"""Training the tokenizer on the fixtures: it learns their text, saves loadable checkpoints and
TensorBoard events, and its config refuses typos."""

from __future__ import annotations

import json

import pytest
from hydra.errors import ConfigCompositionException

from parser.cli.train_tokenizer import main as train_tokenizer_main
from parser.cli.train_tokenizer import train
from parser.tokenize import load_tokenizer, read_paragraphs, tokenize_paragraphs
from parser.tokenize.data import evaluate_tokenizer
from parser.tokenize.segment import tag_texts
from parser.tokenize.text import paragraph_text
from tests.tokenize.helpers import FIXTURES, tokenizer_config

TRAIN = FIXTURES / "tiny-train.conllu"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("tokenizer")
    cfg = tokenizer_config("trainer.max_steps=70", "trainer.eval_every=35", "logger.tensorboard=true",
                           f"data.dev_file={TRAIN}")
    return run, train(cfg, run_dir=run)


def test_it_learns_the_training_text(trained):
    run, results = trained
    # its own training text, after 70 steps: every token and sentence boundary
    assert results["dev"]["tokens_f1"] >= 98.0
    assert results["dev"]["sentences_f1"] >= 90.0
    assert json.loads((run / "results.json").read_text())["dev"] == results["dev"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "best.pt", "manifest.json", "step-00000035.pt", "step-00000070.pt"]
    assert list((run / "tb").glob("events.out.tfevents.*"))  # TensorBoard in tb/, as every trainer's


def test_checkpoint_round_trip_and_multiwords(trained):
    run, results = trained
    tokenizer = load_tokenizer(run / "checkpoints" / "best.pt")
    paragraphs = list(read_paragraphs(TRAIN))
    assert evaluate_tokenizer(tokenizer, paragraphs) == results["dev"]
    assert tokenizer.multiwords.split("don't") == ("do", "n't")
    [[first, second, *_]] = tokenize_paragraphs(tokenizer, ["I don't like cold coffee. The dog barked."])
    assert [t.form for t in first] == ["I", "don't", "like", "cold", "coffee", "."]
    assert first[1].words == ("do", "n't") and not first[4].space_after
    assert [t.form for t in second] == ["The", "dog", "barked", "."]


def test_windows_cover_every_character_once(trained):
    run, _ = trained
    tokenizer = load_tokenizer(run / "checkpoints" / "best.pt")
    text = paragraph_text(next(read_paragraphs(TRAIN)))
    whole = tag_texts(tokenizer, [text[:300]])[0]
    tokenizer.window, tokenizer.context = 1000, 0
    assert tag_texts(tokenizer, [text[:300]])[0] == whole  # one window: the same pass
    tokenizer.window, tokenizer.context = 37, 10
    tags = tag_texts(tokenizer, [text, "", "Hi."], windows_per_batch=3)
    assert [len(t) for t in tags] == [len(text), 0, 3]


def test_config_typos_fail_at_composition():
    with pytest.raises(ConfigCompositionException):
        tokenizer_config("model.hiden=3")


def test_cli_reports_bad_input_without_a_traceback(tmp_path, capsys):
    missing = tmp_path / "missing.conllu"
    status = train_tokenizer_main(["data=tiny", f"data.train_file={missing}",
                                   f"hydra.run.dir={tmp_path}"])
    err = capsys.readouterr().err
    assert status == 2 and "parser-train-tokenizer: error:" in err and "Traceback" not in err


def test_init_starts_from_a_checkpoint_and_refuses_other_sizes(trained, tmp_path):
    run, _ = trained
    best = run / "checkpoints" / "best.pt"
    cfg = tokenizer_config("trainer.max_steps=1", "trainer.eval_every=1", f"data.dev_file={TRAIN}",
                           f"model.init={best}", "optim.lr=1e-6")
    assert train(cfg, run_dir=tmp_path / "again")["dev"]["tokens_f1"] >= 98.0  # not from scratch
    cfg = tokenizer_config("trainer.max_steps=1", f"model.init={best}", "model.hidden=8")
    with pytest.raises(ValueError, match="model.init"):
        train(cfg, run_dir=tmp_path / "other")
