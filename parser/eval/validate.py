"""The official UD validator (``udtools``' ``udvalidate``, the ``Validator`` class behind that
console script), run in-process on a CoNLL-U file."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["validate_conllu"]


def validate_conllu(
    path: str | os.PathLike, *, level: int = 2, lang: str = "en", warnings: bool = False
) -> list[str]:
    """Errors the official validator finds in ``path`` (an empty list when the file is valid).

    Each entry reads ``"<path>:<line>: [L<level> <class> <test id>] sent <sent_id>: <message>"``.
    ``level`` is the validator's level, 1..5 (2 = UD format: trees, columns, metadata). As in
    ``udvalidate``, levels below 4 check the universal guidelines only, so ``lang`` matters from
    level 4 on. ``warnings=True`` adds the validator's warnings to the list.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a bad level or language.
    """
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 5:
        raise ValueError(f"level: expected an integer 1..5, got {level!r}")
    if not lang or not isinstance(lang, str):
        raise ValueError(f"lang: expected an ISO 639 code or 'ud', got {lang!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"CoNLL-U file to validate not found: {path}")
    from udtools import Validator  # here: its import (regex, udapi) is a prediction's start-up cost

    # udvalidate's own rule: no language-specific tests below level 4.
    validator = Validator(lang=lang if level >= 4 else "ud", level=level, output=None, max_store=0)
    state = validator.validate_files([str(path)])
    problems = []
    for incident in sorted(state.error_tracker, key=lambda incident: incident.lineno):
        if incident.is_warning() and not warnings:
            continue
        kind = "" if incident.is_error() else "warning "
        problems.append(
            f"{path}:{incident.lineno}: {kind}[L{incident.level} {incident.testclass} "
            f"{incident.testid}] sent {incident.sentid}: {incident.message}"
        )
    if not state.passed() and not any(incident.is_error() for incident in state.error_tracker):
        # Counted but not stored (should not happen with max_store=0): still report failure.
        problems.append(f"{path}: validation failed: {str(state).strip()}")
    return problems
