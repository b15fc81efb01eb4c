"""First-order edge features of McDonald, Crammer & Pereira (2005), hashed, for every
``(dep, head)`` pair of a batch at once.

A feature is a tuple of small integers (a template number, then word/POS ids, direction,
distance bin); ``hash_values`` maps it to an integer in ``[0, MODULUS)`` with a polynomial hash
in int64 tensor arithmetic, the same in every process and on every device (Python's ``hash()`` is
salted per process). Scorers reduce it modulo their table size.

Feature sources, each shaped to broadcast over ``[B, dep, head]``:

- ``hw``, ``hp``: head word / UPOS, ``[B, 1, N+1]``; ``dw``, ``dp``: dependent's, ``[B, N+1, 1]``;
- ``hx``, ``dx``: the word's 5-character prefix (the whole form when it is shorter), hashed from
  its character ids, so it exists for words the vocabulary maps to UNK too; ``hs``, ``ds``: its
  3-character suffix (-ing, -ed, -ly: some of the verb form and word class UPOS leaves out);
- ``hp-1``, ``hp+1``, ``dp-1``, ``dp+1``: the UPOS left/right of head or dependent; ``BOUNDARY``
  (``= n_upos``) left of ROOT and right of the last word, so padding never leaks in;
- ``direction`` (1 when the head is left of its dependent) and ``distance`` (bin of ``|dep-head|``:
  1, 2, 3, 4, 5, 6-10, >10), ``[N+1, N+1]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

MODULUS = 2_147_483_647  # 2^31 - 1, prime; residue * MULTIPLIER < 2^62, so int64 never overflows
MULTIPLIER = 1_540_483_477

# Upper edges of the distance bins: |dep - head| <= 1, 2, 3, 4, 5, 10, and beyond.
DISTANCE_EDGES = (1, 2, 3, 4, 5, 10)
N_DISTANCE_BINS = len(DISTANCE_EDGES) + 1

# Table 1 of McDonald et al. (2005). Each is also conjoined with direction and distance.
UNIGRAM = (("hw", "hp"), ("hw",), ("hp",), ("dw", "dp"), ("dw",), ("dp",))
BIGRAM = (
    ("hw", "hp", "dw", "dp"),
    ("hp", "dw", "dp"),
    ("hw", "dw", "dp"),
    ("hw", "hp", "dp"),
    ("hw", "hp", "dw"),
    ("hw", "dw"),
    ("hp", "dp"),
)
SURROUNDING = (
    ("hp", "hp+1", "dp-1", "dp"),
    ("hp-1", "hp", "dp-1", "dp"),
    ("hp", "hp+1", "dp", "dp+1"),
    ("hp-1", "hp", "dp", "dp+1"),
)
# Backed-off surrounding templates: one of the two context tags dropped (as MSTParser does).
SURROUNDING_BACKOFF = (
    ("hp", "hp+1", "dp"),
    ("hp-1", "hp", "dp"),
    ("hp", "dp-1", "dp"),
    ("hp", "dp", "dp+1"),
)


def _words_replaced(
    templates: tuple[tuple[str, ...], ...], by: str
) -> tuple[tuple[str, ...], ...]:
    """The templates holding a word, each word replaced by source ``by`` ("x": prefix,
    "s": suffix)."""
    swap = {"hw": "h" + by, "dw": "d" + by}
    return tuple(tuple(swap.get(n, n) for n in t) for t in templates if {"hw", "dw"} & set(t))


PREFIX = _words_replaced(UNIGRAM + BIGRAM, by="x")
SUFFIX = _words_replaced(UNIGRAM + BIGRAM, by="s")
ARC_TEMPLATES = UNIGRAM + BIGRAM + SURROUNDING + PREFIX + SURROUNDING_BACKOFF + SUFFIX
# Sources that name the word itself (form, prefix, suffix); the rest are UPOS tags.
LEXICAL_SOURCES = frozenset({"hw", "dw", "hx", "dx", "hs", "ds"})
# Template numbers (indices into ARC_TEMPLATES, which the hashes use) of the templates made of
# UPOS tags only: with direction, distance and the in-between template, an unlexicalized model.
UNLEXICALIZED = tuple(
    number for number, names in enumerate(ARC_TEMPLATES) if not LEXICAL_SOURCES & set(names)
)
# The in-between template (hp, POS of a word strictly between, dp) is numbered after the others.
BETWEEN_TEMPLATE = len(ARC_TEMPLATES)
# (direction, distance) alone, for the unlexicalized scorer only.
DISTANCE_TEMPLATE = BETWEEN_TEMPLATE + 1


def hash_extend(h: Tensor | int, *values: Tensor | int) -> Tensor:
    """Fold ``values`` (non-negative ints or long tensors, broadcast together) into hash ``h``."""
    for value in values:
        h = (h * MULTIPLIER + value + 1) % MODULUS
    return torch.as_tensor(h)


def hash_values(template: int, *values: Tensor | int) -> Tensor:
    """The hash of feature ``(template, *values)``, a long tensor in ``[0, MODULUS)``."""
    return hash_extend(template + 1, *values)


def direction_and_distance(
    width: int, *, device: torch.device | str | None = None
) -> tuple[Tensor, Tensor]:
    """``direction[dep, head]`` (1 when ``head < dep``) and ``distance[dep, head]`` (bin in
    ``[0, N_DISTANCE_BINS)``), both ``[N+1, N+1]`` long."""
    positions = torch.arange(width, device=device)
    dep, head = positions[:, None], positions[None, :]
    direction = (head < dep).long()
    edges = torch.tensor(DISTANCE_EDGES, device=device)
    distance = torch.bucketize((dep - head).abs(), edges)
    return direction, distance


PREFIX_LENGTH = 5
SUFFIX_LENGTH = 3


def prefix_ids(chars: Tensor, present: Tensor) -> Tensor:
    """``[B, N+1]``: a hash of each word's first ``PREFIX_LENGTH`` character ids (PAD-filled
    when shorter, so a short word's value is its whole form); 0 where ``present`` is False.
    ``chars`` ``[B, N+1, C]``."""
    width = chars.shape[-1]
    if width < PREFIX_LENGTH:
        chars = F.pad(chars, (0, PREFIX_LENGTH - width))
    ids = hash_extend(0, *chars[..., :PREFIX_LENGTH].unbind(-1))
    return ids.masked_fill(~present, 0)


def suffix_ids(chars: Tensor, present: Tensor) -> Tensor:
    """``[B, N+1]``: a hash of each word's last ``SUFFIX_LENGTH`` character ids (PAD in front
    when shorter); 0 where ``present`` is False. ``chars`` ``[B, N+1, C]``, PAD (0) after each
    form."""
    length = (chars != 0).sum(-1, keepdim=True)  # [B, N+1, 1]
    offsets = torch.arange(-SUFFIX_LENGTH, 0, device=chars.device)
    index = length + offsets  # [B, N+1, SUFFIX_LENGTH]; negative before the first character
    last = chars.gather(-1, index.clamp_min(0)).masked_fill(index < 0, 0)
    ids = hash_extend(1, *last.unbind(-1))
    return ids.masked_fill(~present, 0)


def arc_sources(
    words: Tensor, upos: Tensor, lengths: Tensor, *, n_upos: int, chars: Tensor | None = None
) -> dict[str, Tensor]:
    """The word, prefix and UPOS sources of the templates (see the module docstring);
    ``words``/``upos`` ``[B, N+1]``, ``chars`` ``[B, N+1, C]`` (None: no prefix sources),
    ``lengths`` ``[B]``."""
    width = words.shape[1]
    present = torch.arange(width, device=words.device) <= lengths[:, None]
    tags = upos.masked_fill(~present, n_upos)  # BOUNDARY beyond the last word
    boundary = tags.new_full((tags.shape[0], 1), n_upos)
    left = torch.cat([boundary, tags[:, :-1]], dim=1)
    right = torch.cat([tags[:, 1:], boundary], dim=1)
    named = [("w", words), ("p", upos), ("p-1", left), ("p+1", right)]
    if chars is not None:
        named += [("x", prefix_ids(chars, present)), ("s", suffix_ids(chars, present))]
    sources = {}
    for name, values in named:
        sources["h" + name] = values[:, None, :]
        sources["d" + name] = values[:, :, None]
    return sources


def between_counts(upos: Tensor, lengths: Tensor, *, n_upos: int) -> Tensor:
    """``counts[b, dep, head, t]``: how many words strictly between ``dep`` and ``head`` have UPOS
    ``t``; ``[B, N+1, N+1, n_upos]`` float. Prefix sums over positions, no loop over tokens."""
    batch, width = upos.shape
    positions = torch.arange(width, device=upos.device)
    real = (positions > 0) & (positions <= lengths[:, None])
    onehot = F.one_hot(upos, n_upos).float() * real[..., None]
    # prefix[:, i] counts the tags at positions < i.
    prefix = torch.cat([onehot.new_zeros(batch, 1, n_upos), onehot.cumsum(dim=1)], dim=1)
    dep, head = positions[:, None], positions[None, :]
    low, high = torch.minimum(dep, head), torch.maximum(dep, head)
    # Positions low+1 .. high-1; the self-loop (low == high) would come out negative.
    return (prefix[:, high] - prefix[:, low + 1]).clamp_min(0)
