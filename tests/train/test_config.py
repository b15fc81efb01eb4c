from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from parser.config import Config, ScorerKind, config_dir, register_configs
from tests.train.helpers import tiny_config


def _compose(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize(
    "override",
    ["data.tokens_per_bach=3", "trainer.max_step=3", "optim.name=adamm", "trainer.max_steps=abc",
     "model.kind=transformer", "bogus=1"],
)
def test_misspelt_key_or_bad_value_fails_at_composition(override):
    with pytest.raises(ConfigCompositionException):
        _compose(override)


def test_unknown_group_option_names_the_available_ones():
    with pytest.raises(Exception, match="en_ewt"):
        _compose("data=en_ewtt")


@pytest.mark.parametrize("experiment", ["quickstart", "ewt_biaffine", "ewt_loglinear"])
def test_experiments_compose_to_the_schema(experiment):
    cfg = _compose(f"experiment={experiment}")
    assert OmegaConf.get_type(cfg) is Config
    assert cfg.name == experiment
    assert cfg.data.treebank == "en_ewt"


EXPERIMENTS = sorted(p.stem for p in (Path(__file__).parents[2] / "configs" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_config_composes_to_the_schema(experiment):
    cfg = _compose(f"experiment={experiment}")
    assert OmegaConf.get_type(cfg) is Config
    assert cfg.name == experiment
    assert cfg.data.treebank in ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")


def test_the_structural_ge_model_options_reach_the_scorer():
    cfg = _compose("experiment=ge_alone_structural_en_ewt")
    assert cfg.model.kind == "loglinear" and cfg.model.lexical is False
    assert cfg.model.distance_prior > 0


GROUP_OPTIONS = (
    [("data", d) for d in ["en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt", "tiny"]]
    + [("model", "biaffine"), ("model", "loglinear"), ("optim", "adam"), ("logger", "none")]
    + [("objective", o) for o in ["likelihood", "entropy", "ge", "likelihood_ge", "risk", "local"]]
)


def test_every_group_option_composes():
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        for group, option in GROUP_OPTIONS:
            cfg = compose("config", overrides=[f"{group}={option}"])
            assert OmegaConf.get_type(cfg[group]) is type(getattr(Config(), group)), (group, option)


def test_objective_group_replaces_terms_rather_than_merging():
    assert list(_compose("objective=ge").objective.terms) == ["ge"]
    assert list(_compose().objective.terms) == ["likelihood"]


def test_tiny_paths_point_at_the_fixtures(fixtures):
    cfg = tiny_config()
    assert cfg.data.train_file == str(fixtures / "tiny-train.conllu")
    assert cfg.model.kind is ScorerKind.biaffine and cfg.model.lstm_layers == 1


def test_a_teacher_left_unset_is_named_not_read_as_a_file_called_question_marks():
    from parser.train.objective import build_training_objective

    cfg = _compose("experiment=ge_alone_selftrain_en_ewt")
    with pytest.raises(ValueError, match=r"set its checkpoint= \(the teacher\)"):
        build_training_objective(cfg.objective.terms, vocabs=None, labeled=[], device="cpu")
