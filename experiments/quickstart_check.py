"""``make train``: the quickstart run, then its test LAS held against the figure the docs give.

    python experiments/quickstart_check.py [overrides...]

Runs ``python -m parser.cli.train experiment=quickstart`` (its output passed through), reads the
run's official test scores and compares them with the documented ones
(experiments/results/quickstart.md, the line ``documented test UAS / LAS: <uas> / <las>``). A
test LAS more than ``TOLERANCE`` away exits 1 saying so: what a newcomer sees and what the docs
quote are compared every time the quickstart runs (CI runs it too).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results" / "quickstart.md"
TOLERANCE = 1.0  # LAS points: seeds and machines move the figure by a few tenths
DOCUMENTED = re.compile(r"documented test UAS / LAS: ([0-9.]+) / ([0-9.]+)")


def documented(path: Path = RESULTS) -> tuple[float, float]:
    """The documented test ``(UAS, LAS)`` of ``path``."""
    found = DOCUMENTED.search(path.read_text(encoding="utf-8"))
    if found is None:
        raise SystemExit(f"{path}: no line 'documented test UAS / LAS: <uas> / <las>'")
    return float(found[1]), float(found[2])


def verdict(uas: float, las: float, expected: tuple[float, float], *,
            tolerance: float = TOLERANCE) -> tuple[bool, str]:
    """Whether the test LAS is within ``tolerance`` of the documented one, and the line saying so.

    >>> verdict(85.0, 82.5, (85.18, 82.71))[0], verdict(82.0, 79.0, (85.18, 82.71))[0]
    (True, False)
    """
    ok = abs(las - expected[1]) <= tolerance
    return ok, (f"quickstart test UAS / LAS {uas:.2f} / {las:.2f}; documented {expected[0]:.2f} / "
                f"{expected[1]:.2f} ({RESULTS.relative_to(REPO)}): LAS "
                f"{'within' if ok else 'NOT within'} {tolerance} of it")


def main(argv: list[str]) -> int:
    expected = documented()
    command = [sys.executable, "-m", "parser.cli.train", "experiment=quickstart", *argv]
    run_dir = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1) as run:
        for line in run.stdout:
            sys.stdout.write(line)
            if line.startswith("run folder: "):
                run_dir = Path(line.removeprefix("run folder: ").strip())
    if run.returncode != 0:
        return run.returncode
    if run_dir is None:
        raise SystemExit("quickstart: the run printed no 'run folder: ...' line")
    scores = json.loads((run_dir / "test.pred.metrics.json").read_text(encoding="utf-8"))["official"]
    ok, line = verdict(float(scores["UAS"]), float(scores["LAS"]), expected)
    print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
