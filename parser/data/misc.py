"""The MISC column: one reader and one writer of its ``Key=value`` entries, and the keys this
package writes there.

Every writer of MISC goes through :func:`merged_misc`: the confidence of ``parser-predict
confidence=true`` (``HeadProb``, ``DeprelProb``), ``parser-select``'s guesses (``PredHead``,
``PredDeprel``), the tokenizer (``SpaceAfter=No``) and a token-level layer whose column is MISC
(:func:`parser.inference.columns.written_misc`). The rules, the same for all:

- entries are ``|``-separated; ``_`` is the empty column, and an empty result is written ``_``;
- an entry of the column whose key is not replaced stays, in its place (an item without ``=``,
  which some treebanks have, is its own key);
- a replaced key is dropped from its place and the new entries follow, in the order given (the
  writers give them in a fixed order: no set or hash order reaches a file); a value of None
  removes the key.

A picture (:mod:`parser.view`) reads the same keys back with :func:`misc_entries`.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ALT_HEAD", "ALT_HEAD_PROB", "DEPREL_PROB", "HEAD_PROB", "SPACE_AFTER", "merged_misc",
           "misc_entries"]

HEAD_PROB = "HeadProb"  # p(head of the word = the head written), parser-predict confidence=true
DEPREL_PROB = "DeprelProb"  # p(relation written | arc written)
ALT_HEAD = "AltHead"  # the runner-up head (most probable head other than the one written)
ALT_HEAD_PROB = "AltHeadProb"  # its marginal probability
SPACE_AFTER = "SpaceAfter"  # "No": no space after the token (the tokenizer's)


def misc_entries(value: str | None) -> dict[str, str]:
    """The ``Key=value`` entries of a MISC value, in column order (an item without ``=`` maps
    to ``""``; the last of a repeated key wins).

    >>> misc_entries("SpaceAfter=No|HeadProb=0.9700|Typo")
    {'SpaceAfter': 'No', 'HeadProb': '0.9700', 'Typo': ''}
    >>> misc_entries("_"), misc_entries(None)
    ({}, {})
    """
    entries: dict[str, str] = {}
    for item in _items(value):
        key, _, text = item.partition("=")
        entries[key] = text
    return entries


def merged_misc(value: str | None, entries: Mapping[str, str | None]) -> str:
    """MISC ``value`` with ``entries`` added as ``Key=value`` (module docstring: same-key items
    replaced, the others kept in place, None removes a key, ``_`` when nothing is left).

    >>> merged_misc("SpaceAfter=No|HeadProb=0.1", {"HeadProb": "0.9700"})
    'SpaceAfter=No|HeadProb=0.9700'
    >>> merged_misc("_", {"HeadProb": "1.0000", "DeprelProb": "0.5000"})
    'HeadProb=1.0000|DeprelProb=0.5000'
    >>> merged_misc("SpaceAfter=No", {"SpaceAfter": None})
    '_'
    """
    for key in entries:
        if not key or any(c in key for c in "|=\t\n") or key == "_":
            raise ValueError(f"MISC key {key!r}: expected a name without '|', '=', tabs or newlines")
    for key, text in entries.items():
        if text is not None and any(c in text for c in "|\t\n"):
            raise ValueError(f"MISC {key}={text!r}: a value may not hold '|', tabs or newlines")
    kept = [item for item in _items(value) if item.partition("=")[0] not in entries]
    added = [f"{key}={text}" for key, text in entries.items() if text is not None]
    return "|".join(kept + added) or "_"


def _items(value: str | None) -> list[str]:
    if value is None or value == "_":
        return []
    return [item for item in value.split("|") if item]
