from __future__ import annotations

import pytest

from parser.models import BiaffineScorer, LogLinearScorer, build_scorer, scorer_options

SIZES = {"n_words": 20, "n_chars": 10, "n_upos": 8, "n_rels": 4}


def test_builds_each_kind_with_options() -> None:
    model = build_scorer(
        "biaffine",
        **SIZES,
        options={"lstm_layers": 1, "lstm_hidden": 8, "arc_mlp": 6, "use_upos": False},
    )
    assert isinstance(model, BiaffineScorer)
    assert model.lstm.num_layers == 1 and model.lstm.hidden_size == 8 and model.upos_embed is None
    model = build_scorer("loglinear", **SIZES, options={"n_buckets": 64})
    assert isinstance(model, LogLinearScorer) and model.weights.num_embeddings == 64
    assert "n_chars" not in scorer_options("loglinear") and "dropout" in scorer_options("biaffine")


def test_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="'crf'.*biaffine, loglinear"):
        build_scorer("crf", **SIZES)


def test_unknown_option_lists_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="lstm_hiden.*accepted: .*lstm_hidden"):
        build_scorer("biaffine", **SIZES, options={"lstm_hiden": 10})
    with pytest.raises(ValueError, match="dropout"):
        build_scorer("loglinear", **SIZES, options={"dropout": 0.1})
