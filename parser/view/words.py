"""The lower half of a picture: each word's column (FORM, LEMMA, UPOS and FEATS, wrapped), the
brackets of multiword tokens under their words, and the legend of the marks a picture uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from parser.view.layout import text_width
from parser.view.marks import (
    ALT,
    ALT_DASH,
    CONFIDENCE_BINS,
    GOLD,
    INK,
    NONPROJECTIVE_DASH,
    WRONG,
    escape,
)
from parser.view.sentence import Multiword, Word

__all__ = ["FORM_SIZE", "feats_lines", "legend", "multiword_svg", "word_rows", "word_svg",
           "word_width"]

FORM_SIZE, LEMMA_SIZE, UPOS_SIZE, FEATS_SIZE = 15.0, 11.0, 11.0, 9.5
ROW = {"form": 0.0, "lemma": 16.0, "upos": 30.0, "feats": 44.0}  # baselines below the form's
FEATS_LINE = 11.5
FEATS_CHARS = 22  # a FEATS line's length before it wraps
FEATS_LINES = 3  # lines shown; the rest is "…" (the whole value is in the word's tooltip)
PAD = 12.0  # room beside a column's widest text
LEGEND_SIZE = 10.5


def feats_lines(feats: str | None) -> list[str]:
    """FEATS wrapped at ``|`` into lines of about :data:`FEATS_CHARS` characters, at most
    :data:`FEATS_LINES` (the last ending in ``…`` when some are left out).

    >>> feats_lines("Case=Nom|Gender=Fem|Number=Sing|Person=3")
    ['Case=Nom|Gender=Fem', 'Number=Sing|Person=3']
    """
    if not feats:
        return []
    lines: list[str] = []
    for item in feats.split("|"):
        if lines and len(lines[-1]) + 1 + len(item) <= FEATS_CHARS:
            lines[-1] += "|" + item
        else:
            lines.append(item)
    if len(lines) > FEATS_LINES:
        lines = lines[:FEATS_LINES]
        lines[-1] += "|…"
    return lines


def word_rows(word: Word) -> list[tuple[str, str, float]]:
    """``(class, text, font size)`` of each line of ``word``'s column, top to bottom."""
    rows = [("form", word.form, FORM_SIZE)]
    if word.lemma is not None:
        rows.append(("lemma", word.lemma, LEMMA_SIZE))
    if word.upos is not None:
        rows.append(("upos", word.upos, UPOS_SIZE))
    rows += [("feats", line, FEATS_SIZE) for line in feats_lines(word.feats)]
    return rows


def word_width(word: Word) -> float:
    return max(text_width(text, size) for _, text, size in word_rows(word)) + 2 * PAD


def word_svg(word: Word, *, x: float, baseline: float, rtl: bool = False) -> str:
    """One word's column: ``<g class="word" data-id=...>`` with its lines, centred on ``x``,
    the form's baseline at ``baseline``, and a tooltip with every column it shows in full;
    ``rtl``: FORM and LEMMA are right-to-left text (UPOS and FEATS stay left to right)."""
    tip = [f"{word.id} {word.form}"]
    tip += [f"{name} {value}" for name, value in
            (("LEMMA", word.lemma), ("UPOS", word.upos), ("FEATS", word.feats)) if value]
    parts = [f'<g class="word" data-id="{word.id}" data-form="{escape(word.form)}"'
             + (f' data-upos="{escape(word.upos)}"' if word.upos else "") + ">",
             f"<title>{escape(chr(10).join(tip))}</title>"]
    feats_row = 0
    for kind, text, size in word_rows(word):
        if kind == "feats":
            y = baseline + ROW["feats"] + feats_row * FEATS_LINE
            feats_row += 1
        else:
            y = baseline + ROW[kind]
        style = {"form": ' font-weight="600" fill="#111111"',
                 "lemma": ' font-style="italic" fill="#555555"',
                 "upos": ' fill="#1f5fa8" font-weight="600"',
                 "feats": ' fill="#777777"'}[kind]
        if kind in ("form", "lemma"):
            style += ' direction="rtl" unicode-bidi="embed"' if rtl else ""
        else:
            style += ' direction="ltr"' if rtl else ""
        parts.append(f'<text class="{kind}" x="{x:.1f}" y="{y:.1f}" font-size="{size}"'
                     f' text-anchor="middle"{style}>{escape(text)}</text>')
    parts.append("</g>")
    return "".join(parts)


def words_depth(words: Sequence[Word]) -> float:
    """The height of the word columns below the form's baseline."""
    feats = max((len(feats_lines(word.feats)) for word in words), default=0)
    if feats:
        return ROW["feats"] + (feats - 1) * FEATS_LINE + 6
    if any(word.upos for word in words):
        return ROW["upos"] + 6
    return ROW["lemma"] + 6 if any(word.lemma for word in words) else 8


def multiword_svg(token: Multiword, *, left: float, right: float, y: float) -> str:
    """A multiword token: a bracket from ``left`` to ``right`` at ``y`` under its words, the
    surface form beneath it."""
    middle = (left + right) / 2
    return (f'<g class="multiword" data-first="{token.first}" data-last="{token.last}"'
            f' data-form="{escape(token.form)}"><title>{escape(token.form)}: words '
            f"{token.first}-{token.last}</title>"
            f'<path class="bracket" d="M{left:.1f},{y:.1f} v6 H{right:.1f} v-6" fill="none"'
            f' stroke="#888888" stroke-width="1.2"/>'
            f'<text class="multiword-form" x="{middle:.1f}" y="{y + 22:.1f}" font-size="13"'
            f' text-anchor="middle" fill="#444444">{escape(token.form)}</text></g>')


def legend(marks: Sequence[str], *, x: float, y: float) -> tuple[str, float]:
    """The legend of the ``marks`` a picture uses (``confidence``, ``nonprojective``,
    ``runner-up``, ``wrong-head``, ``wrong-label``), one row from ``x``; with its width."""
    parts, cursor = ['<g class="legend">'], x
    for mark in marks:
        if mark == "confidence":
            parts.append(_legend_text("head marginal:", cursor, y))
            cursor += text_width("head marginal:", LEGEND_SIZE) + 4
            for low, colour in CONFIDENCE_BINS:
                parts.append(f'<rect class="swatch" x="{cursor:.1f}" y="{y - 9:.1f}" width="12"'
                             f' height="10" fill="{colour}"/>')
                label = f"≥{low:g}"
                parts.append(_legend_text(label, cursor + 15, y))
                cursor += 15 + text_width(label, LEGEND_SIZE) + 4
            cursor += 10
            continue
        colour, dash, label = {
            "nonprojective": (INK, NONPROJECTIVE_DASH, "non-projective arc"),
            "runner-up": (ALT, ALT_DASH, "runner-up head"),
            "wrong-head": (WRONG, "", "wrong head"),
            "gold": (GOLD, "", "gold head"),
            "wrong-label": (WRONG, "", "wrong label (/gold)"),
        }[mark]
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<path class="key {mark}" d="M{cursor:.1f},{y - 4:.1f} h22" stroke="{colour}"'
                     f' stroke-width="2"{dashes} fill="none"/>')
        parts.append(_legend_text(label, cursor + 26, y, colour if mark == "wrong-label" else None))
        cursor += 26 + text_width(label, LEGEND_SIZE) + 14
    parts.append("</g>")
    return "".join(parts), cursor - x


def _legend_text(text: str, x: float, y: float, colour: str | None = None) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{LEGEND_SIZE}"'
            f' fill="{colour or "#444444"}">{escape(text)}</text>')
