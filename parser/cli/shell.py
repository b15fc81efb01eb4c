"""The shells of the command-line tools, and the one grammar of their options.

Every tool reads its arguments with Hydra's override grammar
(``hydra.core.override_parser``), so a command line means the same to each: ``key=value``; a
value with other characters (spaces, commas, ``#``, ``~``, brackets) quoted, ``key='a b'``;
``null`` for none; ``[a,b]`` for a list; ``+key=value`` adds a key the config lacks,
``++key=value`` adds or changes one, ``~key`` removes one. The trainers (``parser-train``,
``parser-train-tagger``, ``parser-train-tokenizer``: :func:`run_hydra_cli`) compose a config from
``configs/`` with them. The other tools (``parser-predict``, ``parser-evaluate``,
``parser-pipeline``, ``parser-calibrate``: :func:`run_key_value_cli`) have one flat, closed set of
options (``OPTIONS`` of their module), each present with its default, so with the same grammar:

- ``+key=...`` is refused, as ``parser-train +trainer.max_steps=10`` is: every option is already
  there (``key=...`` or ``++key=...`` sets it); ``+`` or ``++`` before an unknown key is an
  unknown option, as the trainers' schema check makes it (:func:`parser.config.check_known_keys`);
- ``~key`` removes what was given: the option keeps its default;
- the command receives text or None: a value as written, its quotes removed; ``null`` or nothing
  as None; a list ``[a,b]``, or ``a,b`` (a sweep to ``parser-train -m``; these tools run once), as
  ``"a,b"``;
- an option given twice is refused (a trainer keeps the last).

An unknown option is the same error for every tool (:func:`parser.config.unknown_option`), the
likely intended option first, then where the options are listed; exit status 2::

    parser-train: error: unknown option 'trainer.max_step'; did you mean 'trainer.max_steps'?
    parser-predict: error: unknown option 'chekpoint'; did you mean 'checkpoint'?

whether Hydra finds it (``trainer.max_step=10``), the trainers' schema check does
(``+trainer.max_step=10``) or a key=value tool does. docs/cli.md shows the grammar with examples.
Any bad input is reported as ``<prog>: error: <message>`` on stderr with exit status 2 and no
traceback; a bug still shows its traceback.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Override, Sweep
from hydra.errors import ConfigCompositionException, HydraException
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from parser.cli.run_folder import owned_run, record_later
from parser.config import UnknownKeyError, dotted_keys, unknown_option

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
    key of ``defaults`` present; each argument read with Hydra's override grammar (see the module
    docstring for what ``+``, ``~``, lists and ``null`` mean here).

    >>> parse_key_values(["input='a b.conllu'", "ud_rules=[root,punct]", "device=null"],
    ...                  defaults={"input": None, "ud_rules": None, "device": "auto"}, prog="p")
    {'input': 'a b.conllu', 'ud_rules': 'root,punct', 'device': None}
    >>> parse_key_values(["inptu=x"], defaults={"input": None}, prog="p")
    Traceback (most recent call last):
    ...
    parser.cli.shell.UsageError: p: unknown option 'inptu'; did you mean 'input'?
    options: input
    """
    values = dict(defaults)
    seen: set[str] = set()
    grammar = OverridesParser.create()
    for arg in argv:
        if "=" not in arg and not arg.startswith("~"):
            raise UsageError(f"{prog}: argument {arg!r} is not key=value; options: {', '.join(defaults)}")
        try:
            override = grammar.parse_override(arg)
        except HydraException as error:
            lines = str(error).splitlines()  # "Error parsing override '...'", then the reason
            reason = lines[1] if len(lines) > 1 else str(error)
            raise UsageError(f"{prog}: cannot read {arg!r} ({reason}); quote a value with other "
                             f"characters: key='...'") from None
        key = override.get_key_element().lstrip("+~")
        if key not in defaults:
            raise UsageError(f"{prog}: {unknown_option(key, defaults)}\noptions: {', '.join(defaults)}")
        if key in seen:
            raise UsageError(f"{prog}: option {key!r} given twice")
        seen.add(key)
        if override.is_add():
            raise UsageError(f"{prog}: {arg!r}: '+' adds an option the tool lacks, and {key!r} is one "
                             f"of its options: give {arg[1:]!r}")
        values[key] = defaults[key] if override.is_delete() else _as_text(override, arg)
    return values


def _as_text(override: Override, arg: str) -> str | None:
    """The value of ``arg`` as a command reads it: text as written, quotes removed; None for
    ``null`` or nothing; ``[a,b]`` and ``a,b`` as ``"a,b"``."""
    value = override.value()
    if isinstance(value, ChoiceSweep) and value.simple_form:
        value = value.list
    items = value if isinstance(value, list) else [value]
    if isinstance(value, (Sweep, dict)) or any(isinstance(item, (list, dict)) for item in items):
        raise UsageError(f"{arg}: expected a value or a list [a,b]")
    if isinstance(value, list):
        return ",".join(_word(item) for item in value)
    if value is None or isinstance(value, str):
        return value or None
    return arg.split("=", 1)[1].strip()  # a number or a boolean, as written


def _word(item: object) -> str:
    """An item of a list as text (``true``/``null`` as Hydra writes them)."""
    if isinstance(item, bool):
        return str(item).lower()
    return "null" if item is None else str(item)


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
    or value; a run folder where Hydra cannot write its log file; or ``USER_ERRORS`` from the
    task); for one of ``failures`` (a run that stopped, e.g. on non-finite steps), its
    ``status`` attribute (1 without one). Either prints ``<prog>: error: <message>`` on stderr,
    without a traceback; other exceptions propagate. ``HYDRA_FULL_ERROR=1`` re-raises every error.

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
        print(f"{prog}: error: {_hydra_message(error, prog=prog)}", file=sys.stderr, flush=True)
        return getattr(error, "status", 1) if isinstance(error, failures) else 2
    finally:
        sys.argv = saved_argv
        if user_full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = user_full_error
        GlobalHydra.instance().clear()
    return 0


def _hydra_message(error: BaseException, *, prog: str) -> str:
    """The error's text, followed by the OmegaConf reason of a Hydra composition error, as Hydra
    prints them ("Error merging override optim.name=adamm" + "Invalid value 'adamm' ..."); an
    unknown key as every tool names one (:func:`parser.config.unknown_option`), instead of
    Hydra's advice to add it with ``+``."""
    unknown = _unknown_key(error)
    if unknown is not None:
        key, known = unknown
        return f"{unknown_option(key, known)}\noptions: `{prog} <overrides> --cfg job` prints them"
    unwritable = _unwritable_log_file(error)
    if unwritable is not None:
        return unwritable
    text = str(error).strip()
    cause = error.__cause__
    if isinstance(error, HydraException) and isinstance(cause, OmegaConfBaseException):
        text = f"{text}\n{str(cause).strip()}"
    return text


_NOT_OVERRIDDEN = re.compile(r"Could not override '([^']+)'")


def _unknown_key(error: BaseException) -> tuple[str, list[str]] | None:
    """``(key, the config's dotted keys)`` when ``error`` is about a key the config lacks: one
    forced in with ``+`` (:func:`parser.config.check_known_keys`), or one Hydra could not
    override (its cause: OmegaConf's missing-key error, whose node leads to the config)."""
    if isinstance(error, UnknownKeyError):
        return error.key, error.known
    cause, match = error.__cause__, _NOT_OVERRIDDEN.match(str(error))
    if isinstance(error, ConfigCompositionException) and match \
            and isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and cause.parent_node is not None:
        known = dotted_keys(cause.parent_node._get_root())
        if match[1] in known or any(key.startswith(f"{match[1]}.") for key in known):
            return None  # a key the config has (a mapping given a new entry): Hydra's own advice
        return match[1], known
    return None


def _unwritable_log_file(error: BaseException) -> str | None:
    """Hydra opens the job's log file in the run folder before the task starts; in a folder it
    cannot write to (read-only, another user's), logging's ``Unable to configure handler
    'file'`` becomes a message naming the folder."""
    cause = error.__cause__
    if not (isinstance(error, ValueError) and str(error).startswith("Unable to configure handler")
            and isinstance(cause, OSError) and cause.filename):
        return None
    log_file = Path(cause.filename)
    return (f"the run folder {log_file.parent} is not writable: its log file {log_file.name} "
            f"cannot be created ({cause.strerror}); make the folder writable, or run into "
            "another one (hydra.run.dir=<folder>; to continue a run from its checkpoint there: "
            f"trainer.resume={log_file.parent}/checkpoints)")


def _strip_prog(message: str, prog: str) -> str:
    """``parser-evaluate: x`` -> ``x``, since the caller prefixes ``<prog>: error:`` itself."""
    return message[len(prog) + 2 :] if message.startswith(f"{prog}: ") else message
