"""Errors of a training run that are not bad input (kept free of torch so the command-line
shell can name them without importing it)."""

from __future__ import annotations

__all__ = ["NonFiniteError"]


class NonFiniteError(RuntimeError):
    """Too many consecutive steps with a non-finite loss or gradient."""
