"""Slow, per-arc Python reference of the log-linear scorer: plain ints, no tensors."""

from __future__ import annotations

from parser.models.features import (
    ARC_TEMPLATES,
    BETWEEN_TEMPLATE,
    DISTANCE_EDGES,
    MODULUS,
    MULTIPLIER,
    PREFIX_LENGTH,
    SUFFIX_LENGTH,
)


def py_hash(template: int, *values: int) -> int:
    h = template + 1
    for value in values:
        h = (h * MULTIPLIER + value + 1) % MODULUS
    return h


def py_extend(h: int, *values: int) -> int:
    for value in values:
        h = (h * MULTIPLIER + value + 1) % MODULUS
    return h


def distance_bin(d: int) -> int:
    return next((i for i, edge in enumerate(DISTANCE_EDGES) if d <= edge), len(DISTANCE_EDGES))


def prefix(chars: list[int]) -> int:
    """The hash of the first PREFIX_LENGTH character ids, PAD (0) filled."""
    first = (list(chars) + [0] * PREFIX_LENGTH)[:PREFIX_LENGTH]
    return py_extend(0, *first)


def suffix(chars: list[int]) -> int:
    """The hash of the last SUFFIX_LENGTH character ids, PAD (0) in front when shorter."""
    form = [c for c in chars if c != 0]
    last = ([0] * SUFFIX_LENGTH + form)[-SUFFIX_LENGTH:]
    return py_extend(1, *last)


def sources(
    words: list[int], upos: list[int], n: int, n_upos: int, h: int, d: int,
    chars: list[list[int]],
) -> dict[str, int]:
    def tag(i: int) -> int:  # BOUNDARY (= n_upos) outside 0..n
        return upos[i] if 0 <= i <= n else n_upos

    return {
        "hx": prefix(chars[h]),
        "dx": prefix(chars[d]),
        "hs": suffix(chars[h]),
        "ds": suffix(chars[d]),
        "hw": words[h],
        "hp": upos[h],
        "hp-1": tag(h - 1),
        "hp+1": tag(h + 1),
        "dw": words[d],
        "dp": upos[d],
        "dp-1": tag(d - 1),
        "dp+1": tag(d + 1),
    }


def arc_score(
    weights: list[float], words: list[int], upos: list[int], n: int, n_upos: int, d: int, h: int,
    chars: list[list[int]],
) -> float:
    src = sources(words, upos, n, n_upos, h, d, chars)
    direction, dist = int(h < d), distance_bin(abs(d - h))
    features = []
    for template, names in enumerate(ARC_TEMPLATES):
        plain = py_hash(template, *(src[name] for name in names))
        features += [plain, py_extend(plain, direction, dist)]
    for k in range(min(d, h) + 1, max(d, h)):  # one feature per word in between
        plain = py_hash(BETWEEN_TEMPLATE, upos[h], upos[k], upos[d])
        features += [plain, py_extend(plain, direction, dist)]
    return sum(weights[f % len(weights)] for f in features)


def label_score(
    weights: list[float], words: list[int], upos: list[int], d: int, h: int, rel: int
) -> float:
    direction, dist = int(h < d), distance_bin(abs(d - h))
    features = [
        py_hash(0, rel),
        py_hash(1, upos[h], rel),
        py_hash(2, upos[d], rel),
        py_hash(3, upos[h], upos[d], rel),
        py_hash(4, upos[h], upos[d], direction, rel),
        py_hash(5, direction, dist, rel),
        py_hash(6, words[h], rel),
        py_hash(7, words[d], rel),
    ]
    return sum(weights[f % len(weights)] for f in features)


def between(upos: list[int], d: int, h: int, n_upos: int) -> list[int]:
    counts = [0] * n_upos
    for k in range(min(d, h) + 1, max(d, h)):
        counts[upos[k]] += 1
    return counts
