"""The ge_alone_harmony configs: each treebank's arm is its ge_alone_coordination setting with the
ud_harmony constraints instead of ud_coordination, and nothing else changed."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from parser.config import config_dir, register_configs

TREEBANKS = ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")


def _compose(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_each_harmony_arm_is_the_coordination_setting_with_ud_harmony():
    sweep = OmegaConf.load(config_dir() / "sweep" / "ge_alone_harmony.yaml")
    arms = str(sweep.hydra.sweeper.params.experiment).split(",")
    assert arms == [f"ge_alone_harmony_{tb}" for tb in TREEBANKS]
    for treebank in TREEBANKS:
        harmony = _compose(f"experiment=ge_alone_harmony_{treebank}")
        coordination = _compose(f"experiment=ge_alone_coordination_{treebank}")
        assert harmony.objective.terms.ge.constraints == "ud_harmony"
        assert coordination.objective.terms.ge.constraints == "ud_coordination"
        assert harmony.name == f"ge_alone_harmony_{treebank}"
        assert harmony.data.treebank == treebank
        mine = OmegaConf.to_container(harmony)
        theirs = OmegaConf.to_container(coordination)
        for cfg in (mine, theirs):
            cfg.pop("name")
            cfg["objective"]["terms"]["ge"].pop("constraints")
        assert mine == theirs, treebank
