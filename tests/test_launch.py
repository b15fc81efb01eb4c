"""The console scripts' launcher (parser.cli.launch): every script goes through it, the command's
module is imported with the collector paused and frozen after, the command runs with the collector
on, and the process exits with the command's status and everything it printed. Run in child
processes: the launcher ends its process."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_docs_entities import console_scripts

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("script", "target"), sorted(console_scripts().items()))
def test_every_console_script_is_launched_and_runs_its_own_module(script, target):
    module, function = target.split(":")
    assert module == "parser.cli.launch", f"{script} = {target}: not through the launcher"
    assert script == "parser-" + function.replace("_", "-")
    launch = importlib.import_module(module)
    assert getattr(launch, function).__name__ == function
    assert callable(importlib.import_module(f"parser.cli.{function}").main)


def _launch(tmp_path: Path, main_body: str, *, stdin: str | None = None) -> subprocess.CompletedProcess:
    """A child process running ``launched("fake_command")``, whose ``main`` is ``main_body``."""
    (tmp_path / "fake_command.py").write_text(
        "import gc, sys\n"
        "IMPORTED_COLLECTING = gc.isenabled()\n"
        "def main():\n" + textwrap.indent(textwrap.dedent(main_body), "    "), encoding="utf-8")
    code = "from parser.cli.launch import launched\nlaunched('fake_command')()\nprint('not reached')"
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_import_runs_with_the_collector_paused_the_command_with_it_on(tmp_path):
    done = _launch(tmp_path, """
        import fake_command
        print(fake_command.IMPORTED_COLLECTING, gc.isenabled(), gc.get_freeze_count() > 0, end="")
        return 0
    """)
    assert (done.returncode, done.stdout, done.stderr) == (0, "False True True", "")


@pytest.mark.parametrize(("body", "status", "stderr"), [
    ("return 3", 3, ""),
    ("return None", 0, ""),
    ("sys.exit(2)", 2, ""),
    ("sys.exit('bad input')", 1, "bad input\n"),
])
def test_the_process_exits_with_the_commands_status(tmp_path, body, status, stderr):
    done = _launch(tmp_path, f'print("written", end="")\n{body}\n')
    assert (done.returncode, done.stdout, done.stderr) == (status, "written", stderr)


def test_exit_functions_run_and_buffered_output_is_flushed(tmp_path):
    done = _launch(tmp_path, """
        import atexit, logging
        atexit.register(lambda: print("exit function ran", file=sys.stderr))
        logging.basicConfig(filename="log.txt", level=logging.INFO)
        logging.getLogger("x").info("logged")
        sys.stdout.write("x" * 100_000)  # more than the pipe's buffer: written in parts
        return 0
    """)
    assert done.returncode == 0 and done.stdout == "x" * 100_000
    assert done.stderr == "exit function ran\n"
    assert (tmp_path / "log.txt").read_text() == "INFO:x:logged\n"


def test_an_exception_in_the_command_is_a_traceback_and_status_1(tmp_path):
    done = _launch(tmp_path, 'raise RuntimeError("a bug")\n')
    assert done.returncode == 1 and "RuntimeError: a bug" in done.stderr and "not reached" not in done.stdout


@pytest.mark.parametrize(("script", "target"), sorted(console_scripts().items()))
def test_version_is_printed_before_the_command_is_imported(script, target, monkeypatch, capsys):
    launch = importlib.import_module("parser.cli.launch")
    function = getattr(launch, target.split(":")[1])

    def no_import(name, *args, **kwargs):
        raise AssertionError(f"--version imported {name}")

    def exit_(status):
        raise SystemExit(status)

    monkeypatch.setattr(sys, "argv", [script, "data.treebank=en_ewt", "--version"])
    monkeypatch.setattr(importlib, "import_module", no_import)  # the command module: not imported
    monkeypatch.setattr(launch, "_exit", exit_)
    with pytest.raises(SystemExit) as stop:
        function()
    assert stop.value.code == 0
    assert capsys.readouterr() == (f"parser {importlib.metadata.version('parser')}\n", "")


def test_version_of_an_installed_console_script():
    script = Path(sys.executable).with_name("parser-train")
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable} (package not installed there)")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120,
                          check=False)
    expected = f"parser {importlib.metadata.version('parser')}\n"
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")
