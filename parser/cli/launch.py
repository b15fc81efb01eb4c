"""The console scripts of pyproject.toml: each imports its command's module with Python's cyclic
garbage collector paused, freezes everything imported so far (``gc.freeze``), runs the command
with the collector on as usual, and exits without the interpreter's teardown.

Why: importing torch makes a few hundred thousand objects (``import parser`` already imports it:
the package exports ``Pipeline``). Unfrozen, the collector walks them again in every full pass and
at exit, and the teardown then frees them one by one before the operating system frees the memory
anyway: a one-sentence ``parser-predict`` took 1.6-1.8 s without this launcher, about 1.1 s with
it (experiments/results/fast_parser.md, seventh round). Frozen objects are still freed when
nothing refers to them; the collector only stops scanning them for cycles. The exit runs the
``atexit`` functions (log handlers, temporary folders) and flushes the standard streams first;
objects only the teardown would free (no ``close``, no ``atexit``) are not finalised, and every
file this package writes is closed by its own code. ``python -m parser.cli.<name>`` runs the same
command without the launcher. ``--version`` (anywhere among the arguments) prints ``parser
<version>`` from the installed distribution's metadata and exits 0 before the command's module is
imported or Hydra reads the arguments.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = ["launched", "version"]

DISTRIBUTION = "parser"  # pyproject.toml's [project] name


def version() -> str:
    """``parser <version>``: the installed distribution's version (a wheel or an editable
    install); ``unknown`` when the package runs from a folder that was never installed."""
    try:
        number = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        number = "unknown"
    return f"{DISTRIBUTION} {number}"


def launched(module: str) -> Callable[[], NoReturn]:
    """The console script of ``module``'s ``main``: imported with the collector paused, then
    run; the process exits with its status."""

    def run() -> NoReturn:
        if "--version" in sys.argv[1:]:  # before Hydra, which has a --version of its own
            print(version())
            _exit(0)
        collecting = gc.isenabled()
        gc.disable()
        try:
            main = importlib.import_module(module).main
        finally:
            gc.freeze()
            if collecting:
                gc.enable()
        try:
            status = main()
        except SystemExit as stop:
            status = stop.code
        _exit(status)

    run.__name__ = run.__qualname__ = module.rpartition(".")[2]
    return run


def _exit(status: object) -> NoReturn:
    """``sys.exit(status)`` without the teardown: the same exit code and message."""
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:  # sys.exit("message"): the message to standard error, status 1
        print(status, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()  # what the interpreter runs before its teardown
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: Python's own exit reports it with 120
        code = code or 120
    os._exit(code)


# pyproject.toml's [project.scripts] name these: parser-<name> runs parser.cli.<name>'s main
train = launched("parser.cli.train")
evaluate = launched("parser.cli.evaluate")
predict = launched("parser.cli.predict")
train_tagger = launched("parser.cli.train_tagger")
train_tokenizer = launched("parser.cli.train_tokenizer")
pipeline = launched("parser.cli.pipeline")
calibrate = launched("parser.cli.calibrate")
train_pipeline = launched("parser.cli.train_pipeline")
release = launched("parser.cli.release")
select = launched("parser.cli.select")
serve = launched("parser.cli.serve")
draw = launched("parser.cli.draw")
vectors = launched("parser.cli.vectors")
