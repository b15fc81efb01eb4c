"""The shells of the command-line tools: ``key=value`` arguments for ``parser-predict`` and
``parser-evaluate`` (the same syntax as Hydra overrides, without composing a config), and the Hydra
entry of ``parser-train``. Both report bad input as ``<prog>: error: <message>`` on stderr with
exit status 2 and no traceback; a bug still shows its traceback."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from parser.cli.run_folder import owned_run, record_later

__all__ = [
    "USER_ERRORS", "UsageError", "parse_bool", "parse_key_values", "run_hydra_cli", "run_key_value_cli",
]

# Bad input: a missing, misplaced or malformed file, an unknown name or value (ConlluError,
# CheckpointError and UsageError are ValueErrors; IsADirectoryError, PermissionError are OSErrors).
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError)


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


def parse_bool(value: str | bool | None, *, option: str) -> bool:
    """``true``/``false`` (also ``yes``/``no``, ``1``/``0``, any case) -> bool; None is false.

    >>> parse_bool("True", option="retag"), parse_bool(None, option="retag")
    (True, False)
    >>> parse_bool("maybe", option="retag")
    Traceback (most recent call last):
    ...
    parser.cli.shell.UsageError: retag=maybe: expected true or false
    """
    if value is None or isinstance(value, bool):
        return bool(value)
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise UsageError(f"{option}={value}: expected true or false")


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
    whose returned text is printed. Bad input (``USER_ERRORS``) prints ``<prog>: error: ...`` on
    stderr and returns 2, so scripts see a usage failure, not a trace."""
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
    except USER_ERRORS as error:
        print(f"{prog}: error: {_strip_prog(str(error), prog)}", file=sys.stderr)
        return 2
    print(text)
    return 0


def run_hydra_cli(
    task: Callable,
    argv: Sequence[str] | None,
    *,
    prog: str,
    config_dir: str | os.PathLike,
    config_name: str,
    failures: tuple[type[BaseException], ...] = (),
    own_run_dir: bool = False,
    folders: Callable | None = None,
    record_in_task: bool = False,
) -> int:
    """Run ``task(cfg)`` under ``hydra.main`` with ``argv`` (default ``sys.argv[1:]``) and return
    the exit status: 0; 2 on bad input (a config that does not compose: unknown key, group option
    or value; or ``USER_ERRORS`` from the task); 1 on one of ``failures`` (a run that stopped,
    e.g. on non-finite steps). Either prints ``<prog>: error: <message>`` on stderr, without a
    traceback; other exceptions propagate. ``HYDRA_FULL_ERROR=1`` re-raises every error.

    Hydra prints its own errors and exits 1; here it is told to re-raise (``HYDRA_FULL_ERROR``,
    restored afterwards), and the global Hydra state is cleared so the call can be repeated in
    one process (tests, notebooks).

    ``own_run_dir``: the task runs only while it holds the run folder (and ``folders(cfg,
    run_dir)``), and the folder's ``.hydra`` record is written by it, not by Hydra
    (:mod:`parser.cli.run_folder`; ``record_in_task``: when the task calls ``record()``, see
    :func:`~parser.cli.run_folder.owned_run`): a refused run changes nothing there."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if own_run_dir:
        argv, subdir = record_later(argv)
        task = owned_run(task, subdir=subdir, folders=folders or (lambda cfg, run_dir: ()),
                         record_in_task=record_in_task)
    user_full_error = os.environ.get("HYDRA_FULL_ERROR")
    saved_argv = sys.argv
    sys.argv = [saved_argv[0] if saved_argv else prog, *argv]
    os.environ["HYDRA_FULL_ERROR"] = "1"
    bad_input = (*USER_ERRORS, HydraException, OmegaConfBaseException)
    try:
        hydra.main(config_path=str(Path(config_dir)), config_name=config_name, version_base="1.3")(task)()
    except (*failures, *bad_input) as error:
        if user_full_error == "1":
            raise
        print(f"{prog}: error: {_hydra_message(error)}", file=sys.stderr, flush=True)
        return 2 if isinstance(error, bad_input) and not isinstance(error, failures) else 1
    finally:
        sys.argv = saved_argv
        if user_full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = user_full_error
        GlobalHydra.instance().clear()
    return 0


def _hydra_message(error: BaseException) -> str:
    """The error's text, followed by the OmegaConf reason of a Hydra composition error, as Hydra
    prints them ("Could not override 'trainer.max_stepz'" + "Key 'max_stepz' not in ...")."""
    text = str(error).strip()
    cause = error.__cause__
    if isinstance(error, HydraException) and isinstance(cause, OmegaConfBaseException):
        text = f"{text}\n{str(cause).strip()}"
    return text


def _strip_prog(message: str, prog: str) -> str:
    """``parser-evaluate: x`` -> ``x``, since the caller prefixes ``<prog>: error:`` itself."""
    return message[len(prog) + 2 :] if message.startswith(f"{prog}: ") else message
