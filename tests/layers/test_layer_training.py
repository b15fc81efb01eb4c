"""Token-level layers trained with the parser: every prediction path fills their columns, the
losses reach the objective, a checkpoint round-trips, gold columns are never copied into a
prediction unless asked (``keep_columns=given``), the reports name every official metric."""

from __future__ import annotations

import logging

import conllu
import pytest
import torch

from parser import Pipeline
from parser.cli.evaluate import main as evaluate_main
from parser.cli.predict import main as predict_main
from parser.data.conllu_io import read_conllu
from parser.inference import Annotator, load_parser
from parser.train.final import evaluate_split
from parser.train.loop import Trainer
from tests.layers.helpers import FIXTURES, train_layers
from tests.train.helpers import tiny_config

LAYERED = ("LEMMA", "XPOS", "FEATS")


def _columns(text: str, column: str) -> list[list[str]]:
    key = column.lower()
    return [[t[key] if t[key] is not None else "_" for t in tokens if isinstance(t["id"], int)]
            for tokens in conllu.parse(text)]


def _feats(text: str) -> list[list[str]]:
    rows = []
    for raw in text.split("\n\n"):
        words = [line.split("\t") for line in raw.split("\n") if line and line.split("\t")[0].isdigit()]
        if words:
            rows.append([cols[5] for cols in words])
    return rows


def test_the_layers_are_trained_and_predicted(layered_checkpoint, morph_files, tmp_path):
    model, vocabs, _ = load_parser(layered_checkpoint)
    assert set(vocabs.layers) == {"xpos", "feats", "lemma"}
    assert set(model.scorer.layer_heads) == {"xpos", "feats", "lemma"}
    train, _dev = morph_files
    report = evaluate_split(model, read_conllu(train), vocabs, name="train", out_dir=tmp_path,
                            tokens_per_batch=5000, device="cpu")
    official = report["official"]
    # learnt: each column above the share of its most frequent value
    sentences = read_conllu(train).sentences
    for metric, column in (("XPOS", "XPOS"), ("UFeats", "FEATS"), ("Lemmas", "LEMMA")):
        values = [v for s in sentences for v in s.column(column)]
        majority = max(values.count(v) for v in set(values)) / len(values)
        assert official[metric] > 100 * majority + 10, metric
    text = (tmp_path / "train.pred.conllu").read_text(encoding="utf-8")
    assert all(v != "_" for row in _columns(text, "XPOS") for v in row)
    # FEATS '_' is a value of its own (a word without features): predicted where it is gold
    assert any(v == "_" for row in _feats(text) for v in row)


def test_the_layer_losses_are_part_of_the_training_loss(morph_files, tmp_path):
    train, dev = morph_files
    trainer = Trainer(tiny_config(f"data.train_file={train}", f"data.dev_file={dev}",
                                  "+model.layer_weights.lemma=0.5"), run_dir=tmp_path)
    _kind, batch = trainer.task.data.stream.next()
    trainer.model.train()
    out = trainer.model(batch)
    assert set(out.auxiliary) == {"xpos", "feats", "lemma"}
    # lemma at its own weight, the others at the model group's layer_weight (0.1)
    assert trainer.cfg.model.layer_weight == 0.1
    for name, weight in (("lemma", 0.5), ("xpos", 0.1), ("feats", 0.1)):
        gold = batch.layers[name]
        expected = weight * torch.nn.functional.cross_entropy(out.layer_scores[name][gold >= 3],
                                                              gold[gold >= 3])
        torch.testing.assert_close(out.auxiliary[name], expected)
    result = trainer.task.objective(out, batch, step=0)
    assert {"xpos/loss", "feats/loss", "lemma/loss"} <= set(result.logs)


def test_a_negative_layer_weight_is_refused(morph_files, tmp_path):
    train, dev = morph_files
    for override in ("model.layer_weight=-1", "+model.layer_weights.xpos=-0.5"):
        with pytest.raises(ValueError, match="loss weight must be >= 0"):
            Trainer(tiny_config(f"data.train_file={train}", f"data.dev_file={dev}", override),
                    run_dir=tmp_path / override[-2:])


def test_every_prediction_path_fills_the_columns(layered_checkpoint, morph_files, tmp_path):
    _, dev = morph_files
    outputs = {}
    for name, options in (("best", []), ("confidence", ["confidence=true"]), ("kbest", ["kbest=2"]),
                          ("samples", ["samples=2", "seed=1"])):
        path = tmp_path / f"{name}.conllu"
        assert predict_main([f"checkpoint={layered_checkpoint}", f"input={dev}", f"output={path}",
                             *options]) == 0
        outputs[name] = path.read_text(encoding="utf-8")
    best = {column: _columns(outputs["best"], column) for column in LAYERED}
    assert all(v != "_" for v in best["LEMMA"][0])
    for name in ("confidence",):
        assert {c: _columns(outputs[name], c) for c in LAYERED} == best
    for name in ("kbest", "samples"):  # two trees per sentence, the same columns on each
        columns = {c: _columns(outputs[name], c) for c in LAYERED}
        assert {c: rows[::2] for c, rows in columns.items()} == best
        assert {c: rows[1::2] for c, rows in columns.items()} == best
    # the Python API over token lists gives the same columns
    model, vocabs, config = load_parser(layered_checkpoint)
    sentences = read_conllu(dev).sentences
    blocks = Annotator(model, vocabs, config=config).annotate(sentences).blocks
    assert {c: _columns("".join(blocks), c) for c in LAYERED} == best


def test_a_checkpoint_round_trips_the_layers(layered_checkpoint, morph_files):
    _, dev = morph_files
    sentences = read_conllu(dev).sentences
    model, vocabs, config = load_parser(layered_checkpoint)
    first = Annotator(model, vocabs, config=config).annotate(sentences).blocks
    again = Annotator(*load_parser(layered_checkpoint)[:2]).annotate(sentences).blocks
    assert first == again


def test_gold_columns_are_not_copied_unless_asked(morph_files, tmp_path):
    train, dev = morph_files
    plain = train_layers(tmp_path / "plain", train, dev, "model.layers=[]", steps=10)
    given = (FIXTURES / "tiny-dev.conllu").read_text(encoding="utf-8")
    out = tmp_path / "plain.conllu"
    assert predict_main([f"checkpoint={plain}", f"input={FIXTURES / 'tiny-dev.conllu'}",
                         f"output={out}"]) == 0
    text = out.read_text(encoding="utf-8")
    assert all(v == "_" for row in _columns(text, "LEMMA") for v in row)  # not predicted: '_'
    assert _columns(text, "UPOS") == _columns(given, "UPOS")  # the parser's input, kept
    kept = tmp_path / "kept.conllu"
    assert predict_main([f"checkpoint={plain}", f"input={FIXTURES / 'tiny-dev.conllu'}",
                         f"output={kept}", "keep_columns=given"]) == 0
    assert _columns(kept.read_text(encoding="utf-8"), "LEMMA") == _columns(given, "LEMMA")


def test_keep_columns_given_keeps_the_inputs_values_where_given(layered_checkpoint, morph_files,
                                                                tmp_path):
    _, dev = morph_files
    gold = dev.read_text(encoding="utf-8")
    out = tmp_path / "kept.conllu"
    assert predict_main([f"checkpoint={layered_checkpoint}", f"input={dev}", f"output={out}",
                         "keep_columns=given"]) == 0
    text = out.read_text(encoding="utf-8")
    for column in ("LEMMA", "XPOS"):
        assert _columns(text, column) == _columns(gold, column)
    # FEATS '_' reads as "not given" (it cannot be told from "no feature"): predicted there
    for kept, given in zip(_feats(text), _feats(gold)):
        assert [k for k, g in zip(kept, given) if g != "_"] == [g for g in given if g != "_"]


def test_an_all_underscore_column_trains_and_is_written_underscore(tmp_path, caplog):
    # the fixture's XPOS and FEATS are '_' on every word
    with caplog.at_level(logging.INFO):
        checkpoint = train_layers(tmp_path / "run", FIXTURES / "tiny-train.conllu",
                                  FIXTURES / "tiny-dev.conllu", steps=10)
    said = [r.getMessage() for r in caplog.records if "'_' on every training word" in r.getMessage()]
    assert sorted(m.split(":")[0] for m in said) == ["feats", "xpos"]
    _model, vocabs, _ = load_parser(checkpoint)
    assert set(vocabs.layers) == {"lemma"}
    out = tmp_path / "pred.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={FIXTURES / 'tiny-dev.conllu'}",
                         f"output={out}"]) == 0
    text = out.read_text(encoding="utf-8")
    assert all(v == "_" for row in _columns(text, "XPOS") for v in row)
    assert all(v != "_" for row in _columns(text, "LEMMA") for v in row)


def test_a_column_with_thousands_of_values_trains_with_a_bounded_head(morph_files, tmp_path, caplog):
    # every word's XPOS is unique (an id leaked into the column): 300 classes seen, 20 kept
    train, dev = morph_files
    leaked = tmp_path / "leaked.conllu"
    lines, n = [], 0
    for raw in train.read_text(encoding="utf-8").split("\n"):
        cols = raw.split("\t")
        if len(cols) == 10 and cols[0].isdigit():
            n += 1
            cols[4] = f"w{n}"
        lines.append("\t".join(cols))
    leaked.write_text("\n".join(lines), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        checkpoint = train_layers(tmp_path / "run", leaked, dev, "model.layer_max_classes=20", steps=10)
    assert any(f"{n} distinct XPOS classes" in r.getMessage() and "kept the 20 most frequent"
               in r.getMessage() for r in caplog.records)
    model, vocabs, _ = load_parser(checkpoint)
    assert len(vocabs.layers["xpos"]) == 23
    assert model.scorer.layer_heads["xpos"].out_features == 23


def test_the_reports_name_every_official_metric(layered_checkpoint, morph_files, tmp_path, capsys):
    _, dev = morph_files
    assert evaluate_main([f"checkpoint={layered_checkpoint}", f"gold={dev}",
                          f"output={tmp_path / 'eval'}"]) == 0
    printed = capsys.readouterr().out
    for metric in ("UPOS", "XPOS", "UFeats", "AllTags", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX"):
        assert f"{metric} " in printed


def test_raw_text_through_a_pipeline_fills_the_columns(layered_checkpoint):
    tokenizer = Pipeline.load(FIXTURES / "pre_layers" / "tiny.pipeline").tokenizer
    nlp = Pipeline(parser=load_parser(layered_checkpoint), tokenizer=tokenizer)
    [sentence, *_] = nlp.parse("The dog barked loudly.")
    words = [t for t in sentence if isinstance(t["id"], int)]
    assert all(t["lemma"] not in (None, "_") and t["xpos"] not in (None, "_") for t in words)
