"""Peak memory (max RSS) of ``parser-predict`` on 2,000 and 40,000 sentences of EWT train text:
streaming prediction should make the two figures nearly equal (target: within 10%).

A tiny parser is trained first (``experiment=quickstart trainer.max_steps=20``); the inputs are
EWT train repeated into a temporary folder (nothing is written into the repository but the
results file). Each prediction runs in its own process, which reports its own peak RSS
(``resource.getrusage``), so the figures do not mix.

    python experiments/bench_predict_memory.py --sizes 2000 12543 40000   # table on stdout
    python experiments/bench_predict_memory.py --out experiments/results/predict_memory.md

(the figures and their reading in experiments/results/predict_memory.md were written from such
runs; ``--out`` replaces that file with the bare table)
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = (
    "import resource, sys\n"
    "from parser.cli.predict import main\n"
    "status = main(sys.argv[1:])\n"
    "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)\n"
    "sys.exit(status)\n"
)


def ewt_train() -> Path:
    root = Path(os.environ.get("UD_ROOT", REPO / "data" / "ud"))
    found = sorted((root / "en_ewt").glob("*-ud-train.conllu"))
    if not found:
        raise SystemExit(f"EWT train not found under {root}/en_ewt (set UD_ROOT)")
    return found[0]


def sentences(path: Path) -> list[str]:
    return [block + "\n\n" for block in path.read_text(encoding="utf-8").split("\n\n") if block.strip()]


def write_input(blocks: list[str], count: int, path: Path) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for block in itertools.islice(itertools.cycle(blocks), count):
            out.write(block)
    return path


def train_tiny(run_dir: Path) -> Path:
    subprocess.run([sys.executable, "-m", "parser.cli.train", "experiment=quickstart",
                    "trainer.max_steps=20", "trainer.eval_every=20", "trainer.final_eval=false",
                    "trainer.progress=false", "logger.tensorboard=false",
                    f"hydra.run.dir={run_dir}"], cwd=REPO, check=True, capture_output=True)
    return run_dir / "checkpoints" / "best.pt"


def peak_rss_mb(checkpoint: Path, source: Path, output: Path, extra: list[str]) -> tuple[float, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, f"checkpoint={checkpoint}",
                           f"input={source}", f"output={output}", *extra],
                          cwd=REPO, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    line = next(x for x in done.stdout.splitlines() if x.startswith("MAXRSS_KB"))
    return int(line.split()[1]) / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 40000])
    parser.add_argument("--out", default="-", help="results file, or - (default) for stdout")
    parser.add_argument("extra", nargs="*", help="more parser-predict options, e.g. chunk_size=500")
    args = parser.parse_args()
    blocks = sentences(ewt_train())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = train_tiny(Path(tmp) / "run")
        for size in args.sizes:
            source = write_input(blocks, size, Path(tmp) / f"ewt-{size}.conllu")
            mb, seconds = peak_rss_mb(checkpoint, source, Path(tmp) / f"out-{size}.conllu", args.extra)
            words = sum(1 for line in source.open(encoding="utf-8") if line[:1].isdigit())
            rows.append((size, words, source.stat().st_size / 2**20, mb, seconds))
            print(f"{size} sentences: peak RSS {mb:.0f} MB ({seconds:.0f} s)", flush=True)
    table = ["| sentences | lines with an id | input MB | peak RSS MB | wall s |",
             "|---:|---:|---:|---:|---:|"]
    table += [f"| {s:,} | {w:,} | {m:.1f} | {r:.0f} | {t:.0f} |" for s, w, m, r, t in rows]
    spread = max(r[3] for r in rows) / min(r[3] for r in rows) - 1
    text = "\n".join(table) + f"\n\nLargest / smallest peak RSS: +{100 * spread:.1f}%.\n"
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(HEADER + text, encoding="utf-8")


HEADER = """# parser-predict peak memory

Peak resident memory of one `parser-predict` process (CPU, `resource.getrusage` in the child)
on EWT train sentences repeated to the given count, with a tiny parser
(`parser-train experiment=quickstart trainer.max_steps=20`). The prediction streams the file
(`chunk_size=1000` sentences read, parsed and written at a time), so the peak should not grow
with the input's length. Reproduce from the repository root:

    python experiments/bench_predict_memory.py

"""


if __name__ == "__main__":
    main()
