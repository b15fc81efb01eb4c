"""The ge_alone_coordination configs: each treebank's arm is its ge_alone_structural setting with
the ud_coordination constraints instead of ud_universal, and nothing else changed."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from parser.config import config_dir, register_configs

TREEBANKS = ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")


def _compose(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_each_coordination_arm_is_the_structural_setting_with_ud_coordination():
    sweep = OmegaConf.load(config_dir() / "sweep" / "ge_alone_coordination.yaml")
    arms = str(sweep.hydra.sweeper.params.experiment).split(",")
    assert arms == [f"ge_alone_coordination_{tb}" for tb in TREEBANKS]
    for treebank in TREEBANKS:
        coordination = _compose(f"experiment=ge_alone_coordination_{treebank}")
        structural = _compose(f"experiment=ge_alone_structural_{treebank}")
        assert coordination.objective.terms.ge.constraints == "ud_coordination"
        assert structural.objective.terms.ge.constraints == "ud_universal"
        assert coordination.name == f"ge_alone_coordination_{treebank}"
        assert coordination.data.treebank == treebank
        # Everything else is the structural setting's.
        mine = OmegaConf.to_container(coordination)
        theirs = OmegaConf.to_container(structural)
        for cfg in (mine, theirs):
            cfg.pop("name")
            cfg["objective"]["terms"]["ge"].pop("constraints")
        assert mine == theirs, treebank
