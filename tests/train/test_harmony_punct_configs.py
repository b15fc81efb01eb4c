"""The ge_alone_harmony_punct configs: each treebank's arm is its ge_alone_harmony setting with
``model.distance_prior_exempt: [PUNCT]``, and nothing else changed."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from parser.config import config_dir, register_configs

TREEBANKS = ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")


def _compose(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_each_arm_is_the_harmony_setting_with_punct_exempt_from_the_prior():
    sweep = OmegaConf.load(config_dir() / "sweep" / "ge_alone_harmony_punct.yaml")
    arms = str(sweep.hydra.sweeper.params.experiment).split(",")
    assert arms == [f"ge_alone_harmony_punct_{tb}" for tb in TREEBANKS]
    for treebank in TREEBANKS:
        punct = _compose(f"experiment=ge_alone_harmony_punct_{treebank}")
        harmony = _compose(f"experiment=ge_alone_harmony_{treebank}")
        assert list(punct.model.distance_prior_exempt) == ["PUNCT"]
        assert list(harmony.model.distance_prior_exempt) == []
        assert punct.model.kind == "loglinear" and punct.model.distance_prior > 0
        assert punct.name == f"ge_alone_harmony_punct_{treebank}"
        assert punct.data.treebank == treebank
        mine, theirs = OmegaConf.to_container(punct), OmegaConf.to_container(harmony)
        for cfg in (mine, theirs):
            cfg.pop("name")
            cfg["model"].pop("distance_prior_exempt")
        assert mine == theirs, treebank
