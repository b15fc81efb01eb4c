"""``key=value`` command-line arguments for ``parser-predict`` and ``parser-evaluate`` (the same
syntax as Hydra overrides, without composing a config)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["UsageError", "parse_key_values"]


class UsageError(ValueError):
    """A command line that names an unknown option, repeats one, or lacks a required one."""


def parse_key_values(
    argv: Sequence[str], *, defaults: Mapping[str, str | None], prog: str
) -> dict[str, str | None]:
    """``["checkpoint=a.pt", "input=x"]`` -> ``{"checkpoint": "a.pt", "input": "x", ...}``, every
    key of ``defaults`` present.

    >>> parse_key_values(["input=x.conllu"], defaults={"input": None, "device": "auto"}, prog="p")
    {'input': 'x.conllu', 'device': 'auto'}
    """
    values = dict(defaults)
    seen: set[str] = set()
    for arg in argv:
        key, sep, value = arg.partition("=")
        key = key.strip().lstrip("+")
        if not sep or not key:
            raise UsageError(f"{prog}: argument {arg!r} is not key=value; options: {', '.join(defaults)}")
        if key not in defaults:
            raise UsageError(f"{prog}: unknown option {key!r}; options: {', '.join(defaults)}")
        if key in seen:
            raise UsageError(f"{prog}: option {key!r} given twice")
        seen.add(key)
        values[key] = None if value in ("null", "") else value
    return values
