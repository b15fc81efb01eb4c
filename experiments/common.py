"""Shared pieces of the benchmark scripts: treebank lengths, random scores, timing, tables."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
TEST_SETS = ["en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt"]


def ud_root() -> Path:
    for candidate in (os.environ.get("UD_ROOT"), REPO / "data" / "ud", REPO.parent / "shared" / "data" / "ud"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    raise SystemExit("UD treebanks not found: set UD_ROOT or run `make data`")


def sentence_lengths(treebank: str, split: str = "test") -> list[int]:
    """Words per sentence (multiword-token lines and empty nodes not counted)."""
    path = ud_root() / treebank / f"{treebank}-ud-{split}.conllu"
    lengths, current = [], 0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                if current:
                    lengths.append(current)
                current = 0
            elif line[0].isdigit() and line.split("\t", 1)[0].isdigit():
                current += 1
    if current:
        lengths.append(current)
    return lengths


def random_scores(length: int, *, generator: torch.Generator, scale: float = 1.0,
                  dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``[1, N+1, N+1]`` standard-normal arc scores times ``scale`` for one sentence."""
    return scale * torch.randn(1, length + 1, length + 1, generator=generator, dtype=dtype)


def length_buckets(lengths: list[int], batch_size: int, *, max_ratio: float | None = None) -> list[list[int]]:
    """Sentences sorted by length, cut into batches of ``batch_size`` (indices into ``lengths``).

    ``max_ratio``: also start a new batch where a sentence is more than ``max_ratio`` times as
    long as the batch's first (a padded batch costs its longest sentence's N^3 for every row:
    the long tail of a test set would otherwise pad 97-word sentences to 187).
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    for i in order:
        if (not batches or len(batches[-1]) == batch_size
                or (max_ratio is not None and lengths[i] > max_ratio * lengths[batches[-1][0]])):
            batches.append([])
        batches[-1].append(i)
    return batches


def padded_scores(lengths: list[int], *, generator: torch.Generator, dtype: torch.dtype,
                  scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, N+1, N+1]`` random scores for sentences of the given lengths, and the lengths."""
    n = max(lengths)
    scores = scale * torch.randn(len(lengths), n + 1, n + 1, generator=generator, dtype=dtype)
    return scores, torch.tensor(lengths)


def time_call(fn: Callable[[], object], *, repeats: int = 3) -> float:
    """Median CPU time of ``fn()`` in seconds over ``repeats`` runs (after one warm-up run)."""
    return interleaved_cpu_times({"fn": fn}, repeats=repeats)["fn"]


def interleaved_cpu_times(fns: dict[str, Callable[[], object]], *, repeats: int = 3) -> dict[str, float]:
    """Median process CPU time (``time.process_time``) of each ``fn()`` in seconds.

    One warm-up call each, then ``repeats`` rounds that call every function once in turn
    (A B C A B C ...), so drifts in the load of a shared machine hit all of them alike. CPU time,
    not wall time: time spent descheduled by other processes is not counted.
    """
    return interleaved_times(fns, repeats=repeats)


def interleaved_times(fns: dict[str, Callable[[], object]], *, repeats: int = 3,
                      clock: Callable[[], float] = time.process_time,
                      settle: Callable[[], object] | None = None) -> dict[str, float]:
    """:func:`interleaved_cpu_times` with another ``clock`` (e.g. ``time.perf_counter``) and a
    ``settle()`` called before and after each timed call (e.g. waiting for a GPU's queue)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            if settle is not None:
                settle()
            start = clock()
            fn()
            if settle is not None:
                settle()
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


TIMING_NOTE = (
    "Timing: process CPU time (`time.process_time`), one torch thread (`torch.set_num_threads(1)`), the "
    "process pinned to one core (`taskset -c 1`); the implementations' repeats "
    "interleaved (A B C A B C ...) so that load drifts on the shared machine hit all alike; medians of the "
    "repeats. The machine was shared with other jobs (load average at the start of the run: {load})."
)


def timing_note() -> str:
    try:
        load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        load = "unknown"
    return TIMING_NOTE.format(load=load)


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} thread(s)"


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    def cell(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_result(name: str, title: str, command: str, body: str, *, directory: Path = RESULTS,
                 machine_text: str | None = None) -> Path:
    """Writes ``<directory>/<name>`` (``experiments/results`` by default) with the command, the
    machine (``machine()`` unless given) and the body."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    text = f"# {title}\n\nCommand: `{command}`\n\nMachine: {machine_text or machine()}\n\n{body}\n"
    path.write_text(text, encoding="utf-8")
    print(text)
    return path
