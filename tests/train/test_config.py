from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from parser.config import Config, ScorerKind, check_known_keys, config_dir, register_configs
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


@pytest.mark.parametrize(
    "override", ["+trainer.max_step=10", "++trainer.max_step=10", "+bogus=1", "+data.tokens_per_bach=3"]
)
def test_a_key_forced_in_with_plus_is_rejected(override):
    """Hydra's ``+``/``++`` add a key even to a typed node (by design), so composing succeeds;
    check_known_keys (called by the training entry point before anything else) rejects it."""
    cfg = _compose(override)
    key = override.lstrip("+").split("=")[0]
    with pytest.raises(ConfigCompositionException, match=rf"unknown option '{key}'"):
        check_known_keys(cfg)


def test_a_misspelt_key_forced_in_is_named_with_the_close_one():
    with pytest.raises(ConfigCompositionException, match=r"did you mean 'trainer\.max_steps'\?"):
        check_known_keys(_compose("+trainer.max_step=10"))


def test_known_keys_pass_including_the_open_objective_terms():
    check_known_keys(_compose("experiment=ge_alone_clauses", "+objective.terms.ge.top_k=3"))


def test_a_hydra_run_with_a_forced_unknown_key_stops_before_the_task(tmp_path, monkeypatch):
    """Through Hydra's own entry (as parser-train runs): the task's first call,
    check_known_keys(cfg), raises before any work."""
    import sys

    import hydra

    started = []

    def task(cfg):
        check_known_keys(cfg)
        started.append(cfg)

    register_configs()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    monkeypatch.setattr(sys, "argv", ["parser-train", "+trainer.max_step=10", "hydra/job_logging=disabled"])
    main = hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")(task)
    with pytest.raises(ConfigCompositionException, match="trainer.max_step"):
        main()
    assert started == []


def test_help_prints_the_config_of_the_given_overrides(tmp_path, monkeypatch, capsys):
    """``parser-train <overrides> --help``: Hydra composes the overrides for its help page
    (Hydra.app_help), and configs/config.yaml's hydra.help template prints that config and
    names ``--cfg job``."""
    import sys

    import hydra
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    monkeypatch.chdir(tmp_path)
    argv = ["parser-train", "experiment=ge_alone_clauses", "data=ar_padt", "--help"]
    monkeypatch.setattr(sys, "argv", argv)
    main = hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")(
        lambda cfg: pytest.fail("--help ran the task")
    )
    with pytest.raises(SystemExit) as exit_info:
        main()
    GlobalHydra.instance().clear()
    assert exit_info.value.code in (0, None)
    text = capsys.readouterr().out
    assert text.startswith("parser-train: train a dependency parser") and "--cfg job" in text
    config = OmegaConf.create(text.split("== Config (of the overrides given) ==\n", 1)[1].rsplit("\n\n", 1)[0])
    assert config.family == "ge_alone_clauses" and config.data.treebank == "ar_padt"
    assert "train_split: ${data.unlabeled_split}" in text and config.data.train_split == "test"
    assert config.objective.terms.ge.constraints == "ud_clauses"


@pytest.mark.parametrize("experiment", ["quickstart", "ewt_biaffine", "ewt_loglinear"])
def test_experiments_compose_to_the_schema(experiment):
    cfg = _compose(f"experiment={experiment}")
    assert OmegaConf.get_type(cfg) is Config
    assert cfg.name == f"{experiment}/en_ewt"
    assert cfg.data.treebank == "en_ewt"


def test_the_structural_ge_model_options_reach_the_scorer():
    cfg = _compose("experiment=ge_alone_structural", "data=fi_tdt")
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

    cfg = _compose("experiment=ge_alone_selftrain")
    with pytest.raises(ValueError, match=r"set its checkpoint= \(the teacher\)"):
        build_training_objective(cfg.objective.terms, vocabs=None, labeled=[], device="cpu")


def test_the_default_experiment_is_the_lean_parser():
    """``parser-train data.treebank=<code>`` trains ``experiment=fast_cpu`` (issue 47);
    ``~experiment`` gives the schema's own defaults."""
    default, named = _compose("data.treebank=hu_szeged"), _compose("experiment=fast_cpu", "data.treebank=hu_szeged")
    assert OmegaConf.to_container(default) == OmegaConf.to_container(named)
    assert default.family == "fast_cpu" and default.model.label_grid is False
    assert (default.model.lstm_layers, default.model.lstm_hidden) == (1, 200)
    bare = _compose("~experiment")
    assert bare.family == "run" and (bare.model.lstm_layers, bare.model.lstm_hidden) == (3, 400)
