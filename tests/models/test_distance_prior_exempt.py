"""``distance_prior_exempt``: the log-linear scorer leaves the harmonic distance prior off every arc
whose dependent carries an exempt UPOS tag; the trainer maps tag names to ids (``build_parser``)."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from parser.config import ModelConfig, ScorerKind
from parser.data.vocab import Vocab
from parser.models import LogLinearScorer
from parser.models.loglinear import log_inverse_distance
from parser.models.parser_model import build_parser, upos_ids
from tests.models.batches import (
    N_UPOS,
    assert_padding_invariant,
    random_batch,
    random_loglinear,
    with_noisy_padding,
)

LENGTHS = [6, 1, 11, 3]
EXEMPT = 5  # one of the tag ids 3..N_UPOS-1 that random_batch draws


def random_model(*, exempt: tuple[int, ...] = (), prior: float = 1.5, seed: int = 0) -> LogLinearScorer:
    return random_loglinear(seed=seed, lexical=False, distance_prior=prior, distance_prior_exempt=exempt)


def test_prior_left_off_exactly_the_exempt_dependents_arcs() -> None:
    batch = random_batch(LENGTHS, seed=3)
    assert (batch.upos == EXEMPT).any() and ((batch.upos >= 3) & (batch.upos != EXEMPT)).any()
    with torch.no_grad():
        plain = random_model(seed=1)(batch).arcs
        exempt = random_model(exempt=(EXEMPT,), seed=1)(batch).arcs
        no_prior = random_model(prior=0.0, seed=1)(batch).arcs
    width = batch.words.shape[1]
    prior = 1.5 * log_inverse_distance(width)
    for b, n in enumerate(LENGTHS):
        for d in range(1, n + 1):
            for h in range(n + 1):
                if h == d:
                    continue
                if int(batch.upos[b, d]) == EXEMPT:
                    # no prior at all on this dependent's arcs, at any distance
                    assert exempt[b, d, h] == pytest.approx(float(no_prior[b, d, h]), abs=1e-5)
                else:
                    assert exempt[b, d, h] == pytest.approx(float(plain[b, d, h]), abs=1e-5)
                    want = float(no_prior[b, d, h] + prior[d, h])
                    assert plain[b, d, h] == pytest.approx(want, abs=1e-5)
    # the option changes something: an exempt dependent with a head two or more words away
    b, d = next((b, d) for b, n in enumerate(LENGTHS) for d in range(1, n + 1)
                if int(batch.upos[b, d]) == EXEMPT and n >= 3)  # fmt: skip
    h = 1 if d >= 3 else 3
    want = -1.5 * math.log(abs(d - h))
    assert float(plain[b, d, h] - exempt[b, d, h]) == pytest.approx(want, abs=1e-5) and want < 0


def test_exempt_padding_invariance() -> None:
    model = random_model(exempt=(EXEMPT, 6), seed=6)
    tight = random_batch(LENGTHS, seed=7)
    noisy = with_noisy_padding(tight, extra=3, extra_chars=0, seed=8)
    assert_padding_invariant(model, tight, noisy)


def test_scorer_rejects_special_and_out_of_range_ids() -> None:
    for bad in [(0,), (2,), (N_UPOS,)]:
        with pytest.raises(ValueError, match="distance_prior_exempt"):
            random_model(exempt=bad)


def test_names_map_to_ids_and_unknown_names_fail() -> None:
    upos = Vocab(["NOUN", "PUNCT", "VERB"], name="upos")
    assert upos_ids(["PUNCT"], upos) == (upos.index("PUNCT"),)
    assert upos_ids(["PUNCT", "SYM"], upos) == (upos.index("PUNCT"),)  # SYM: no id, left out
    assert upos_ids([], None) == ()
    with pytest.raises(ValueError, match=r"\['PUNC'\] not UD UPOS tags; known: .*PUNCT"):
        upos_ids(["PUNC"], upos)
    with pytest.raises(ValueError, match="no UPOS vocabulary"):
        upos_ids(["PUNCT"], None)


def test_build_parser_maps_the_config_names() -> None:
    upos = Vocab(["NOUN", "PUNCT", "VERB"], name="upos")
    sizes = {"words": 10, "chars": 5, "upos": len(upos), "rels": 4}
    cfg = OmegaConf.merge(
        OmegaConf.structured(ModelConfig),
        {"kind": ScorerKind.loglinear.value, "lexical": False, "distance_prior": 1.0,
         "distance_prior_exempt": ["PUNCT"], "n_buckets": 64, "n_label_buckets": 64},
    )  # fmt: skip
    scorer = build_parser(cfg, sizes, upos=upos).scorer
    assert scorer.distance_prior_exempt == (upos.index("PUNCT"),)
    assert scorer._prior_exempt.tolist() == [i == upos.index("PUNCT") for i in range(len(upos))]
    assert "_prior_exempt" not in scorer.state_dict()  # rebuilt from the config, not saved
    cfg.distance_prior_exempt = []
    assert build_parser(cfg, sizes).scorer.distance_prior_exempt == ()


def test_trainer_and_checkpoint_carry_the_exempt_tags(tmp_path) -> None:
    from parser.inference import load_parser
    from parser.train.loop import Trainer
    from tests.train.helpers import tiny_config

    cfg = tiny_config("model=loglinear_unlexicalized", "model.distance_prior=1.0",
                      "model.distance_prior_exempt=[PUNCT]", "model.n_buckets=4096",
                      "model.n_label_buckets=1024", "trainer.max_steps=2", "trainer.eval_every=2")  # fmt: skip
    trainer = Trainer(cfg, run_dir=tmp_path)
    punct = trainer.task.vocabs.upos.index("PUNCT")
    assert punct >= 3 and trainer.model.scorer.distance_prior_exempt == (punct,)
    trainer.fit()
    model, vocabs, _ = load_parser(tmp_path / "checkpoints" / "best.pt")
    assert model.scorer.distance_prior_exempt == (vocabs.upos.index("PUNCT"),)
    with pytest.raises(ValueError, match="PUNC"):
        Trainer(tiny_config("model=loglinear_unlexicalized", "model.distance_prior_exempt=[PUNC]"),
                run_dir=tmp_path / "bad")
