"""Where a picture puts things: the words' columns (left to right, or right to left for a
right-to-left script), the height of each arc (by span, so that no two arcs' tops overlap), the
points where arcs meet a word, which arcs are non-projective, and text widths estimated from the
characters (no font is measured: the same text gives the same picture on any machine).

Positions are display positions: 0 is the leftmost column. Arcs are ``(head, dep)`` pairs of
1-based word ids; ROOT (head 0) has no span and is drawn apart (:mod:`parser.view.svg`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

__all__ = ["anchors", "arc_levels", "column_centers", "is_rtl", "nonprojective", "text_width"]

CHAR_EM = 0.62  # an ordinary character's advance, in ems (a generous sans-serif average)
WIDE_EM = 1.0  # East Asian wide and full-width characters
ANCHOR_STEP = 7.0  # pixels between two arc ends on one word


def text_width(text: str, size: float) -> float:
    """An upper estimate of ``text``'s width in pixels at font ``size`` (combining marks, such
    as Arabic vowel signs, take no room).

    >>> text_width("abc", 10) == 3 * CHAR_EM * 10
    True
    """
    ems = 0.0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        ems += WIDE_EM if unicodedata.east_asian_width(char) in ("W", "F") else CHAR_EM
    return ems * size


def is_rtl(forms: Sequence[str]) -> bool:
    """True when most words whose first strong character has a direction are right-to-left
    (Arabic, Hebrew, ...): such a sentence is laid out from right to left.

    >>> is_rtl(["كتب", "الولد", "3"]), is_rtl(["The", "كتاب"])
    (True, False)
    """
    rtl = ltr = 0
    for form in forms:
        for char in form:
            kind = unicodedata.bidirectional(char)
            if kind in ("R", "AL"):
                rtl += 1
                break
            if kind == "L":
                ltr += 1
                break
    return rtl > ltr


def nonprojective(heads: Sequence[int | None]) -> set[int]:
    """The dependents (1-based) whose arc is non-projective: some word between the head and the
    dependent is not a descendant of the head. ``heads[i]``: head of word ``i + 1`` (0: ROOT,
    None: unattached, which dominates nothing).

    >>> sorted(nonprojective([2, 0, 4, 2]))   # 1<-2, 3<-4, 4<-2: projective
    []
    >>> sorted(nonprojective([3, 0, 2, 2]))   # 1<-3 passes over 2, 3's head
    [1]
    """
    n = len(heads)

    def dominated(word: int, head: int) -> bool:
        seen = set()
        while word not in seen and word != 0:
            if word == head:
                return True
            seen.add(word)
            parent = heads[word - 1]
            if parent is None:
                return False
            word = parent
        return head == 0

    result = set()
    for dep, head in enumerate(heads, start=1):
        if head is None or head == 0:
            continue
        low, high = min(dep, head), max(dep, head)
        if any(not dominated(between, head) for between in range(low + 1, high) if between <= n):
            result.add(dep)
    return result


def arc_levels(spans: Sequence[tuple[int, int]]) -> list[int]:
    """A level (1 = lowest) for each span ``(left, right)`` of display positions: above every
    span it contains, and never the level of a span whose interior overlaps its own, so that
    arc tops neither cross nor lie on each other. Shorter spans are placed first; ties by
    position, then by order given.

    >>> arc_levels([(0, 1), (1, 2), (0, 2), (1, 3)])
    [1, 1, 2, 3]
    """
    order = sorted(range(len(spans)), key=lambda i: (spans[i][1] - spans[i][0], spans[i][0], i))
    levels = [0] * len(spans)
    placed: list[int] = []
    for i in order:
        left, right = spans[i]
        floor = 1 + max((levels[j] for j in placed
                         if left <= spans[j][0] and spans[j][1] <= right), default=0)
        taken = {levels[j] for j in placed
                 if max(left, spans[j][0]) < min(right, spans[j][1])}
        level = floor
        while level in taken:
            level += 1
        levels[i] = level
        placed.append(i)
    return levels


def column_centers(widths: Sequence[float], needs: Sequence[tuple[int, int, float]], *,
                   margin: float) -> list[float]:
    """The x of each column's center, columns ``widths`` wide side by side from ``margin``,
    widened so that for each ``(left, right, room)`` the centers of ``left`` and ``right`` are at
    least ``room`` apart (an arc's label fits on its top). Narrow needs first; a deficit is
    shared by the gaps of its span."""
    gaps = [0.0] * max(len(widths) - 1, 0)
    for left, right, room in sorted(needs, key=lambda need: (need[1] - need[0], need[0], need[1])):
        if right <= left:
            continue
        have = sum(widths[left:right + 1]) - (widths[left] + widths[right]) / 2
        have += sum(gaps[left:right])
        if have < room:
            share = (room - have) / (right - left)
            for gap in range(left, right):
                gaps[gap] += share
    centers, x = [], margin
    for i, width in enumerate(widths):
        centers.append(x + width / 2)
        x += width + (gaps[i] if i < len(gaps) else 0.0)
    return centers


def anchors(ends: Sequence[tuple[int, int, int]], center: float, width: float) -> dict[int, float]:
    """The x where each arc end meets one word, the word's ends being ``(arc, direction,
    length)``: direction -1 when the arc's other end is to the left, +1 to the right, 0 for
    ROOT's vertical line. Left-going arcs sit on the left, shortest outermost; right-going ones
    on the right, shortest outermost; ROOT's between them: so arcs of one word never cross at
    their feet."""
    order = sorted(ends, key=lambda end: (end[1], end[2] if end[1] < 0 else -end[2], end[0]))
    if len(order) < 2:
        return {end[0]: center for end in order}
    step = min(ANCHOR_STEP, 0.7 * width / (len(order) - 1))
    start = center - step * (len(order) - 1) / 2
    return {end[0]: start + k * step for k, end in enumerate(order)}
