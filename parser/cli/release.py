"""``parser-release root=<release> output=<folder>`` (or ``python -m parser.cli.release``): one
recipe over every treebank of a UD release, one table.

    parser-release root=data/ud-release output=runs/release                # every treebank
    parser-release root=data/ud-release output=runs/release treebanks=hu_szeged,ta_ttb jobs=2
    parser-release root=data/ud-release output=runs/release recipe=release_gpu

Each treebank is ``parser-train-pipeline treebank=<code> recipe=<recipe>
output=<output>/<code>`` in a process of its own (its log: ``<output>/<code>.log``), ``jobs``
at a time, each with one torch thread. A treebank whose files rule training out is skipped with
the reason (no text; no training file: a test-only treebank is scored with a model trained
elsewhere, ``parser-evaluate``); one that fails is reported with its log and the others go on.
Run again after a kill, the sweep goes on with the treebanks not finished (and each of those
where its stages stopped). The table: ``<output>/release.md`` and ``release.csv``, the reasons in
``skipped.json`` (:mod:`parser.eval.release_table`): every official metric from raw text (Tokens
... BLEX), for every treebank finished in ``<output>`` (each ``<output>/<code>/result.json``, by
code), not only those of this run: runs of ``treebanks=<code>`` into one folder make one table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from parser.cli.shell import run_key_value_cli
from parser.cli.train_pipeline import load_recipe
from parser.data.paths import available_treebanks, resolve_ud_root
from parser.data.treebanks import read_treebank_info, training_refusal
from parser.eval.release_table import release_csv, release_table
from parser.runtime.io_atomic import atomic_write
from parser.runtime.run_lock import RunLock
from parser.runtime.user_files import output_dir

__all__ = ["OPTIONS", "finished_results", "main", "sweep_release"]

POLL_SECONDS = 1.0
OPTIONS = {"root": None, "output": None, "recipe": "release_cpu", "treebanks": None, "jobs": "1"}


def _command(code: str, *, root: Path, recipe: str, output: Path) -> list[str]:
    return [sys.executable, "-m", "parser.cli.train_pipeline", f"treebank={code}", f"root={root}",
            f"recipe={recipe}", f"output={output / code}"]


def _failure(log: Path, returncode: int) -> str:
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return f"failed with exit status {returncode}: {lines[-1] if lines else 'no output'} ({log})"


def finished_results(out: Path) -> list[dict]:
    """The ``result.json`` of every treebank finished in ``out`` (``<out>/<code>/result.json``),
    by treebank code: the rows of the table, whichever run trained them."""
    results = []
    for path in out.glob("*/result.json"):
        try:
            results.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: not a readable result of parser-train-pipeline ({error}); "
                             "delete it to train that treebank again") from None
    return sorted(results, key=lambda result: result["treebank"])


def _all_skipped(out: Path, skipped: dict[str, str], *, finished: set[str]) -> dict[str, str]:
    """The treebanks skipped by this run and by earlier ones into ``out`` (``skipped.json``),
    this run's reason first, less those finished since."""
    listed = out / "skipped.json"
    earlier = json.loads(listed.read_text(encoding="utf-8")) if listed.is_file() else {}
    return {code: why for code, why in {**earlier, **skipped}.items() if code not in finished}


def sweep_release(*, root: str | Path | None, output: str | Path, recipe: str = "release_cpu",
                  treebanks: Sequence[str] | None = None, jobs: int = 1) -> dict:
    """Train and score every treebank (or ``treebanks``) not finished yet; returns ``{"results":
    [...], "skipped": {code: reason}}`` of every treebank of ``output`` (this run's and earlier
    ones', :func:`finished_results`) and writes their table."""
    root = resolve_ud_root(root)
    load_recipe(recipe)  # a bad recipe fails now, not in every treebank's process
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: expected a positive integer")
    codes = [read_treebank_info(root, name).code for name in treebanks] if treebanks else \
        available_treebanks(root)
    out = output_dir(output, option="output")
    skipped: dict[str, str] = {}
    with RunLock(out):
        waiting = []
        for code in codes:
            reason = training_refusal(read_treebank_info(root, code), root=root)
            if reason:
                skipped[code] = reason
            elif not (out / code / "result.json").is_file():
                waiting.append(code)
        running: dict[str, tuple[subprocess.Popen, Path]] = {}
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        while waiting or running:
            while waiting and len(running) < jobs:
                code = waiting.pop(0)
                log = out / f"{code}.log"
                with open(log, "a", encoding="utf-8") as handle:
                    running[code] = (subprocess.Popen(
                        _command(code, root=root, recipe=recipe, output=out), stdout=handle,
                        stderr=subprocess.STDOUT, env=env), log)
            finished = [c for c, (process, _) in running.items() if process.poll() is not None]
            if not finished:
                time.sleep(POLL_SECONDS)
            for code in finished:
                process, log = running.pop(code)
                if process.returncode != 0:
                    skipped[code] = _failure(log, process.returncode)
        results = finished_results(out)
        skipped = _all_skipped(out, skipped, finished={r["treebank"] for r in results})
        with atomic_write(out / "release.md") as handle:
            handle.write(release_table(results, skipped=skipped) + "\n")
        with atomic_write(out / "release.csv") as handle:
            handle.write(release_csv(results))
        with atomic_write(out / "skipped.json") as handle:
            handle.write(json.dumps(skipped, indent=2) + "\n")
    return {"results": results, "skipped": skipped}


def _run(args: dict) -> str:
    treebanks = [t.strip() for t in args["treebanks"].split(",")] if args["treebanks"] else None
    try:
        jobs = int(args["jobs"])
    except ValueError:
        raise ValueError(f"jobs={args['jobs']}: expected a positive integer") from None
    swept = sweep_release(root=args["root"], output=args["output"], recipe=args["recipe"],
                          treebanks=treebanks, jobs=jobs)
    table = release_table(swept["results"], skipped=swept["skipped"])
    return f"{table}\n\ntable: {Path(args['output']) / 'release.md'}"


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(argv, prog="parser-release", doc=__doc__, defaults=OPTIONS,
                             required=("output",), command=_run)


if __name__ == "__main__":
    sys.exit(main())
