"""``key=value`` command-line arguments for ``parser-predict`` and ``parser-evaluate`` (the same
syntax as Hydra overrides, without composing a config)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["UsageError", "parse_key_values", "run_key_value_cli"]


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


def run_key_value_cli(
    argv: Sequence[str] | None,
    *,
    prog: str,
    doc: str | None,
    defaults: Mapping[str, str | None],
    required: Sequence[str] = (),
    command: Callable[[dict[str, str | None]], str],
) -> int:
    """The shell shared by ``parser-predict`` and ``parser-evaluate``: logging, ``-h``/``--help``
    (prints ``doc``), ``key=value`` parsing, the ``required`` options, then ``command(args)``,
    whose returned text is printed. Bad input (``ValueError``, ``FileNotFoundError``) prints
    ``<prog>: error: ...`` on stderr and returns 2, so scripts see a usage failure, not a trace."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(arg in ("-h", "--help") for arg in argv):
        print(doc)
        return 0
    try:
        args = parse_key_values(argv, defaults=defaults, prog=prog)
        missing = [key for key in required if not args[key]]
        if missing:
            raise UsageError(f"{prog}: missing {', '.join(f'{key}=...' for key in missing)}")
        text = command(args)
    except (ValueError, FileNotFoundError) as error:  # ConlluError, CheckpointError included
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 0
