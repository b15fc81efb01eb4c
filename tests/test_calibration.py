"""Temperature scaling: the fit recovers a known temperature from trees sampled from a tree CRF;
parser-calibrate writes a new checkpoint whose model carries the temperatures, decodes the same
trees (the maximum spanning tree is invariant to positive scaling) with other HeadProb values,
and leaves the input checkpoint untouched."""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from parser.cli.calibrate import main as calibrate_main
from parser.data.conllu_io import read_conllu
from parser.inference import load_parser, parse
from parser.inference.calibration import (
    GoldScores,
    collect_gold_scores,
    fit_temperatures,
    label_nll,
    measure,
    tree_nll,
)
from parser.models.decoder import N_SPECIAL_RELS, tempered
from parser.models.edge_scores import EdgeScores
from parser.runtime.checkpoint import load_checkpoint
from parser.structs import TreeCRF
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config


def _sampled_trees(scale: float, *, seed: int) -> tuple[GoldScores, GoldScores]:
    """Trees drawn from ``TreeCRF(scores)``, paired with the scores ``scale * scores`` a model
    overconfident by ``scale`` would give; a relation classifier likewise. Returns (gold scores
    of that model, gold scores of the true one)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([3, 5, 7, 8, 10, 12] * 50)
    size = int(lengths.max()) + 1
    scores = 2.0 * torch.randn(len(lengths), size, size, generator=generator, dtype=torch.float64)
    heads = TreeCRF(scores, lengths).sample(1, generator=generator)[0]
    usable = torch.ones(len(lengths), dtype=torch.bool)
    rows = 2.0 * torch.randn(4000, 12, generator=generator, dtype=torch.float64)
    labels = torch.multinomial(rows.softmax(-1), 1, generator=generator).squeeze(1)

    def gold(factor: float) -> GoldScores:
        return GoldScores(batches=[(TreeCRF, factor * scores, lengths, heads, None, usable)],
                          single_root=True, joint=False, label_rows=factor * rows, label_gold=labels,
                          sentences_left_out=0, words_left_out=0)

    return gold(scale), gold(1.0)


@pytest.mark.parametrize("scale", [2.5, 0.5])
def test_fit_recovers_a_known_temperature(scale):
    scaled, true = _sampled_trees(scale, seed=7)
    fit = fit_temperatures(scaled)
    # 300 trees (2700 arcs) and 4000 labels: the maximum-likelihood estimates are within a few %.
    assert fit.arc_temperature == pytest.approx(scale, rel=0.08)
    assert fit.label_temperature == pytest.approx(scale, rel=0.08)
    assert fit.tree_nll_after < fit.tree_nll_before
    assert fit.label_nll_after < fit.label_nll_before
    # The tempered model is the true one (up to estimation noise): the same NLL.
    assert fit.tree_nll_after == pytest.approx(tree_nll(true, 1.0), rel=0.01)
    assert fit.label_nll_after == pytest.approx(label_nll(true, 1.0), rel=0.01)
    # A minimum: both neighbours are worse.
    for factor in (0.9, 1.1):
        assert tree_nll(scaled, fit.arc_temperature * factor) > fit.tree_nll_after
        assert label_nll(scaled, fit.label_temperature * factor) > fit.label_nll_after


def test_fit_of_the_true_model_is_one():
    _, true = _sampled_trees(1.0, seed=11)
    fit = fit_temperatures(true)
    assert fit.arc_temperature == pytest.approx(1.0, rel=0.08)


@pytest.fixture(scope="module", params=["classifier", "joint"])
def checkpoint(request, tmp_path_factory) -> Path:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    run_dir = tmp_path_factory.mktemp(f"run-{request.param}")
    Trainer(tiny_config("trainer.max_steps=40", "trainer.eval_every=40",
                        f"model.labels={request.param}"), run_dir=run_dir).fit()
    torch.set_num_threads(previous)
    return run_dir / "checkpoints" / "best.pt"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_parser_calibrate_writes_a_calibrated_copy(checkpoint, fixtures, tmp_path):
    source = fixtures / "tiny-dev.conllu"
    before = _digest(checkpoint)
    output = tmp_path / "calibrated.pt"
    assert calibrate_main([f"checkpoint={checkpoint}", f"gold={source}", f"output={output}"]) == 0
    assert _digest(checkpoint) == before  # the input is only read
    state, original = load_checkpoint(output), load_checkpoint(checkpoint)
    assert "calibration" not in original
    entry = state["calibration"]
    assert set(state) == set(original) | {"calibration"}
    assert all(torch.equal(state["model"][k], v) for k, v in original["model"].items())
    assert entry["tree_nll_after"] <= entry["tree_nll_before"]
    raw, vocabs, config = load_parser(checkpoint)
    model, _, _ = load_parser(output)
    assert model.decoder.arc_temperature == entry["arc_temperature"] != 1.0
    assert model.decoder.label_temperature == entry["label_temperature"] != 1.0
    if config["model"]["labels"] == "joint":  # one labeled CRF: one temperature
        assert model.decoder.label_temperature == model.decoder.arc_temperature
    sentences = read_conllu(source).sentences
    plain = parse(raw, sentences, vocabs, tokens_per_batch=500, confidence=True)
    tempered = parse(model, sentences, vocabs, tokens_per_batch=500, confidence=True)
    assert tempered.heads == plain.heads
    assert tempered.deprels == plain.deprels
    shift = max(abs(a - b) for s, t in zip(plain.confidence, tempered.confidence)
                for a, b in zip(s.head_probs, t.head_probs))
    assert shift > 1e-4


@pytest.mark.parametrize("temperature", [0.1, 10.0])
def test_an_arc_temperature_keeps_the_trees_and_moves_head_probs(checkpoint, fixtures, temperature):
    """The UD rules (root iff head 0) add the log-probability of the allowed relations to a
    classifier's arcs: the temperature divides after them, so the MST is unchanged. A joint
    model's labeled scores are arcs + labels: its temperature divides both."""
    model, vocabs, config = load_parser(checkpoint)
    assert model.decoder.ud_rules is not None and model.decoder.ud_rules.root is not None
    sentences = read_conllu(fixtures / "tiny-dev.conllu").sentences
    plain = parse(model, sentences, vocabs, tokens_per_batch=500, confidence=True)
    joint = config["model"]["labels"] == "joint"
    model.decoder = replace(model.decoder, arc_temperature=temperature,
                            label_temperature=temperature if joint else 1.0)
    hot = parse(model, sentences, vocabs, tokens_per_batch=500, confidence=True)
    assert hot.heads == plain.heads
    # The written tree is the MST: T < 1 moves mass onto it, T > 1 away from it.
    change = [t - p for s, h in zip(plain.confidence, hot.confidence)
              for p, t in zip(s.head_probs, h.head_probs)]
    mean = sum(change) / len(change)
    # The tiny models are nearly flat (mean HeadProb about 0.14): small but clear moves.
    assert mean > 1e-3 if temperature < 1 else mean < -1e-4
    assert max(abs(c) for c in change) > 1e-3


def test_measure_pairs_probabilities_with_gold(checkpoint, fixtures):
    model, vocabs, _ = load_parser(checkpoint)
    sentences = read_conllu(fixtures / "tiny-dev.conllu").sentences
    outcomes = measure(model, sentences, vocabs, tokens_per_batch=500)
    scores = parse(model, sentences, vocabs, tokens_per_batch=500).scores
    assert len(outcomes.head_probs) == len(outcomes.head_correct) == scores["n_words"]
    assert 100 * sum(outcomes.head_correct) / len(outcomes.head_correct) == pytest.approx(scores["uas"])
    assert sum(outcomes.sentence_correct) == sum(outcomes.head_correct)
    assert sum(outcomes.sentence_words) == len(outcomes.head_probs)
    assert len(outcomes.label_probs) == sum(outcomes.head_correct)
    assert all(0.0 <= p <= 1.0 for p in outcomes.head_probs + outcomes.label_probs)
    gold = collect_gold_scores(model, sentences, vocabs, tokens_per_batch=500)
    # A joint model's labeled tree needs every gold relation: a sentence with a relation unseen
    # in training (UNK) has none and is left out; a classifier's arc fit keeps every sentence.
    unseen = sum(any(vocabs.rels.index(rel) < N_SPECIAL_RELS for rel in s.deprels) for s in sentences)
    assert gold.sentences_left_out == (unseen if gold.joint else 0)
    assert (gold.label_rows is None) == gold.joint
    assert math.isfinite(tree_nll(gold, 1.0))


def test_parser_calibrate_refuses_to_overwrite_its_input(checkpoint, fixtures, capsys):
    before = _digest(checkpoint)
    code = calibrate_main([f"checkpoint={checkpoint}", f"gold={fixtures / 'tiny-dev.conllu'}",
                           f"output={checkpoint}"])
    assert code == 2
    assert "is also the input file" in capsys.readouterr().err
    assert _digest(checkpoint) == before
    assert calibrate_main([f"checkpoint={checkpoint}", "output=x.pt"]) == 2
    assert "treebank=<name>" in capsys.readouterr().err


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_a_temperature_must_be_positive_and_finite(value):
    scores = EdgeScores(arcs=torch.zeros(1, 3, 3))
    with pytest.raises(ValueError, match="arc_temperature=.*positive finite"):
        tempered(scores, arc_temperature=value, label_temperature=1.0)
