"""Build an edge scorer by name, as the trainer's config names it."""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from torch import nn

from parser.models.biaffine import BiaffineScorer
from parser.models.loglinear import LogLinearScorer

SCORERS: dict[str, type[nn.Module]] = {"biaffine": BiaffineScorer, "loglinear": LogLinearScorer}
VOCABULARY_SIZES = ("n_words", "n_chars", "n_upos", "n_rels", "n_vectors", "vector_dim")


def scorer_options(kind: str) -> tuple[str, ...]:
    """The hyper-parameter names the scorer ``kind`` accepts (vocabulary sizes excluded)."""
    cls = _scorer_class(kind)
    return tuple(name for name in inspect.signature(cls).parameters if name not in VOCABULARY_SIZES)


def build_scorer(
    kind: str,
    *,
    n_words: int,
    n_chars: int,
    n_upos: int,
    n_rels: int,
    n_vectors: int = 0,
    vector_dim: int = 0,
    options: Mapping[str, object] | None = None,
) -> nn.Module:
    """A new scorer of ``kind`` ('biaffine' or 'loglinear') for the given vocabulary sizes.

    ``options`` holds its hyper-parameters (e.g. ``{"lstm_layers": 2}``); a name the scorer does not
    take raises ValueError listing the ones it does. The log-linear scorer ignores ``n_chars``;
    ``n_vectors`` and ``vector_dim`` size the pretrained vector rows (biaffine, ``model.vectors``).
    """
    cls = _scorer_class(kind)
    accepted = scorer_options(kind)
    options = dict(options or {})
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"model option(s) {', '.join(unknown)} not accepted by scorer {kind!r}; "
            f"accepted: {', '.join(accepted)}"
        )
    sizes = {"n_words": n_words, "n_chars": n_chars, "n_upos": n_upos, "n_rels": n_rels,
             "n_vectors": n_vectors, "vector_dim": vector_dim}
    parameters = inspect.signature(cls).parameters
    sizes = {name: value for name, value in sizes.items() if name in parameters}
    return cls(**sizes, **options)


def _scorer_class(kind: str) -> type[nn.Module]:
    if kind not in SCORERS:
        raise ValueError(f"unknown scorer kind {kind!r}; known: {', '.join(sorted(SCORERS))}")
    return SCORERS[kind]
