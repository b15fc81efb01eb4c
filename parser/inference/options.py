"""One options object per prediction request: what ``parser-predict``, :class:`parser.Pipeline`
and ``parser-serve`` all build and pass on, never a list of keyword arguments.

The model is not part of it: a request names its model separately (a checkpoint path for
:func:`parser.inference.predict_file`, the loaded :class:`parser.Pipeline` itself, a model name
of the service); the options say what to ask of that model.

>>> options = PredictOptions(kbest=3, confidence=True)
>>> options.kbest, options.alternatives
(3, True)
>>> PredictOptions.from_strings({"kbest": "2", "confidence": "yes", "attach_to_units": "PUNCT"})
... # doctest: +ELLIPSIS
PredictOptions(format='auto', confidence=True, kbest=2, ..., attach_to_units=('PUNCT',), ...)
>>> PredictOptions(kbest=-1)
Traceback (most recent call last):
...
ValueError: kbest=-1: expected an integer >= 0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Self

__all__ = ["FORMATS", "PredictOptions"]

FORMATS = ("auto", "conllu", "text", "raw")  # raw: through a tokenizer (pipeline or tokenizer=)
CHOICES = {"format": FORMATS, "keep_heads": ("none", "given"), "keep_columns": ("none", "given"),
           "on_invalid": ("error", "skip")}
DECODER = ("projective", "attach_to_units", "ud_rules", "label_grid")  # fixed when a model loads
MAX_WORDS = 1000  # the longest sentence parsed (parser.inference.annotator.MAX_WORDS is this one)


@dataclass(frozen=True, kw_only=True)
class PredictOptions:
    """How to parse one input (every field has the ``parser-predict`` option's name and default).

    ``format``: ``auto`` (CoNLL-U for ``.conllu`` files, else text), ``conllu``, ``text`` (one
    tokenised sentence per line) or ``raw`` (tokenised by a pipeline's tokenizer);
    ``confidence``: marginals in MISC and tree comments; ``kbest`` / ``samples`` (with ``seed``):
    alternatives of the tree CRF (at most one of them); ``keep_heads`` / ``keep_columns``:
    ``given`` keeps the input's heads (fixed arcs) / LEMMA, UPOS, XPOS, FEATS where given;
    ``keep_deps``: keep DEPS; ``max_words``: longer sentences are not parsed; ``on_invalid``:
    ``error`` or ``skip`` malformed CoNLL-U sentences; ``retag``: replace the input's UPOS by the
    tagger's; ``projective``, ``attach_to_units``, ``ud_rules``, ``label_grid``: the decoder's
    settings where not None (applied when the model loads); ``tokens_per_batch``: words per
    parser batch; ``chunk_size``: sentences held at once; ``device``: ``auto``, ``cpu``,
    ``cuda``..."""

    format: str = "auto"
    confidence: bool = False
    kbest: int = 0
    samples: int = 0
    seed: int = 0
    keep_heads: str = "none"
    keep_columns: str = "none"
    keep_deps: bool = False
    max_words: int = MAX_WORDS
    on_invalid: str = "error"
    retag: bool = False
    projective: bool | None = None
    attach_to_units: tuple[str, ...] | None = None
    ud_rules: str | tuple[str, ...] | None = None
    label_grid: bool | None = None
    tokens_per_batch: int = 5000
    chunk_size: int = 1000
    device: str = field(default="auto")

    def __post_init__(self) -> None:
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)}: expected one of "
                                 f"{', '.join(allowed)}")
        for name in ("confidence", "keep_deps", "retag"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: expected true or false")  # noqa: TRY004
        for name in ("projective", "label_grid"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: expected true, false or None")
        for name in ("kbest", "samples"):
            _check_int(name, getattr(self, name), least=0)
        for name in ("max_words", "tokens_per_batch", "chunk_size"):
            _check_int(name, getattr(self, name), least=1)
        _check_int("seed", self.seed, least=None)
        if self.kbest and self.samples:
            raise ValueError(f"kbest={self.kbest}, samples={self.samples}: expected one of them "
                             "(>= 1), or neither")
        if not isinstance(self.device, str) or not self.device:
            raise ValueError(f"device={self.device!r}: expected auto, cpu, cuda or cuda:<n>")
        if self.attach_to_units is not None:  # lists become tuples: the object stays hashable
            object.__setattr__(self, "attach_to_units", _names("attach_to_units",
                                                               self.attach_to_units))
        if self.ud_rules is not None and not isinstance(self.ud_rules, str):
            object.__setattr__(self, "ud_rules", _names("ud_rules", self.ud_rules))

    @property
    def alternatives(self) -> bool:
        """Whether the tree CRF's alternatives are asked for (k-best, samples, fixed arcs)."""
        return bool(self.kbest or self.samples or self.keep_heads == "given")

    def decoder(self) -> dict:
        """The decoder overrides as keywords of :func:`parser.inference.loading.with_overrides`."""
        return {name: getattr(self, name) for name in DECODER}

    def replace(self, **changes) -> Self:
        """A copy with ``changes`` (validated again)."""
        return replace(self, **changes)

    @classmethod
    def from_strings(cls, values: Mapping[str, str | None]) -> Self:
        """The options of ``key=value`` strings (``parser-predict``'s, a service's parameters):
        keys that are not fields are ignored, None values keep the default; a bad value is a
        ``ValueError`` naming its key."""
        known = {f.name: f for f in fields(cls)}
        parsed: dict = {}
        for key, value in values.items():
            if key not in known or value is None:
                continue
            parsed[key] = _parse(key, value)
        return cls(**parsed)


def _parse(key: str, value):
    """One ``key=value`` string as the field's type."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if key in ("confidence", "keep_deps", "retag", "projective", "label_grid"):
        lowered = text.lower()
        if lowered in ("true", "yes", "1"):
            return True
        if lowered in ("false", "no", "0"):
            return False
        raise ValueError(f"{key}={value}: expected true or false")
    if key in ("kbest", "samples", "seed", "max_words", "tokens_per_batch", "chunk_size"):
        try:
            return int(text)
        except ValueError:
            kind = {"seed": "an integer", "kbest": "an integer >= 0",
                    "samples": "an integer >= 0"}.get(key, "a positive integer")
            raise ValueError(f"{key}={value}: expected {kind}") from None
    if key == "attach_to_units":
        if text.lower() in ("", "none", "[]"):
            return ()
        return tuple(tag.strip() for tag in text.split(",") if tag.strip())
    return text


def _check_int(name: str, value, *, least: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r}: expected an integer")  # noqa: TRY004
    if least is not None and value < least:
        expected = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise ValueError(f"{name}={value}: expected {expected}")


def _names(name: str, values: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{name}={values!r}: expected a list of names")
    return tuple(values)
