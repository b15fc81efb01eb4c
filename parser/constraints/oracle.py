"""Oracle constraints: targets estimated from labeled sentences, as Druck, Mann & McCallum (2009)
built theirs: the most frequent (parent UPOS or ROOT, child UPOS, direction) patterns, each with
the proportion of child words that attach that way, rounded to {0, .1, .25, .5, .75, 1}.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from parser.constraints.spec import ROOT, UPOS_TAGS, Constraint, ConstraintSpecError

ROUNDING = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)


def round_target(proportion: float) -> float:
    """The nearest of Druck et al.'s values {0, .1, .25, .5, .75, 1} (ties go to the smaller)."""
    return min(ROUNDING, key=lambda value: (abs(value - proportion), value))


def _names(tags: Sequence, upos_names: Sequence[str] | None, *, sentence: int) -> list[str]:
    names = []
    for tag in tags:
        tag = tag if isinstance(tag, str) else int(tag)
        if isinstance(tag, int):
            if upos_names is None or not 0 <= tag < len(upos_names):
                raise ValueError(f"oracle upos: sentence {sentence}: id {tag} has no name in upos_names")
            tag = upos_names[tag]
        names.append(tag)
    return names


def oracle_constraints(
    heads: Sequence[Sequence[int]],
    upos: Sequence[Sequence[str | int]],
    *,
    top_k: int = 20,
    upos_names: Sequence[str] | None = None,
) -> tuple[Constraint, ...]:
    """The ``top_k`` most frequent attachment patterns of labeled sentences as constraints.

    heads: per sentence, ``heads[i]`` is the head of word ``i+1`` (0 = ROOT, -1 = unannotated,
           skipped); no ROOT entry.
    upos:  per sentence, the UPOS of each word, as names or as ids into ``upos_names``.
    Direction is ``left`` when the head precedes the child; root attachments have direction
    ``any``. Patterns are ranked by count, ties broken by name so the result is deterministic.
    """
    if len(heads) != len(upos):
        raise ValueError(f"oracle: {len(heads)} head lists but {len(upos)} UPOS lists")
    if top_k < 1:
        raise ValueError(f"oracle: top_k must be >= 1, got {top_k}")
    patterns: Counter[tuple[str, str, str]] = Counter()
    children: Counter[str] = Counter()
    for s, (sentence_heads, sentence_upos) in enumerate(zip(heads, upos)):
        tags = _names(sentence_upos, upos_names, sentence=s)
        sentence_heads = [int(h) for h in sentence_heads]
        if len(tags) != len(sentence_heads):
            raise ValueError(
                f"oracle: sentence {s} has {len(sentence_heads)} heads but {len(tags)} UPOS tags"
            )
        for dep, head in enumerate(sentence_heads, start=1):
            if head == -1 or tags[dep - 1] not in UPOS_TAGS:
                continue
            if not 0 <= head <= len(tags) or head == dep:
                raise ValueError(f"oracle: sentence {s}, word {dep}: head {head} out of range")
            child = tags[dep - 1]
            children[child] += 1
            if head == 0:
                patterns[(ROOT, child, "any")] += 1
            elif tags[head - 1] in UPOS_TAGS:
                patterns[(tags[head - 1], child, "left" if head < dep else "right")] += 1
    if not patterns:
        raise ConstraintSpecError("oracle: no annotated words with UPOS tags to estimate from")
    ranked = sorted(patterns.items(), key=lambda item: (-item[1], item[0]))[:top_k]
    constraints = []
    for (parent, child, direction), count in ranked:
        target = round_target(count / children[child])
        constraint = Constraint((child,), (parent,), target, direction)
        constraints.append(Constraint((child,), (parent,), target, direction, None, constraint.describe()))
    return tuple(constraints)
