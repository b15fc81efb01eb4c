"""Peak memory of reading word vectors (``model.vectors``): a synthetic 2,000,000-row 300-d
``.vec`` file read with a 20,000-word training vocabulary and ``max_rows=200000``, the rows a
parser keeps (:func:`parser.data.vectors.vocabularies_with_vectors` reads the same way). Target:
under 500 MB above the process before reading (the file itself is about 4.6 GB).

The file is written into a temporary folder outside the repository (or ``--workdir``) and removed
after. The reading runs in its own process, which reports its resident memory after importing
torch and the package (the baseline), its peak (``VmHWM``, the high-water mark of the resident
set: ``resource.getrusage``'s ``ru_maxrss``) and the time taken.

    nice python experiments/bench_vectors_memory.py                       # table on stdout
    nice python experiments/bench_vectors_memory.py --out experiments/results/vectors_memory.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from experiments.common import machine, write_result

CHILD = """
import json, resource, sys, time
import torch  # noqa: F401  (the baseline holds what a training process holds before reading)
from parser.data.vectors import read_vectors
from parser.data.vocab import N_SPECIAL, SPECIALS

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

path, vocab_file, max_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
wanted = open(vocab_file, encoding="utf-8").read().split("\\n")
baseline = status("VmRSS:")
start = time.perf_counter()
vectors = read_vectors(path, wanted=wanted, max_rows=max_rows, reserved=N_SPECIAL, skip=SPECIALS)
seconds = time.perf_counter() - start
print(json.dumps({"baseline": baseline, "peak": status("VmHWM:"), "after": status("VmRSS:"),
                  "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "seconds": seconds, "kept": len(vectors.words), "rows_read": vectors.rows_read,
                  "matrix_bytes": vectors.matrix.nbytes}))
"""


def write_vectors(path: Path, *, rows: int, dim: int, seed: int = 0) -> None:
    """``rows`` rows ``w<i> v1 ... v<dim>`` (4 decimals, as fastText's .vec) after a header; the
    values cycle through 997 distinct rows, so that writing costs no more than the disk."""
    rng = np.random.default_rng(seed)
    pool = [" ".join(f"{v:.4f}" for v in row) for row in rng.normal(scale=0.1, size=(997, dim))]
    with path.open("w", encoding="utf-8") as out:
        out.write(f"{rows} {dim}\n")
        for start in range(0, rows, 10000):
            out.write("".join(f"w{i} {pool[i % 997]}\n" for i in range(start, min(rows, start + 10000))))


def training_vocabulary(*, rows: int, size: int, seed: int = 0) -> list[str]:
    """``size`` words: half among the file's first rows, half beyond ``max_rows`` (a quarter
    of them capitalised: found through their lowercased form), and some the file lacks."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(rows, size=size - size // 20, replace=False)
    words = [f"W{i}" if k % 4 == 0 else f"w{i}" for k, i in enumerate(ids)]
    return words + [f"unseen{k}" for k in range(size // 20)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--vocabulary", type=int, default=20_000)
    parser.add_argument("--max-rows", type=int, default=200_000)
    parser.add_argument("--workdir", type=Path, default=None, help="where the file is written")
    parser.add_argument("--out", type=Path, default=None, help="write this results file")
    parser.add_argument("--note", default="", help="what else ran on the machine")
    args = parser.parse_args()
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="bench_vectors_") as folder:
        path = Path(folder) / "synthetic.vec"
        start = time.perf_counter()
        write_vectors(path, rows=args.rows, dim=args.dim)
        written = time.perf_counter() - start
        vocab = Path(folder) / "vocabulary.txt"
        vocab.write_text("\n".join(training_vocabulary(rows=args.rows, size=args.vocabulary)),
                         encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(vocab), str(args.max_rows)],
                              capture_output=True, text=True, env=env, check=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        size = path.stat().st_size
    mb = 1e6
    above = (figures["peak"] - figures["baseline"]) / mb
    body = "\n".join([
        (f"A synthetic {args.rows:,}-row {args.dim}-d `.vec` file ({size / 1e9:.2f} GB, written in "
        f"{written:.0f} s), read with a {args.vocabulary:,}-word training vocabulary and "
        f"`model.vectors.max_rows={args.max_rows}`:"),
        "",
        "| rows kept | kept matrix | baseline RSS (torch + parser imported) | peak RSS | peak above baseline | read time |",
        "|---|---|---|---|---|---|",
        (f"| {figures['kept']:,} of {figures['rows_read']:,} | {figures['matrix_bytes'] / mb:.0f} MB "
        f"| {figures['baseline'] / mb:.0f} MB | {figures['peak'] / mb:.0f} MB | **{above:.0f} MB** "
        f"| {figures['seconds']:.1f} s |"),
        "",
        f"Target: under 500 MB above the baseline: {'met' if above < 500 else 'missed'}.",
        "",
        f"Load average at the start: {load}; the read is one process, one thread, under `nice`."
        + (f" {args.note}" if args.note else ""),
    ])
    if args.out is None:
        print(body)
    else:
        write_result(args.out.name, "Reading word vectors: peak memory",
                     "nice python experiments/bench_vectors_memory.py --out "
                     f"experiments/results/{args.out.name}", body, directory=args.out.parent,
                     machine_text=machine())


if __name__ == "__main__":
    main()
