"""The experiment families compose, with every treebank, to the settings of the published runs.

``tests/fixtures/resolved_configs.json`` holds the resolved config of every published command,
sweep job and experiment file as composed before the per-treebank experiment files became
families (``tests/train/resolved_configs.py`` wrote it). Each old command is mapped to its new one
by ``MIGRATION`` (the same table as docs/config_migration.md) and must compose to the same
config, except for the differences listed in ``INTENDED``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from parser.config import Config, DataConfig, config_dir, register_configs
from tests.train.resolved_configs import SNAPSHOT, TREEBANKS, resolved

REPO = Path(__file__).resolve().parents[2]
GE_FAMILIES = (
    "ge_alone", "ge_alone_tuned", "ge_alone_structural", "ge_alone_coordination", "ge_alone_harmony",
    "ge_alone_harmony_punct", "ge_alone_harmony_long", "ge_alone_harmony_decoded", "ge_alone_clauses",
    "ge_alone_selftrain", "ge_alone_selftrain_decoder",
)
FAMILIES = (*GE_FAMILIES, "ewt_biaffine", "ewt_biaffine_cpu", "ewt_loglinear", "quickstart", "ssl_ewt", "ssl_transfer",
            "release_cpu", "release_gpu", "fast_cpu")

# Old experiment -> the overrides that replace it. The GE families: one file per family, the
# treebank by data=<treebank> (``ge_alone_clauses_de_gsd`` -> ``experiment=ge_alone_clauses
# data=de_gsd``); the SSL arms: the ssl_ewt family with objective=<arm>.
MIGRATION: dict[str, list[str]] = {
    **{f"{family}_{tb}": [f"experiment={family}", f"data={tb}"] for family in GE_FAMILIES for tb in TREEBANKS},
    "ssl_ewt_likelihood": ["experiment=ssl_ewt", "objective=likelihood", "data.unlabeled_ratio=0"],
    "ssl_ewt_risk": ["experiment=ssl_ewt", "objective=risk", "data.unlabeled_ratio=0"],
    "ssl_ewt_entropy": ["experiment=ssl_ewt", "objective=entropy"],
    "ssl_ewt_ge": ["experiment=ssl_ewt", "objective=likelihood_ge"],
    "ssl_ewt_entropy_ge": ["experiment=ssl_ewt", "objective=[entropy,likelihood_ge]"],
    "ssl_ewt_kl": ["experiment=ssl_ewt", "objective=kl"],
}
# Old sweep -> new sweep (the GE sweeps were one file per family; now one over the treebanks).
SWEEPS = {f"ge_alone{suffix}": "treebanks" for suffix in
          ("", "_clauses", "_coordination", "_harmony", "_harmony_punct", "_structural", "_tuned")}
NEW_KEYS = ("family", "data.unlabeled_split", "data.short_max_length", "data.dev_fraction",  # added
            "model.encoder", "model.upos_input", "model.tag_loss_weight", "model.ud_rules",
            "trainer.preempt_signals", "data.unlabeled_corpus", "data.unlabeled_format",
            "data.unlabeled_tokenizer", "data.shuffle_buffer", "data.max_bad_share",
            "data.max_sentence_words", "data.unlabeled_size",
            # token-level layers (issue 45): the published runs predicted no LEMMA/XPOS/FEATS
            "model.layers", "model.layer_weights", "model.layer_max_classes",
            "model.layer_weight",  # every layer's loss weight (issue 62; the model group's 0.1)
            "data.partial_trees",  # annotation files back into training (docs/annotation.md)
            "data.annotated_columns",  # an annotation file's token columns (issue 60; default none)
            "model.init",  # warm start from a checkpoint (active learning's rounds)
            "model.label_grid",  # labels at the decoded heads only (issue 47; default: the grid)
            "model.vectors",  # pretrained word vectors (issue 62; default: none)
            "model.layer_inputs")  # predicted XPOS/FEATS fed to the parser (issue 62; default: none)


def migrate(overrides: list[str]) -> list[str]:
    """An old command's overrides -> the new command's.

    >>> migrate(["experiment=ge_alone_clauses_de_gsd", "trainer.seed=2"])
    ['experiment=ge_alone_clauses', 'data=de_gsd', 'trainer.seed=2']
    >>> migrate(["+sweep=ssl_ablation", "experiment=ssl_ewt_likelihood", "data.labeled_size=100"])
    ['+sweep=ssl_ablation', 'experiment=ssl_ewt', 'objective=likelihood', 'data.labeled_size=100']
    """
    swept = any(o.startswith("+sweep=") for o in overrides)
    new = []
    for override in overrides:
        key, _, value = override.partition("=")
        if key == "+sweep":
            new.append(f"+sweep={SWEEPS.get(value, value)}")
        elif key == "experiment" and value in MIGRATION:
            # A sweep cannot tie data.unlabeled_ratio to one arm: see INTENDED.
            new += [o for o in MIGRATION[value] if not (swept and o.startswith("data.unlabeled_ratio"))]
        else:
            new.append(override)
    return new


def _drop(config: dict, dotted: str):
    *parents, last = dotted.split(".")
    for key in parents:
        config = config[key]
    return config.pop(last)


def intended_differences(old: dict, new: dict, overrides: list[str]) -> tuple[dict, dict]:
    """``old`` and ``new`` without the differences that are meant, each checked here:

    - ``name``: was the experiment file's name, now ``<family>/<treebank>`` (every run folder says
      both); ``family``, ``data.unlabeled_split``, ``data.short_max_length``,
      ``data.dev_fraction`` are new keys.
    - SSL sweeps, arms likelihood and risk: ``data.unlabeled_ratio`` 0 -> the family's 1.0 (a
      sweep cannot set it per arm). Training is the same: the trainer drops the unlabeled stream
      when no term reads it (``TrainingStream.keep_only``), and the vocabularies are built from
      the same sentences either way.
    - ``objective.terms.kl.checkpoint``: the SSL self-training teacher is the sweep's likelihood
      arm, whose folder is now named by its terms (``likelihood``, was ``ssl_ewt_likelihood``);
      the path is set by configs/sweep/ssl_selftrain.yaml, so a single ``objective=kl`` run names
      its teacher (``???`` until given), as every other self-training run does.
    """
    old, new = copy.deepcopy(old), copy.deepcopy(new)
    experiment = next((o.split("=", 1)[1] for o in overrides if o.startswith("experiment=")), None)
    family = next((o.split("=", 1)[1] for o in migrate(overrides) if o.startswith("experiment=")), "run")
    assert new["name"] == f"{family}/{new['data']['treebank']}" and new["family"] == family
    assert old["name"] == (experiment or old["data"]["treebank"])
    for config in (old, new):
        config.pop("name")
    for key in NEW_KEYS:
        _drop(new, key)
    swept = any(o.startswith("+sweep=ssl") for o in overrides)
    if swept and experiment in ("ssl_ewt_likelihood", "ssl_ewt_risk"):
        assert (old["data"]["unlabeled_ratio"], new["data"]["unlabeled_ratio"]) == (0.0, 1.0)
        old["data"]["unlabeled_ratio"] = new["data"]["unlabeled_ratio"]
    if experiment == "ssl_ewt_kl":
        old_teacher = old["objective"]["terms"]["kl"].pop("checkpoint")
        new_teacher = new["objective"]["terms"]["kl"].pop("checkpoint")
        assert "/ssl_ewt_likelihood/" in old_teacher
        assert new_teacher == (old_teacher.replace("/ssl_ewt_likelihood/", "/likelihood/") if swept else None)  # None: ???
    return old, new


ENTRIES = json.loads(SNAPSHOT.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def hydra_configs():
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        yield


@pytest.mark.parametrize("entry", ENTRIES, ids=[" ".join(e["overrides"]) for e in ENTRIES])
def test_published_command_keeps_its_settings(entry, hydra_configs):
    new_overrides = migrate(entry["overrides"])
    new = resolved(compose("config", overrides=new_overrides))
    old, new = intended_differences(entry["config"], new, entry["overrides"])
    assert new == old, (entry["where"], new_overrides)


def test_the_snapshot_covers_every_old_experiment_and_sweep():
    commands = [e["overrides"] for e in ENTRIES]
    experiments = {o.split("=", 1)[1] for c in commands for o in c if o.startswith("experiment=")}
    assert set(MIGRATION) <= experiments
    assert {f"+sweep={s}" for s in SWEEPS} <= {o for c in commands for o in c}
    assert len(ENTRIES) >= 200


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_composes_with_every_treebank(family, hydra_configs):
    for treebank in TREEBANKS:
        cfg = compose("config", overrides=[f"experiment={family}", f"data={treebank}"])
        assert OmegaConf.get_type(cfg) is Config
        assert (cfg.name, cfg.data.treebank) == (f"{family}/{treebank}", treebank)
        # the schema's defaults where the file says nothing more (en_ewt: unlabeled_split train)
        facts = OmegaConf.merge(OmegaConf.structured(DataConfig), OmegaConf.load(config_dir() / "data" / f"{treebank}.yaml"))
        if family.startswith("ge_alone"):  # trained on the treebank's unlabeled text, no trees
            assert cfg.data.train_split == facts.unlabeled_split
            assert cfg.data.max_length == facts.short_max_length
            assert cfg.data.labeled_size == 0 and cfg.data.dev_split is None


def test_the_experiment_files_are_the_families():
    assert sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml")) == sorted(FAMILIES)


def test_the_treebanks_sweep_runs_every_treebank():
    sweep = OmegaConf.load(config_dir() / "sweep" / "treebanks.yaml")
    assert str(sweep.hydra.sweeper.params.data).split(",") == list(TREEBANKS)


def test_the_migration_doc_lists_the_table():
    """docs/config_migration.md: one row per old experiment, ``old`` -> ``new``, as in MIGRATION."""
    text = (REPO / "docs" / "config_migration.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `experiment=(\w+)` \| `([^`]+)` \|$", text, flags=re.MULTILINE))
    assert rows == {old: " ".join(new) for old, new in MIGRATION.items()}
    sweeps = dict(re.findall(r"^\| `\+sweep=(\w+)` \| `\+sweep=(\w+)[^`]*` \|$", text, flags=re.MULTILINE))
    assert sweeps == SWEEPS
