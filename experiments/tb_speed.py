"""Training speed of a run, read from its TensorBoard log: the median over the logged windows of
``train/sentences_per_s`` and ``train/tokens_per_s`` (each window is ``trainer.log_every`` steps,
wall time with the step's own host synchronisations), after skipping the first steps (start-up,
CUDA kernels being chosen).

    python experiments/tb_speed.py RUN_FOLDER [RUN_FOLDER ...] [--skip 20]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TAGS = ("train/sentences_per_s", "train/tokens_per_s")


def speeds(run: Path, *, skip: int) -> dict[str, tuple[float, int]]:
    """tag -> (median value over the windows ending after step ``skip``, number of windows)."""
    accumulator = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    accumulator.Reload()
    found = {}
    for tag in TAGS:
        if tag not in accumulator.Tags()["scalars"]:
            raise SystemExit(f"{run}/tb: no {tag} (not a parser-train run folder, or it logged no step)")
        values = [e.value for e in accumulator.Scalars(tag) if e.step > skip]
        if not values:
            raise SystemExit(f"{run}/tb: no {tag} after step {skip}")
        found[tag] = (statistics.median(values), len(values))
    return found


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("runs", nargs="+", type=Path)
    args.add_argument("--skip", type=int, default=20, help="ignore windows ending at or before this step")
    opts = args.parse_args()
    for run in opts.runs:
        found = speeds(run, skip=opts.skip)
        (sentences, windows), (tokens, _) = found[TAGS[0]], found[TAGS[1]]
        print(f"{run.name}: {sentences:.1f} sentences/s, {tokens:.0f} tokens/s "
              f"(median of {windows} windows after step {opts.skip})")


if __name__ == "__main__":
    main()
