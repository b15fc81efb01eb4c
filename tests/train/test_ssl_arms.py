"""Issue 19's arms through the trainer: estimated-target GE, annealed entropy, risk annealing, and
self-training combined with entropy or estimated-target GE on the unlabeled side. Each runs a few
steps on the tiny fixture; the configs compose with experiment=ssl_ewt and any treebank."""

from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from parser.config import config_dir, register_configs
from parser.constraints import EstimateOptions, estimated_set, load_constraints
from parser.objectives import GeneralizedExpectation
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config
from tests.train.resolved_configs import sweep_jobs

STEPS = ["trainer.max_steps=4", "trainer.eval_every=4", "trainer.final_eval=false", "data.labeled_size=8"]


def _fit(tmp_path, *overrides, quiet=True):
    cfg = tiny_config(*STEPS, *overrides, quiet=quiet)
    cfg.trainer.progress = False
    trainer = Trainer(cfg, run_dir=tmp_path)
    state = trainer.fit()
    assert state.step == 4 and state.nonfinite_total == 0
    return trainer


def _ge(trainer) -> GeneralizedExpectation:
    (ge,) = [term.objective for term in trainer.task.objective.terms if term.name == "ge"]
    return ge


@pytest.mark.parametrize("features", ["set", "templates", "both"])
def test_estimated_ge_reads_exactly_the_runs_labeled_trees(tmp_path, features):
    trainer = _fit(tmp_path, "objective=likelihood_ge_estimated", f"objective.terms.ge.features={features}",
                   "objective.terms.ge.min_count=2")
    constraints = _ge(trainer).constraints
    labeled = trainer.task.data.labeled
    assert len(labeled) == 8
    expected = estimated_set(
        "ud_universal", trainer.task.vocabs.upos.tokens, heads=[s.heads for s in labeled],
        upos=[[u if u is not None else "_" for u in s.upos] for s in labeled],
        options=EstimateOptions(features=features, min_count=2),
    )
    assert constraints.names == expected.names and torch.equal(constraints.targets, expected.targets)
    assert torch.equal(constraints.column_weights, expected.column_weights)
    written = load_constraints("ud_universal", trainer.task.vocabs.upos.tokens).names
    added = [c for c in constraints.constraints if c.name not in written]
    assert all(len(c.child) == len(c.parent) == 1 and c.rules is None for c in added)  # templates
    assert (len(added) == 0) == (features == "set")
    if features == "templates":
        assert all(len(c.child) == len(c.parent) == 1 and c.rules is None for c in constraints.constraints)
    if features == "both":  # the written set's first, then the templates it lacks
        assert constraints.names[-len(added):] == [c.name for c in added]
    assert constraints.source == ("estimated(templates)" if features == "templates" else f"estimated(ud_universal, {features})")


def test_estimated_ge_without_labeled_trees_is_refused(tmp_path):
    cfg = tiny_config(*STEPS[:3], "data.labeled_size=0", "objective=likelihood_ge_estimated")
    with pytest.raises(ValueError, match="estimated targets need labeled trees"):
        Trainer(cfg, run_dir=tmp_path)


def test_annealed_entropy_and_risk_log_their_weight_and_temperature(tmp_path):
    _fit(tmp_path / "entropy", "objective=entropy_annealed", "objective.terms.entropy.weight_steps=4",
         "trainer.log_every=1", quiet=False)
    events = EventAccumulator(str(tmp_path / "entropy" / "tb")).Reload()
    weights = [event.value for event in events.Scalars("train/entropy/weight")]
    assert weights[0] < weights[-1] <= 0.1 + 1e-7  # cosine from 0 up to 0.1
    _fit(tmp_path / "risk", "objective=risk_annealed", "objective.terms.risk.temperature_steps=4",
         "trainer.log_every=1", "data.unlabeled_ratio=0", quiet=False)
    events = EventAccumulator(str(tmp_path / "risk" / "tb")).Reload()
    temperatures = [event.value for event in events.Scalars("train/risk/temperature")]
    # exponential from 1 to 0.25 over 4 steps, at the steps 0..3 the trainer ran
    assert temperatures == pytest.approx([0.25 ** (step / 4) for step in range(4)], rel=1e-6)


@pytest.mark.parametrize("unlabeled", ["entropy", "likelihood_ge_estimated"])
def test_self_training_composes_with_an_unlabeled_term(tmp_path, unlabeled):
    teacher = _fit(tmp_path / "teacher", "objective=likelihood")
    checkpoint = tmp_path / "teacher" / "checkpoints" / "best.pt"
    assert checkpoint.is_file() and teacher.task.data.labeled
    student = _fit(tmp_path / "student", f"objective=[kl,{unlabeled}]", f"objective.terms.kl.checkpoint={checkpoint}",
                   "objective.terms.ge.min_count=2" if unlabeled != "entropy" else "trainer.log_every=10")
    names = student.task.objective.names
    assert names[:2] == ["likelihood", "kl"] and names[2] == ("entropy" if unlabeled == "entropy" else "ge")


def _compose(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize("treebank", ["en_ewt", "de_gsd"])
def test_the_arms_compose_with_the_ssl_family_and_any_treebank(treebank):
    cfg = _compose("experiment=ssl_ewt", f"data={treebank}", "objective=[kl,likelihood_ge_estimated]")
    assert cfg.data.treebank == treebank and cfg.data.labeled_size == 100
    assert list(cfg.objective.terms) == ["likelihood", "kl", "ge"]
    assert cfg.objective.terms.ge.targets == "estimated" and cfg.objective.terms.kl.direction == "forward"
    cfg = _compose("experiment=ssl_ewt", f"data={treebank}", "objective=risk_annealed",
                   "objective.terms.risk.temperature_start=2.0")
    assert cfg.objective.terms.risk.temperature_start == 2.0
    cfg = _compose("experiment=ssl_ewt", f"data={treebank}", "objective=[kl,entropy_annealed]")
    assert list(cfg.objective.terms) == ["likelihood", "kl", "entropy"]


@pytest.mark.parametrize("sweep", ["ssl_fair", "ssl_fair_entropy", "ssl_fair_risk", "ssl_fair_selftrain"])
def test_the_fair_protocol_sweeps_are_at_most_8_dev_runs_that_never_read_test(sweep):
    jobs = [overrides for where, overrides in sweep_jobs(config_dir() / "sweep") if where.endswith(f"/{sweep}.yaml")]
    assert 2 <= len(jobs) <= 8
    terms = set()
    for overrides in jobs:
        cfg = _compose(*overrides, "data.labeled_size=100")
        assert cfg.data.test_split is None and cfg.data.dev_split == "dev" and cfg.family == "ssl_ewt"
        terms.add(tuple(cfg.objective.terms))
    assert len(terms) == 1  # one arm per sweep


# Each chosen-setting file against the overrides its fair-protocol runs were launched with
# (experiments/results/ssl_fair.md, ssl_fair_entropy.md): the file must resolve to that config.
CHOSEN = {
    "entropy_fair": ["objective=entropy", "objective.terms.entropy.weight=0.03",
                     "objective.terms.entropy.warmup=500"],
    "risk_fair": ["objective=risk_annealed", "objective.terms.risk.weight=0.5",
                  "objective.terms.risk.warmup=500", "objective.terms.risk.temperature=0.5"],
    "ge_fair": ["objective=likelihood_ge_estimated", "objective.terms.ge.weight=0.1",
                "objective.terms.ge.warmup=0"],
    "kl_fair": ["objective=kl", "objective.terms.kl.weight=3.0", "+objective.terms.kl.warmup=500"],
    "[kl_fair,entropy_fair]": ["objective=[kl,entropy_fair]", "objective.terms.kl.weight=3.0",
                               "+objective.terms.kl.warmup=500"],
}


@pytest.mark.parametrize("chosen", sorted(CHOSEN))
def test_a_chosen_setting_file_is_the_config_its_runs_used(chosen):
    run = _compose("experiment=ssl_ewt", "data.labeled_size=100", *CHOSEN[chosen])
    file = _compose("experiment=ssl_ewt", "data.labeled_size=100", f"objective={chosen}")
    assert file.objective == run.objective


def test_the_transfer_family_draws_its_trees_from_dev_and_selects_nothing(tmp_path, ud_root):
    cfg = tiny_config("experiment=ssl_transfer", "data=de_gsd", f"data.root={ud_root}", "trainer.max_steps=2",
                      "trainer.eval_every=2", "trainer.final_eval=false", "data.max_length=20")
    assert cfg.family == "ssl_transfer" and cfg.data.labeled_size == 100 and cfg.data.dev_split is None
    trainer = Trainer(cfg, run_dir=tmp_path)
    dev_file = ud_root / "de_gsd" / "de_gsd-ud-dev.conllu"
    data = trainer.task.data
    assert data.dev is None and data.test is not None
    assert len(data.labeled) == 100 and all(s.is_annotated for s in data.labeled)
    n_dev = sum(1 for line in dev_file.open(encoding="utf-8") if line.startswith("# sent_id"))
    assert len(data.labeled) + len(data.unlabeled) == n_dev
    assert {str(s.path) for s in data.labeled} == {str(dev_file)}
    labeled_ids = {s.sent_id for s in data.labeled}
    assert not labeled_ids & {s.sent_id for s in data.unlabeled}  # the rest of dev, trees removed
    assert all(set(s.heads) == {-1} for s in data.unlabeled)
    state = trainer.fit()  # no dev: the latest model is kept
    assert state.step == 2 and state.best_step == 2
