"""The objective registry: one module and one YAML file make a new objective; declarations are
checked; kinds resolve in one place; WeightedSum's reduction across ranks calls each term's hook."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass

import pytest
import torch
from hydra import compose, initialize_config_dir

from parser.config import config_dir, register_configs
from parser.constraints import load_constraints
from parser.objectives import (
    Entropy,
    GeneralizedExpectation,
    Likelihood,
    Output,
    Term,
    WeightedSum,
    build_objective,
    get_kind,
    kinds,
    register,
    registry,
    resolve_terms,
    terms_needing,
)
from parser.objectives.base import ParserOutput
from parser.train.loop import Trainer
from parser.train.objective import build_training_objective
from tests.objectives.helpers import TreeCRF, make_batch, random_scores
from tests.objectives.toy_objective import ExpectedLength
from tests.train.helpers import QUIET, TINY_DATA, TINY_MODEL, Recorder

LENGTHS = [3, 2]
HEADS = [[2, 0, 2], [0, 1]]
RELS = [[0, 1, 1], [1, 0]]
# The toy's one YAML file, as it would sit in configs/objective/toy_length.yaml.
TOY_YAML = """\
# Likelihood on the labeled trees + a short-arc prior on every batch.
terms:
  likelihood:
    weight: 1.0
  toy_length:
    weight: 0.2
    warmup: 10
    power: 2
"""


def output(seed=0):
    scores = random_scores(LENGTHS, seed=seed)
    return ParserOutput(TreeCRF(scores, torch.tensor(LENGTHS))), scores


@pytest.fixture
def configs_with_toy(tmp_path):
    """A copy of configs/ with the toy's YAML file added to the objective group."""
    root = tmp_path / "configs"
    shutil.copytree(config_dir(), root)
    (root / "objective" / "toy_length.yaml").write_text(TOY_YAML)
    return root


def test_a_new_objective_is_one_module_and_one_yaml_file(configs_with_toy, tmp_path):
    register_configs()
    with initialize_config_dir(config_dir=str(configs_with_toy), version_base="1.3"):
        cfg = compose("config", overrides=[
            *TINY_DATA, "objective=toy_length", *TINY_MODEL, *QUIET, "trainer.max_steps=3",
            "trainer.eval_every=3", "trainer.final_eval=false", "trainer.log_every=1", "data.labeled_size=10",
        ])
    # The builder the trainer uses (parser.train.loop), nothing toy-specific anywhere else.
    objective = build_training_objective(cfg.objective.terms, vocabs=None, labeled=[], device="cpu")
    assert objective.names == ["likelihood", "toy_length"]
    toy = objective.terms[1]
    assert toy.objective == ExpectedLength(power=2.0) and toy.stream == "any"
    assert (toy.weight, toy.warmup) == (0.2, 10)
    out, scores = output()
    unlabeled = make_batch(LENGTHS)
    result = objective(out, unlabeled, step=5)
    assert set(result.logs) == {"toy_length/loss", "toy_length/weight", "total"}
    torch.testing.assert_close(result.loss, 0.1 * ExpectedLength(power=2.0)(out, unlabeled).loss)
    result.loss.backward()
    assert scores.grad.abs().sum() > 0
    labeled = objective(output()[0], make_batch(LENGTHS, heads=HEADS, rels=RELS), step=5)
    assert {"likelihood/loss", "toy_length/loss"} <= set(labeled.logs)
    # And the trainer itself runs it, on both streams.
    trainer = Trainer(cfg, run_dir=tmp_path / "run")
    trainer.logger = recorder = Recorder()
    assert trainer.fit().step == 3
    logged = {key for values in recorder.values.values() for key in values}
    assert {"train/toy_length/loss", "train/likelihood/loss"} <= logged


def test_the_toy_kind_is_resolved_like_the_others():
    kind = get_kind("toy_length")
    assert kind.objective is ExpectedLength and kind.options is ExpectedLength
    assert kind.per_token and kind.needs == frozenset() and kind.option_names == {"power"}
    assert [k.name for k in kinds()][:7] == ["likelihood", "local", "risk", "confident_arcs", "entropy", "ge", "kl"]
    with pytest.raises(ValueError, match=r"unknown options \['powr'\]; allowed: \['power', 'stream'"):
        build_objective({"toy_length": {"powr": 2}})
    with pytest.raises(ValueError, match="power must be > 0"):
        build_objective({"short": {"type": "toy_length", "power": 0}})
    with pytest.raises(ValueError, match=r"term 'toy_length' \(toy_length\): power='far' is not a number"):
        build_objective({"toy_length": {"power": "far"}})


def test_a_module_in_the_package_is_discovered_without_an_import_list(tmp_path, monkeypatch):
    """pkgutil discovery: a module dropped beside the others registers before the first lookup."""
    import parser.objectives as package

    (tmp_path / "zz_discovered.py").write_text(
        "from dataclasses import dataclass\n"
        "from parser.objectives.registry import register\n\n\n"
        "@register('zz_discovered', stream='unlabeled')\n"
        "@dataclass(frozen=True)\n"
        "class Discovered:\n"
        "    def __call__(self, out, batch):\n"
        "        raise NotImplementedError\n"
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.delitem(sys.modules, "parser.objectives.zz_discovered", raising=False)
    try:
        assert get_kind("zz_discovered").stream == "unlabeled"
    finally:
        sys.modules.pop("parser.objectives.zz_discovered", None)


def test_needs_are_read_from_the_registry():
    assert get_kind("ge").needs == {"upos", "constraints"} and not get_kind("ge").per_token
    assert get_kind("kl").needs == {"teacher"} and get_kind("likelihood").needs == frozenset()
    terms = {"mine": {"type": "ge", "weight": 0.5}, "ge": {"weight": 0.0}, "likelihood": {}, "kl": None}
    assert terms_needing(terms, "upos") == ["mine"] and terms_needing(None, "upos") == []
    assert terms_needing({"kl": {"checkpoint": "t.pt"}}, "teacher") == ["kl"]
    with pytest.raises(ValueError, match="need must be one of"):
        terms_needing(terms, "trees")
    (term,) = resolve_terms({"ge": {"constraints": "oracle", "top_k": 5, "eps": "1e-4"}})
    assert (term.options.constraints, term.options.top_k, term.options.eps) == ("oracle", 5, 1e-4)


def _toy_class():
    @dataclass(frozen=True)
    class Toy:
        level: float = 1.0

        def __call__(self, out, batch):
            raise NotImplementedError

    return Toy


@dataclass(frozen=True)
class _NoSource:
    eps: float = 0.1


@dataclass(frozen=True)
class _Clash:
    weight: float = 1.0


@pytest.mark.parametrize(
    ("declaration", "match"),
    [
        ({"name": "entropy", "stream": "unlabeled"}, r"register\('entropy'\).*Entropy has that name"),
        ({"name": "a/b", "stream": "any"}, "without '/'"),
        ({"name": "toy", "stream": "gold"}, "stream must be one of"),
        ({"name": "toy", "stream": "any", "needs": ("trees",)}, r"unknown needs \['trees'\]"),
        ({"name": "toy", "stream": "any", "per_token": False}, "per_token=False needs across_ranks"),
        ({"name": "toy", "stream": "any", "needs": ("teacher",)}, "its options must have"),
        ({"name": "toy", "stream": "any", "options": _NoSource}, "must define from_options"),
        ({"name": "toy", "stream": "any", "options": _Clash}, r"options \['weight'\] clash"),
    ],
)
def test_bad_declarations_are_refused(monkeypatch, declaration, match):
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    name = declaration.pop("name")
    with pytest.raises(ValueError, match=match):
        register(name, **declaration)(_toy_class())


def test_a_per_token_kind_may_not_define_a_reduction_hook(monkeypatch):
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    toy = _toy_class()
    toy.across_ranks = lambda self, out, batch, ranks: None
    with pytest.raises(ValueError, match="declare per_token=False"):
        register("toy", stream="any")(toy)


class _TwoEqualRanks:
    """Two ranks holding the same trees (the other one's sentence ids shifted by 10), this one a
    third of the global words (a stand-in for the process group:
    parser.train.distributed.ProcessGroupRanks)."""

    world_size = 2

    def __init__(self) -> None:
        self.calls: list[str] = []

    def token_share(self, batch) -> float:
        self.calls.append("token_share")
        return 2 / 3

    def sum(self, tensor):
        self.calls.append("sum")
        return tensor * 2

    def gather_rows(self, *rows):
        self.calls.append("gather_rows")
        return tuple(torch.cat([row, row + 10 if not row.dtype.is_floating_point else row]) for row in rows)


def test_weighted_sum_reduces_each_term_with_its_own_hook():
    constraints = load_constraints("ud_universal", ["<pad>", "<unk>", "<root>", "DET", "NOUN", "VERB"])
    ge = GeneralizedExpectation(constraints)
    objective = WeightedSum((Term("entropy", Entropy(), weight=0.5), Term("ge", ge)))
    out, _ = output()
    batch = make_batch(LENGTHS, upos=[[3, 4, 5], [4, 5]])
    ranks = _TwoEqualRanks()
    result = objective(out, batch, ranks=ranks)
    # GE: the doubled totals give the same proportions, hence the 1-process loss, unscaled;
    # entropy (per token): its loss and logs times the token share.
    entropy, alone = Entropy()(out, batch), ge(out, batch)
    assert ranks.calls == ["token_share", "sum", "sum"]
    torch.testing.assert_close(result.loss, 0.5 * (2 / 3) * entropy.loss + alone.loss)
    torch.testing.assert_close(result.logs["entropy/value"], (2 / 3) * entropy.logs["value"])
    torch.testing.assert_close(result.logs["ge/loss"], alone.logs["loss"])
    plain = objective(out, batch)
    torch.testing.assert_close(plain.loss, 0.5 * entropy.loss + alone.loss)


def test_corpus_ge_gathers_every_ranks_rows_into_its_cache():
    constraints = load_constraints("ud_universal", ["<pad>", "<unk>", "<root>", "DET", "NOUN", "VERB"])
    ge = GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache")
    objective = WeightedSum((Term("likelihood", Likelihood(), stream="labeled"), Term("ge", ge, stream="unlabeled")))
    out, _ = output()
    ranks = _TwoEqualRanks()
    result = objective(out, make_batch(LENGTHS, upos=[[3, 4, 5], [4, 5]], index=[0, 1]), ranks=ranks)
    assert ranks.calls == ["token_share", "sum", "sum", "gather_rows"]
    assert set(result.logs) == {"ge/loss", "ge/mean_abs_error", "ge/active", "ge/weight", "total"}
    assert isinstance(result, Output) and len(ge.cache) == 4
    assert ge.cache.seen.nonzero().flatten().tolist() == [0, 1, 10, 11]
    # The same trees twice: the proportions, hence the loss, of one process.
    alone = GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache")
    one = alone(out, make_batch(LENGTHS, upos=[[3, 4, 5], [4, 5]], index=[0, 1]))
    torch.testing.assert_close(result.logs["ge/loss"], one.logs["loss"])
