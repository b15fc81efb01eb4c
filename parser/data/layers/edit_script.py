r"""Lemma edit scripts as in UDPipe 2 (Straka 2019): a lemma is predicted as the class of the edit
that turns the form into it, so one class ("remove the final s") serves every word it fits.

A script is ``<casing>;<edit>`` or, when form and lemma share no character, ``!<lemma>``:

- ``<edit>`` is ``-<p>+<prefix>¦-<s>+<suffix>``, computed on the lowercased form and lemma: keep
  the longest common substring (the first one in the lemma, then in the form, as UDPipe 2 does),
  delete ``p`` characters before it and ``s`` after it, then add ``prefix`` before and ``suffix``
  after. ``running -> run`` and ``sitting -> sit`` are both ``-0+¦-4+``.
- ``<casing>`` is UDPipe 2's runs over the lowercased result, ``↑0¦↓1``: uppercase from position
  0, lowercase from 1; a position in the lemma's second half counts from its end (``↓-2``). A
  lemma without capitals is ``↓0`` whatever the form's case (``dogs``, ``Dogs``, ``DOGS -> dog``
  share one script, as do ``the`` and ``The -> the``). A lemma with capitals that the edit applied
  to the form as written gives (added text lowercase) is ``=``, keep the form's case (``NASA``,
  ``Paris``, ``iPhones -> iPhone``): ``IDENTITY`` copies any form. Else runs (``WOMEN -> WOMAN``
  is ``↑0``). Counted on the UD train files, this order gives fewer classes than ``=`` first.
- ``!<lemma>`` (suppletion, ``went -> go``) writes the lemma out, case included.

Added text and absolute lemmas are escaped: ``\`` as ``\\``; ``¦`` and every character that is not
printable (tab, newline, ZWJ, RTL marks, NBSP, lone surrogates) as ``\uXXXX`` or ``\UXXXXXXXX``.
A script is thus one printable line whose separators never occur inside its text, fit for a
vocabulary file, and ``apply_script(form, lemma_script(form, lemma)) == lemma`` for any strings.

Case maps are kept one character to one character: a character whose ``lower()`` is longer
(``İ``) or does not come back under ``upper()`` (``ǅ``, the Kelvin sign) counts as uncased, and
``upper()`` of ``ß`` (``SS``) leaves it as is; lengths and positions stay aligned.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["IDENTITY", "apply_script", "identity_script", "lemma_script"]

KEEP_CASE = "="
ABSOLUTE = "!"
IDENTITY = "=;-0+¦-0+"
_UP, _DOWN, _SEP = "↑", "↓", "¦"
_LOWERCASE = "↓0"
_EDIT = re.compile(r"-([0-9]+)\+([^¦]*)¦-([0-9]+)\+([^¦]*)")
_RUN = re.compile(r"([↑↓])(-?[0-9]+)")
_ESCAPE = re.compile(r"\\(?:(\\)|u([0-9a-f]{4})|U(000[0-9a-f]{5}|0010[0-9a-f]{4}))")
_CACHE = 1 << 18  # distinct (form, lemma) pairs of a large treebank, a few hundred bytes each


def identity_script() -> str:
    """The script that copies the form, case included (``IDENTITY``), a caller's fallback.

    >>> apply_script("NASA", identity_script())
    'NASA'
    """
    return IDENTITY


def lemma_script(form: str, lemma: str) -> str:
    """The script that turns ``form`` into ``lemma`` (format in the module docstring).

    >>> lemma_script("dogs", "dog"), lemma_script("Dogs", "dog"), lemma_script("The", "the")
    ('↓0;-0+¦-1+', '↓0;-0+¦-1+', '↓0;-0+¦-0+')
    >>> lemma_script("ging", "gehen"), lemma_script("went", "go"), lemma_script("NASA", "NASA")
    ('↓0;-0+¦-3+ehen', '!go', '=;-0+¦-0+')
    >>> lemma_script("iPhones", "iPhone"), lemma_script("USERS", "User")
    ('=;-0+¦-1+', '↑0¦↓1;-0+¦-1+')
    """
    if not isinstance(form, str) or not isinstance(lemma, str):
        raise TypeError(f"lemma_script takes two strings, got form={form!r}, lemma={lemma!r}")
    return _lemma_script(form, lemma)


def apply_script(form: str, script: str) -> str | None:
    """The lemma ``script`` makes of ``form``; None when it cannot apply to this form.

    It cannot when it deletes the whole form or more (nothing of the form would be kept), or when
    a casing run starts outside the edited word. A string that is not a script: ValueError.

    >>> apply_script("Cats", "↓0;-0+¦-1+"), apply_script("Paris", "=;-0+¦-0+")
    ('cat', 'Paris')
    >>> apply_script("is", "!be"), apply_script("s", "↓0;-0+¦-1+") is None
    ('be', True)
    >>> apply_script("ab", "↑0¦↓-3;-0+¦-0+") is None
    True
    """
    if script.startswith(ABSOLUTE):
        return _unescape(script[1:], script)
    runs, prefix_deleted, prefix, suffix_deleted, suffix = _parse(script)
    end = len(form) - suffix_deleted
    if prefix_deleted >= end:
        return None
    if runs is None:
        return prefix + form[prefix_deleted:end] + suffix
    return _apply_casing(prefix + _lower(form[prefix_deleted:end]) + suffix, runs)


@lru_cache(maxsize=_CACHE)
def _lemma_script(form: str, lemma: str) -> str:
    low_form, low_lemma = _lower(form), _lower(lemma)
    form_start, lemma_start, length = _longest_common_substring(low_form, low_lemma)
    if not length:
        return ABSOLUTE + _escape(lemma)
    prefix, suffix = low_lemma[:lemma_start], low_lemma[lemma_start + length:]
    prefix_deleted, suffix_deleted = form_start, len(form) - form_start - length
    edit = f"-{prefix_deleted}+{_escape(prefix)}{_SEP}-{suffix_deleted}+{_escape(suffix)}"
    runs = _casing_runs(lemma, low_lemma)
    if runs != _LOWERCASE and prefix + form[form_start:form_start + length] + suffix == lemma:
        return KEEP_CASE + ";" + edit
    return runs + ";" + edit


def _longest_common_substring(a: str, b: str) -> tuple[int, int, int]:
    """``(start in a, start in b, length)`` of the longest common substring; among equals the
    first in ``b``, then in ``a`` (UDPipe 2's order). Length 0 when none.

    >>> _longest_common_substring("running", "run"), _longest_common_substring("ging", "gehen")
    ((0, 0, 3), (0, 0, 1))
    """
    if not a or not b:
        return 0, 0, 0
    if b in a:
        return a.index(b), 0, len(b)
    if a in b:
        return 0, b.index(a), len(a)
    best = (0, 0, 0)
    below = [0] * (len(a) + 1)  # below[i]: common prefix length of a[i:] and b[j + 1:]
    for j in range(len(b) - 1, -1, -1):
        row, char = [0] * (len(a) + 1), b[j]
        for i in range(len(a) - 1, -1, -1):
            if a[i] == char:
                row[i] = length = below[i + 1] + 1
                if length >= best[2]:
                    best = (i, j, length)
        below = row
    return best


def _casing_runs(lemma: str, low_lemma: str) -> str:
    """The lemma's case as runs ``↑0¦↓1`` over ``low_lemma``; uncased characters (digits,
    punctuation) join the run they are in, so ``NASA-2`` is ``↑0``."""
    if lemma == low_lemma:
        return _LOWERCASE
    runs: list[tuple[str, int]] = []
    for position, (char, low) in enumerate(zip(lemma, low_lemma)):
        if char != low:
            case = _UP
        elif _upper_char(low) != low:
            case = _DOWN
        else:
            continue
        if not runs or runs[-1][0] != case:
            runs.append((case, position if runs else 0))
    half = len(lemma) // 2
    return _SEP.join(f"{case}{start if start <= half else start - len(lemma)}"
                     for case, start in runs or [(_DOWN, 0)])


def _apply_casing(lowered: str, runs: tuple[tuple[bool, int], ...]) -> str | None:
    """``lowered`` with each run's case from its start to the end (a later run overrides an
    earlier one); None when a run starts outside it."""
    if runs == ((False, 0),):
        return lowered
    upper = [False] * len(lowered)
    for is_upper, start in runs:
        if not -len(lowered) <= start < len(lowered):
            return None
        start %= len(lowered)
        upper[start:] = [is_upper] * (len(lowered) - start)
    return "".join(_upper_char(c) if up else c for c, up in zip(lowered, upper))


@lru_cache(maxsize=4096)
def _parse(script: str) -> tuple[tuple[tuple[bool, int], ...] | None, int, str, int, str]:
    """``(runs or None for =, prefix deleted, prefix, suffix deleted, suffix)``."""
    casing, sep, edit = script.partition(";")
    match = _EDIT.fullmatch(edit)
    if not sep or match is None:
        raise ValueError(f"lemma script {script!r} is neither <casing>;-<p>+<text>¦-<s>+<text> "
                         f"nor !<lemma>")
    if casing == KEEP_CASE:
        runs = None
    else:
        parts = [_RUN.fullmatch(part) for part in casing.split(_SEP)]
        if not all(parts):
            raise ValueError(f"lemma script {script!r}: casing {casing!r} is neither = nor runs "
                             f"like ↑0¦↓1")
        runs = tuple((part[1] == _UP, int(part[2])) for part in parts)
    prefix_deleted, prefix, suffix_deleted, suffix = match.groups()
    return (runs, int(prefix_deleted), _unescape(prefix, script), int(suffix_deleted),
            _unescape(suffix, script))


_LOWER: dict[str, str] = {}


def _lower_char(char: str) -> str:
    """``char.lower()`` when that is one character that ``upper()`` maps back; else ``char``."""
    low = _LOWER.get(char)
    if low is None:
        low = char.lower()
        if len(low) != 1 or low.upper() != char:
            low = char
        _LOWER[char] = low
    return low


def _lower(text: str) -> str:
    if text.isascii():
        return text.lower()
    return "".join(map(_lower_char, text))


def _upper_char(char: str) -> str:
    up = char.upper()
    return up if len(up) == 1 else char


def _escape(text: str) -> str:
    if text.isprintable() and "\\" not in text and _SEP not in text:
        return text
    return "".join("\\\\" if c == "\\" else c if c.isprintable() and c != _SEP
                   else f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                   for c in text)


def _unescape(text: str, script: str) -> str:
    if "\\" not in text:
        return text
    pieces, at = [], 0
    for match in _ESCAPE.finditer(text):
        hex_code = match[2] or match[3]
        pieces += [text[at:match.start()], chr(int(hex_code, 16)) if hex_code else "\\"]
        at = match.end()
    pieces.append(text[at:])
    if any("\\" in piece for piece in pieces[::2]):
        raise ValueError(f"lemma script {script!r}: bad escape in {text!r} (\\\\, \\uXXXX or "
                         f"\\UXXXXXXXX)")
    return "".join(pieces)
