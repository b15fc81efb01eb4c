"""GE constraints as data: one ``Constraint`` per (child UPOS, parent UPOS or ROOT, direction,
distance) pattern with a target probability, parsed and validated from a YAML spec.

A constraint reads, as in Druck, Mann & McCallum (2009): "of the words whose UPOS is in ``child``,
a proportion ``target`` has a head that satisfies the rest". The rest is:

- ``parent``: a UPOS tag or list of tags, ``ROOT`` (the word is the root of the tree), or omitted
  (any word, ROOT excluded);
- ``direction``: ``left`` (the head precedes the child), ``right`` (the head follows the child) or
  ``any`` (default); not allowed with ``ROOT``;
- ``distance``: ``|head - child|``, an integer or an inclusive bucket ``[low, high]`` with ``high``
  null for unbounded; not allowed with ``ROOT``.

Instead of ``parent``, ``rules`` lists ``[child, parent]`` UPOS pairs (parent may be ``ROOT``): the
arc fires when its (child, head) pair is one of them, as in Naseem et al. (2010)'s "proportion of
arcs matching one of the universal rules". ``child`` then defaults to every UPOS tag (the
proportion is over all words); each rule's child must be in ``child``; no direction or distance.

``after`` restricts the child by its left neighbour: a UPOS tag or list of tags that the word
immediately before the child must have (the first word of a sentence, which follows ROOT, never
qualifies). The constraint then reads "of the words whose UPOS is in ``child`` and whose preceding
word's UPOS is in ``after``, a proportion ``target`` ...": both the firing arcs and the normaliser
(the number of such words) are restricted. It combines with every other field, ``rules`` and
``ROOT`` included. Example, from the UD guidelines on coordination (u/dep/cc: the conjunction
attaches to the immediately following conjunct; u/dep/conj: the first conjunct heads the others),
a content word right after a coordinating conjunction has its head on its left:
``{child: [NOUN, VERB], after: CCONJ, direction: left, target: 0.75}``.

Second order: ``grandparent`` (a UPOS tag or list, or ``ROOT``) asks more of the head: it must
itself be attached to a word of those tags, or be the root word (``ROOT``). The constraint then
reads "of the words whose UPOS is in ``child``, a proportion ``target`` has a head that satisfies
``parent``, ``direction`` and ``distance`` and whose own head satisfies ``grandparent``": an
expectation of arc pairs, computed exactly from the tree CRF's pairwise marginals
(``TreeCRF.arc_pair_marginals``). Not with parent ``ROOT`` (ROOT has no head) nor ``rules``.

``position`` restricts the child by where it stands: ``last`` (the sentence's last word) or
``first``; ``any`` by default. Example, from u/dep/punct ("a sentence-final punctuation mark is
attached to the root of the sentence"): ``{child: PUNCT, position: last, grandparent: ROOT,
target: 0.9}``.

``direction: consistent`` states word-order harmony (Greenberg 1963; Dryer 1992) without naming
the direction: "the words of each child tag attach to a head satisfying ``parent`` (and
``distance``, ``after``) on one side, whichever side the data choose". For each child tag ``t``
separately, with ``p_L(t)`` and ``p_R(t)`` the expected proportions of ``t``-words whose head
satisfies the rest and lies to the left, resp. right, ``q(t) = p_L / (p_L + p_R)`` (the normaliser
cancels: ``E[left arcs] / E[left + right arcs]``); the GE objective adds the penalty ``H(q)``
(binary entropy, KL criterion) or ``q (1 - q)`` (squared criterion), 0 when all such arcs go one
way. ``pooled: true`` makes one ``q`` over all child tags together (one direction for the whole
class) instead of one per tag. ``weight`` (a positive number, default 1) multiplies the
constraint's penalties (ordinary constraints have no weight). No ``target`` (a target would name
a proportion the constraint leaves to the data, so one is rejected), no ``bound``, no ``rules``,
no parent ``ROOT`` (a root attachment has no side). Example: ``{child: [ADP, AUX, SCONJ],
parent: [NOUN, VERB], direction: consistent}``.

``bound`` makes the target one-sided: ``lower`` ("at least target"), ``upper`` ("at most target")
or ``equal`` (default, Druck et al.'s two-sided GE).

The YAML file is either a list of constraints or a mapping with a ``constraints`` list (and
optionally ``name`` and ``description``)::

    name: example
    constraints:
      - {child: DET, parent: [NOUN, PROPN], target: 0.75}
      - {child: CCONJ, direction: right, target: 0.9}
      - {child: [NOUN, VERB], after: CCONJ, direction: left, target: 0.75}
      - {child: PUNCT, parent: ROOT, target: 0.0}
      - {rules: [[DET, NOUN], [NOUN, VERB], [VERB, ROOT]], target: 0.8, bound: lower}
      - {child: [ADP, AUX], parent: [NOUN, VERB], direction: consistent}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

UPOS_TAGS: tuple[str, ...] = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
    "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X",
)  # fmt: skip
ROOT = "ROOT"
DIRECTIONS = ("left", "right", "any", "consistent")
POSITIONS = ("any", "first", "last")
BOUNDS = ("equal", "lower", "upper")
_KEYS = {
    "child", "parent", "direction", "distance", "target", "name", "note", "bound", "rules", "after",
    "grandparent", "position",
}  # fmt: skip
_CONSISTENT_KEYS = {"pooled", "weight"}  # only with direction: consistent


class ConstraintSpecError(ValueError):
    """A constraint spec that cannot be used; the message names the file and the constraint."""


@dataclass(frozen=True)
class Constraint:
    """One GE constraint (see the module docstring for the meaning of each field).

    child:     UPOS tags of the constrained words.
    parent:    UPOS tags of the head, ``("ROOT",)`` for the root, ``None`` for any word.
    direction: ``"left"`` (head precedes child), ``"right"`` (head follows), ``"any"`` or
               ``"consistent"`` (one side per child tag, chosen by the data; no target).
    distance:  inclusive ``(low, high)`` bucket of ``|head - child|``, ``high`` None = unbounded;
               ``None`` = any distance.
    target:    the expected proportion, in ``[0, 1]``; ``None`` for a ``consistent`` constraint.
    bound:     ``"equal"`` (match the target), ``"lower"`` (at least it) or ``"upper"`` (at most).
    rules:     ``(child, parent)`` UPOS pairs (parent may be ``"ROOT"``) the arc must match,
               instead of ``parent``; ``None`` for an ordinary constraint.
    after:     UPOS tags one of which the word immediately before the child must have (the
               child's context: it restricts the constrained words); ``None`` = no restriction.
    pooled:    for ``consistent``: one side for all child tags together instead of one per tag.
    weight:    the factor on its penalty: a ``consistent`` constraint's from its spec; an
               estimated constraint's confidence (``parser.constraints.estimated``); else 1.0.
    grandparent: UPOS tags (or ``("ROOT",)``) the head's own head must have: a second-order
               constraint over arc pairs; ``None`` = first order.
    position:  ``"first"`` or ``"last"``: only the sentence's first or last word is a child;
               ``"any"`` = no restriction.
    """

    child: tuple[str, ...]
    parent: tuple[str, ...] | None
    target: float | None
    direction: str = "any"
    distance: tuple[int, int | None] | None = None
    name: str = ""
    bound: str = "equal"
    rules: tuple[tuple[str, str], ...] | None = None
    after: tuple[str, ...] | None = None
    pooled: bool = False
    weight: float = 1.0
    grandparent: tuple[str, ...] | None = None
    position: str = "any"

    @property
    def consistent(self) -> bool:
        return self.direction == "consistent"

    @property
    def second_order(self) -> bool:
        return self.grandparent is not None

    @property
    def to_root(self) -> bool:
        return self.parent == (ROOT,)

    def describe(self) -> str:
        """A short readable name such as ``DET->NOUN|PROPN``, ``CCONJ->*:right``,
        ``rules(13):>=``, ``PUNCT->*->ROOT:last`` (second order, last word), ``ADP|AUX->NOUN|VERB:consistent`` (``:consistent:pooled`` when pooled)
        or, with a context, ``CCONJ_NOUN|VERB->*:left`` (``after`` tags, ``_``, child tags)."""
        bound = {"equal": "", "lower": ":>=", "upper": ":<="}[self.bound]
        context = "" if self.after is None else f"{'|'.join(self.after)}_"
        if self.rules is not None:
            return f"{context}rules({len(self.rules)}){bound}"
        parent = "*" if self.parent is None else "|".join(self.parent)
        text = f"{context}{'|'.join(self.child)}->{parent}"
        if self.grandparent is not None:
            text += f"->{'|'.join(self.grandparent)}"
        if self.direction != "any":
            text += f":{self.direction}"
        if self.distance is not None:
            low, high = self.distance
            text += f":d{low}-{'' if high is None else high}"
        if self.position != "any":
            text += f":{self.position}"
        if self.pooled:
            text += ":pooled"
        return text + bound


def _tags(value: object, *, where: str, field: str, allow_root: bool) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise ConstraintSpecError(f"{where}: {field} must be a UPOS tag or a non-empty list, got {value!r}")
    tags = []
    for tag in items:
        if allow_root and tag == ROOT:
            tags.append(tag)
        elif tag not in UPOS_TAGS:
            known = ", ".join(UPOS_TAGS) + (", ROOT" if allow_root else "")
            raise ConstraintSpecError(f"{where}: unknown UPOS {tag!r} in {field} (known: {known})")
        else:
            tags.append(tag)
    if ROOT in tags and len(tags) > 1:
        raise ConstraintSpecError(f"{where}: parent ROOT cannot be mixed with UPOS tags: {value!r}")
    if len(set(tags)) != len(tags):
        raise ConstraintSpecError(f"{where}: repeated tag in {field}: {value!r}")
    return tuple(tags)


def _distance(value: object, *, where: str) -> tuple[int, int | None] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        low, high = value, value
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        low, high = value
    else:
        raise ConstraintSpecError(f"{where}: distance must be an integer or [low, high], got {value!r}")
    ints = isinstance(low, int) and (high is None or isinstance(high, int))
    if not ints or low < 1 or (high is not None and high < low):
        raise ConstraintSpecError(
            f"{where}: distance bucket must satisfy 1 <= low <= high (high may be null), got {value!r}"
        )
    return (low, high)


def parse_constraint(entry: object, *, where: str) -> Constraint:
    """One YAML mapping -> a validated ``Constraint``; ``where`` names it in error messages."""
    if not isinstance(entry, Mapping):
        raise ConstraintSpecError(f"{where}: a constraint must be a mapping, got {entry!r}")
    known = _KEYS | (_CONSISTENT_KEYS if entry.get("direction") == "consistent" else set())
    unknown = sorted(set(entry) - known)
    if unknown:
        only = sorted(_CONSISTENT_KEYS & set(unknown))
        extra = f"; {', '.join(only)}: only with direction: consistent" if only else ""
        raise ConstraintSpecError(f"{where}: unknown keys {unknown} (known: {sorted(known)}{extra})")
    rules = entry.get("rules")
    if entry.get("direction") == "consistent":
        return _consistent(entry, where=where)
    if "target" not in entry or ("child" not in entry and rules is None):
        raise ConstraintSpecError(f"{where}: 'child' (or 'rules') and 'target' are required")
    child = _tags(entry.get("child", UPOS_TAGS), where=where, field="child", allow_root=False)
    parent = entry.get("parent")
    parent = None if parent is None else _tags(parent, where=where, field="parent", allow_root=True)
    bound = entry.get("bound", "equal")
    if bound not in BOUNDS:
        raise ConstraintSpecError(f"{where}: bound must be one of {BOUNDS}, got {bound!r}")
    if rules is not None:
        rules = _rules(rules, child, where=where)
        if parent is not None or "direction" in entry or "distance" in entry:
            raise ConstraintSpecError(f"{where}: 'rules' replaces parent, direction and distance")
    direction = entry.get("direction", "any")
    if direction not in DIRECTIONS:
        raise ConstraintSpecError(f"{where}: direction must be one of {DIRECTIONS}, got {direction!r}")
    distance = _distance(entry.get("distance"), where=where)
    if parent == (ROOT,) and (direction != "any" or distance is not None):
        raise ConstraintSpecError(f"{where}: direction and distance do not apply to parent ROOT")
    after = entry.get("after")
    if "after" in entry:
        after = _tags(after, where=where, field="after", allow_root=False)
    target = entry["target"]
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 <= target <= 1.0:
        raise ConstraintSpecError(f"{where}: target must be a number in [0, 1], got {target!r}")
    grandparent = entry.get("grandparent")
    if grandparent is not None:
        grandparent = _tags(grandparent, where=where, field="grandparent", allow_root=True)
        if parent == (ROOT,) or rules is not None:
            raise ConstraintSpecError(f"{where}: grandparent needs a word head (not parent ROOT, not rules)")
    position = _position(entry, where=where)
    constraint = Constraint(child, parent, float(target), direction, distance, "", bound, rules, after,
                            grandparent=grandparent, position=position)
    return replace(constraint, name=str(entry.get("name") or constraint.describe()))


def _position(entry: Mapping, *, where: str) -> str:
    position = entry.get("position", "any")
    if position not in POSITIONS:
        raise ConstraintSpecError(f"{where}: position must be one of {POSITIONS}, got {position!r}")
    return position


def _consistent(entry: Mapping, *, where: str) -> Constraint:
    """A ``direction: consistent`` constraint: no target, bound, rules or parent ROOT."""
    for key, why in (
        ("target", "the data choose the direction, so no target proportion is given"),
        ("bound", "there is no target to bound"),
        ("rules", "'rules' has no direction"),
    ):
        if key in entry:
            raise ConstraintSpecError(f"{where}: direction consistent takes no '{key}' ({why})")
    if "child" not in entry:
        raise ConstraintSpecError(f"{where}: direction consistent needs 'child'")
    child = _tags(entry["child"], where=where, field="child", allow_root=False)
    parent = entry.get("parent")
    parent = None if parent is None else _tags(parent, where=where, field="parent", allow_root=True)
    if parent == (ROOT,):
        raise ConstraintSpecError(f"{where}: direction consistent with parent ROOT (a root attachment has no side)")
    distance = _distance(entry.get("distance"), where=where)
    after = entry.get("after")
    if "after" in entry:
        after = _tags(after, where=where, field="after", allow_root=False)
    pooled = entry.get("pooled", False)
    if not isinstance(pooled, bool):
        raise ConstraintSpecError(f"{where}: pooled must be true or false, got {pooled!r}")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < float("inf"):
        raise ConstraintSpecError(f"{where}: weight must be a positive number, got {weight!r}")
    if "grandparent" in entry:
        raise ConstraintSpecError(f"{where}: direction consistent is first order (no grandparent)")
    constraint = Constraint(child, parent, None, "consistent", distance, "", "equal", None, after, pooled,
                            float(weight), position=_position(entry, where=where))
    return replace(constraint, name=str(entry.get("name") or constraint.describe()))


def _rules(value: object, child: tuple[str, ...], *, where: str) -> tuple[tuple[str, str], ...]:
    """``rules: [[child, parent], ...]`` -> validated pairs (each child in ``child``, no repeats)."""
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise ConstraintSpecError(f"{where}: rules must be a non-empty list of [child, parent] pairs")
    pairs = []
    for i, rule in enumerate(value):
        if not isinstance(rule, Sequence) or isinstance(rule, str) or len(rule) != 2:
            raise ConstraintSpecError(f"{where}: rule {i} must be a [child, parent] pair, got {rule!r}")
        (dep,) = _tags(rule[0], where=f"{where} rule {i}", field="child", allow_root=False)
        (head,) = _tags(rule[1], where=f"{where} rule {i}", field="parent", allow_root=True)
        if dep not in child:
            raise ConstraintSpecError(f"{where}: rule {i} {rule!r}: child {dep} is not in child {child}")
        pairs.append((dep, head))
    if len(set(pairs)) != len(pairs):
        raise ConstraintSpecError(f"{where}: repeated rule in {value!r}")
    return tuple(pairs)


def parse_spec(data: object, *, source: str) -> tuple[Constraint, ...]:
    """A loaded YAML document (list, or mapping with ``constraints``) -> validated constraints."""
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - {"name", "description", "constraints"})
        if unknown:
            raise ConstraintSpecError(f"{source}: unknown top-level keys {unknown}")
        data = data.get("constraints")
    if not isinstance(data, Sequence) or isinstance(data, str) or not data:
        raise ConstraintSpecError(f"{source}: expected a non-empty list of constraints")
    constraints = tuple(
        parse_constraint(entry, where=f"{source}: constraint {i}") for i, entry in enumerate(data)
    )
    names = [c.name for c in constraints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConstraintSpecError(f"{source}: duplicate constraint names {duplicates}")
    return constraints


def read_spec(path: str | Path) -> tuple[Constraint, ...]:
    """Read and validate a YAML constraint file."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:  # Python's message names neither the file nor the line
        start = error.start
        line_start = raw.rfind(b"\n", 0, start) + 1
        line, column = raw.count(b"\n", 0, start) + 1, len(raw[line_start:start].decode()) + 1
        raise ConstraintSpecError(f"{path}:{line}: not valid UTF-8 (byte {raw[start]:#04x} at "
                                  f"column {column})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConstraintSpecError(f"{path}: not valid YAML: {error}") from error
    return parse_spec(data, source=str(path))
