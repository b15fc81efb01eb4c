"""Each GE-alone family of experiment configs is its base family with the named keys changed and
nothing else, on every treebank (so a result file's comparison is of that change alone), and its
sweep file (where there is one) runs exactly those arms."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from parser.config import config_dir
from tests.train.test_config import _compose

TREEBANKS = ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")
ABSENT = "<absent>"  # the key is not in the base family's config

# family, base family, {dotted key: (value in the family, value in the base)}, has a sweep file
FAMILIES = [
    ("ge_alone_coordination", "ge_alone_structural",
     {"objective.terms.ge.constraints": ("ud_coordination", "ud_universal")}, True),
    ("ge_alone_harmony", "ge_alone_coordination",
     {"objective.terms.ge.constraints": ("ud_harmony", "ud_coordination")}, True),
    ("ge_alone_harmony_punct", "ge_alone_harmony",
     {"model.distance_prior_exempt": (["PUNCT"], [])}, True),
    ("ge_alone_harmony_long", "ge_alone_harmony",
     {"objective.terms.entropy.weight": (0.3, 0.1), "trainer.max_steps": (2400, 1200)}, False),
    ("ge_alone_clauses", "ge_alone_harmony",
     {"objective.terms.ge.constraints": ("ud_clauses", "ud_harmony"), "model.projective": (True, False),
      "model.attach_to_units": (["PUNCT", "CCONJ"], []), "objective.terms.entropy.weight": (0.3, 0.1)}, True),
    ("ge_alone_harmony_decoded", "ge_alone_harmony",
     {"model.projective": (True, False), "model.attach_to_units": (["PUNCT", "CCONJ"], [])}, False),
    ("ge_alone_selftrain_decoder", "ge_alone_selftrain",
     {"objective.terms.kl.tree": ("decoder", ABSENT), "model.projective": (True, False),
      "model.attach_to_units": (["PUNCT", "CCONJ"], [])}, False),
]  # fmt: skip


def _pop(container: dict, dotted: str):
    *parents, last = dotted.split(".")
    for key in parents:
        container = container[key]
    return container.pop(last, ABSENT)


@pytest.mark.parametrize(("family", "base", "changes", "swept"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_each_arm_is_its_base_with_only_the_named_keys_changed(family, base, changes, swept):
    if swept:
        sweep = OmegaConf.load(config_dir() / "sweep" / f"{family}.yaml")
        arms = str(sweep.hydra.sweeper.params.experiment).split(",")
        assert arms == [f"{family}_{tb}" for tb in TREEBANKS]
    for treebank in TREEBANKS:
        mine = OmegaConf.to_container(_compose(f"experiment={family}_{treebank}"))
        theirs = OmegaConf.to_container(_compose(f"experiment={base}_{treebank}"))
        assert mine["name"] == f"{family}_{treebank}" and mine["data"]["treebank"] == treebank
        for cfg in (mine, theirs):
            cfg.pop("name")
        for key, (new, old) in changes.items():
            assert (_pop(mine, key), _pop(theirs, key)) == (new, old), (treebank, key)
        assert mine == theirs, treebank
