"""Word features for GE constraints on tags (Mann & McCallum 2008 style): a word form or a suffix,
case-insensitive, read from a batch's character ids so that rare words (UNK in the word
vocabulary) still fire their suffix features.

A feature set turns ``chars [B, N+1, C]`` into ``fires [B, T, K]`` (ROOT dropped, ``T = N``) and
holds, for constraint ``k``, a target distribution over tags ``targets[k] [S]``: the proportions of
each tag among the words firing ``k``. Targets are estimated from labeled sentences
(:func:`estimate_targets`, additive smoothing) or given.

Characters are compared in a lowercase alphabet built from the character vocabulary; a feature
whose value holds a character outside it never fires. Forms are cut to the encoder's
``max_chars`` characters, so a suffix feature sees the cut form of a very long word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from parser.data.conllu_io import Sentence
from parser.data.vocab import N_SPECIAL, Vocab

__all__ = ["KINDS", "TagConstraints", "TagFeature", "estimate_targets", "frequent_forms", "lower"]

KINDS = ("form", "suffix")
_NEVER = -1  # a lowercase id no character has


def lower(text: str) -> str:
    """Lowercase character by character (a character whose lowercase is longer stays as it is),
    the same mapping the tensor side applies to character ids."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


@dataclass(frozen=True)
class TagFeature:
    """``kind`` is ``"form"`` (the whole lowercased form equals ``value``) or ``"suffix"`` (it ends
    with ``value`` and is longer than it)."""

    kind: str
    value: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"TagFeature: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.value or lower(self.value) != self.value:
            raise ValueError(f"TagFeature {self.kind}: value must be non-empty lowercase, got {self.value!r}")

    @property
    def name(self) -> str:
        return f"{self.kind}={self.value}"

    def fires(self, form: str) -> bool:
        form = lower(form)
        if self.kind == "form":
            return form == self.value
        return len(form) > len(self.value) and form.endswith(self.value)


def frequent_forms(sentences: Iterable[Sentence], *, top_k: int) -> list[TagFeature]:
    """``form`` features of the ``top_k`` most frequent lowercased forms (mostly closed-class
    words: determiners, pronouns, prepositions, punctuation); ties alphabetical."""
    counts = Counter(lower(f) for s in sentences for f in s.forms)
    ranked = sorted(counts, key=lambda f: (-counts[f], f))[:top_k]
    return [TagFeature("form", f) for f in ranked]


def estimate_targets(
    sentences: Iterable[Sentence], features: Sequence[TagFeature], upos: Vocab, *,
    smoothing: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """``(targets [K, S] float64, counts [K] long)``: tag proportions among the annotated words of
    ``sentences`` firing each feature, ``smoothing`` added to every tag count; ``S`` real tags
    (``len(upos) - N_SPECIAL``). A feature seen on no word gets the uniform distribution."""
    if smoothing < 0:
        raise ValueError(f"estimate_targets: smoothing must be >= 0, got {smoothing}")
    n_tags = len(upos) - N_SPECIAL
    table = torch.zeros(len(features), n_tags, dtype=torch.float64)
    by_form: dict[str, list[int]] = {}
    for sentence in sentences:
        for form, tag in zip(sentence.forms, sentence.upos):
            tag_id = upos.index(tag) - N_SPECIAL if tag is not None else -1
            if tag_id < 0:
                continue
            firing = by_form.get(form)
            if firing is None:
                firing = by_form[form] = [k for k, f in enumerate(features) if f.fires(form)]
            for k in firing:
                table[k, tag_id] += 1
    counts = table.sum(-1).long()
    table += smoothing
    totals = table.sum(-1, keepdim=True)
    targets = torch.where(totals > 0, table / totals.clamp(min=1e-300), 1.0 / n_tags)
    return targets, counts


class TagConstraints:
    """GE constraints: ``features`` (K of them) and ``targets [K, S]`` (rows sum to 1), with the
    lowercase alphabet of the character vocabulary ``chars``."""

    def __init__(self, features: Sequence[TagFeature], targets: Tensor, chars: Vocab) -> None:
        features = list(features)
        if not features:
            raise ValueError("TagConstraints: no features")
        if targets.dim() != 2 or targets.shape[0] != len(features):
            raise ValueError(
                f"TagConstraints: targets must be [K={len(features)}, S]; got {tuple(targets.shape)}"
            )
        sums = targets.sum(-1)
        if bool((targets < 0).any()) or not torch.allclose(sums, torch.ones_like(sums), atol=1e-6):
            k = int(((sums - 1).abs() + (targets < 0).any(-1)).argmax())
            raise ValueError(
                f"TagConstraints: targets[{k}] ({features[k].name}) is not a distribution "
                f"(sum {float(sums[k]):.6f}, min {float(targets[k].min()):.6f})"
            )
        self.features = features
        self.targets = targets.to(torch.float64)
        alphabet: dict[str, int] = {}
        lowered = [alphabet.setdefault(lower(c), len(alphabet)) for c in chars.tokens]
        self._alphabet = alphabet
        self._lower = torch.tensor(lowered, dtype=torch.long)  # char id -> lowercase id
        for special in range(N_SPECIAL):  # PAD, UNK, ROOT never match a character of a value
            self._lower[special] = _NEVER
        self._values = [
            torch.tensor([alphabet.get(c, _NEVER - 1) for c in f.value], dtype=torch.long)
            for f in features
        ]

    @property
    def n_tags(self) -> int:
        return int(self.targets.shape[1])

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]

    def fires(self, chars: Tensor, lengths: Tensor) -> Tensor:
        """``chars [B, N+1, C]`` ids, ``lengths [B]`` -> ``[B, T, K]`` bool: word ``i + 1`` fires
        feature ``k``; False on padding."""
        chars = chars[:, 1:]
        lowered = self._lower.to(chars.device)[chars]  # [B, T, C]
        n_chars = (chars != 0).sum(-1)  # characters are left-aligned, PAD after them
        present = torch.arange(chars.shape[1], device=chars.device) < lengths[:, None]
        columns = []
        for feature, value in zip(self.features, self._values):
            value = value.to(chars.device)
            size = int(value.shape[0])
            if size > chars.shape[-1]:
                columns.append(torch.zeros_like(present))
                continue
            if feature.kind == "form":
                window = lowered[..., :size]
                fits = n_chars == size
            else:  # the last `size` characters: offsets n - size .. n - 1
                start = (n_chars - size).clamp(min=0)
                offsets = start[..., None] + torch.arange(size, device=chars.device)
                window = lowered.gather(-1, offsets.clamp(max=chars.shape[-1] - 1))
                fits = n_chars > size
            columns.append(present & fits & (window == value).all(-1))
        return torch.stack(columns, dim=-1)
