"""How a picture marks what it knows about an arc: the colour scale of a head's marginal, the
styles of non-projective, runner-up, wrong and gold arcs, and XML escaping. The SVG carries
these as attributes (it looks the same without the page's CSS) and as classes (a page may
restyle them).
"""

from __future__ import annotations

import re

__all__ = ["CONFIDENCE_BINS", "confidence_bin", "escape", "probability"]

INK = "#333333"  # an arc without confidence
WRONG = "#d62728"  # a wrong head or label, against gold
GOLD = "#2ca02c"  # the gold arc of a word whose head is wrong
ALT = "#7f7f7f"  # the runner-up head's dotted arc
NONPROJECTIVE_DASH = "7 4"
ALT_DASH = "1.5 3"
GOLD_DASH = "4 2"

# (lowest marginal of the bin, colour): orange (doubtful) to deep purple (sure), a scale that
# stays readable to the colour-blind (ColorBrewer PuOr); the bin is also a class, conf-<k>.
CONFIDENCE_BINS: tuple[tuple[float, str], ...] = (
    (0.0, "#e66101"),
    (0.5, "#fdb863"),
    (0.7, "#b2abd2"),
    (0.9, "#8073ac"),
    (0.97, "#2d004b"),
)

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def confidence_bin(marginal: float) -> int:
    """The index of ``marginal``'s bin in :data:`CONFIDENCE_BINS`.

    >>> confidence_bin(0.1), confidence_bin(0.93), confidence_bin(1.0)
    (0, 3, 4)
    """
    index = 0
    for k, (low, _) in enumerate(CONFIDENCE_BINS):
        if marginal >= low:
            index = k
    return index


def probability(value: float) -> str:
    """A marginal as attributes and tooltips write it (4 decimals, as MISC has it).

    >>> probability(0.5), probability(1)
    ('0.5000', '1.0000')
    """
    return f"{value:.4f}"


def escape(text: object) -> str:
    """``text`` safe in XML character data and in double-quoted attributes: ``& < > " '``
    escaped, characters XML 1.0 forbids (control characters) replaced by U+FFFD.

    >>> escape('<script>&"x"')
    '&lt;script&gt;&amp;&quot;x&quot;'
    """
    text = _INVALID_XML.sub("\ufffd", str(text))
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))
