"""``parser-train-pipeline``: a treebank of a release to a raw-text pipeline file and its test
scores in one command, going on after a kill where it stopped, refusing what the files rule out."""

from __future__ import annotations

import json

import pytest

from parser.cli.evaluate_raw import evaluate_raw_text
from parser.cli.train_pipeline import _compose, load_recipe, main, train_pipeline
from parser.config import config_dir, register_configs
from parser.models.parser_model import check_layer_inputs
from parser.eval.official import METRICS
from parser.pipeline import Pipeline
from parser.tokenize.config import register_tokenizer_configs
from tests.data.test_treebanks import CODE, FOLDER, lay_out

RECIPE = "tests/fixtures/recipe-tiny.yaml"


def test_a_treebank_becomes_a_scored_pipeline_and_a_rerun_reuses_it(tmp_path, fixtures, capsys):
    root = tmp_path / "release"
    lay_out(root, fixtures, layout="official")
    out = tmp_path / "run"
    assert main([f"treebank={FOLDER}", f"root={root}", f"recipe={RECIPE}", f"output={out}"]) == 0
    shown = capsys.readouterr().out
    result = json.loads((out / "result.json").read_text())
    assert result["treebank"] == CODE and result["train_sentences"] > 0
    assert tuple(result["raw"]) == METRICS  # every official row, tags to BLEX
    assert tuple(result["gold_tokens"]) == METRICS[METRICS.index("UPOS"):]
    assert all(0 <= value <= 100 for value in result["raw"].values())
    assert 0 <= result["gold_tokens"]["LAS"] <= result["gold_tokens"]["UAS"] <= 100
    assert f"pipeline: {out / (CODE + '.pipeline')}" in shown
    # the pipeline parses raw text without gold tags: the parser tags its own words
    [sentence] = Pipeline.load(result["pipeline"]).parse("The cat sleeps .")[:1]
    assert all(token["upos"] not in (None, "_") for token in sentence)
    # a rerun (as after a kill once both stages finished) trains nothing again
    stamps = {stage: (out / stage / "done.json").stat().st_mtime_ns for stage in ("tokenizer", "parser")}
    (out / "parser" / "done.json").unlink()  # the parser stage "did not finish"
    again = train_pipeline(treebank=CODE, root=root, recipe=RECIPE, output=out)
    assert (out / "tokenizer" / "done.json").stat().st_mtime_ns == stamps["tokenizer"]
    assert again["gold_tokens"] == result["gold_tokens"]  # resumed at its last step: nothing left


@pytest.mark.parametrize(("splits", "blank", "message"), [
    (("train", "dev", "test"), True, "no text"),
    (("test",), False, "has no 'train' split"),
])
def test_what_the_files_rule_out_is_refused_before_training(tmp_path, fixtures, capsys, splits,
                                                            blank, message):
    lay_out(tmp_path, fixtures, layout="code", splits=splits, blank_forms=blank)
    assert main([f"treebank={CODE}", f"root={tmp_path}", f"recipe={RECIPE}",
                 f"output={tmp_path / 'run'}"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run" / "tokenizer").exists()


def test_recipes_name_the_two_stages(tmp_path):
    assert set(load_recipe("release_cpu")) == {"tokenizer", "parser"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("parser: [experiment=release_cpu]\n")
    with pytest.raises(ValueError, match="two lists of override strings"):
        load_recipe(str(bad))
    with pytest.raises(ValueError, match="release_cpu, release_cpu_fed, release_cpu_grid, release_gpu"):
        load_recipe("no_such_recipe")


@pytest.mark.parametrize("recipe", sorted(p.stem for p in (config_dir() / "recipe").glob("*.yaml")))
def test_every_recipe_composes_both_stages(recipe):
    """A recipe's overrides are checked when a sweep reaches the stage, hours in: here first."""
    register_tokenizer_configs()
    register_configs()
    data = ["data.treebank=en_ewt"]
    stages = {stage: _compose(stage, [*data, *overrides])
              for stage, overrides in load_recipe(recipe).items()}
    assert stages["tokenizer"].data.treebank == stages["parser"].data.treebank == "en_ewt"


def test_the_lean_recipe_trains_the_default_model_on_the_release_budget():
    register_configs()
    lean = _compose("parser", load_recipe("release_cpu")["parser"])
    default = _compose("parser", [])
    grid = _compose("parser", load_recipe("release_cpu_grid")["parser"])
    assert lean.model == default.model
    assert lean.trainer == grid.trainer and lean.data == grid.data
    assert grid.model.lstm_layers == 2 and grid.model.label_grid


def test_raw_text_scores_name_rows_of_the_official_table(tmp_path):
    with pytest.raises(ValueError, match=r"\['LAS3'\] are not rows of the official table"):
        evaluate_raw_text(None, tmp_path / "gold.conllu", tmp_path, name="x", metrics=["LAS3"])


def test_the_fed_recipe_is_the_lean_one_with_two_layers_and_the_tags_fed():
    register_configs()
    lean = _compose("parser", load_recipe("release_cpu")["parser"])
    fed = _compose("parser", load_recipe("release_cpu_fed")["parser"])
    assert fed.model.lstm_layers == 2 and list(fed.model.layer_inputs) == ["upos", "xpos", "feats"]
    fed.model.lstm_layers, fed.model.layer_inputs = lean.model.lstm_layers, lean.model.layer_inputs
    assert fed == lean
    check_layer_inputs(_compose("parser", load_recipe("release_cpu_fed")["parser"]).model)
