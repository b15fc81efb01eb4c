"""``parser-select`` over a large pool (issue 46): peak memory and speed against ``parser-predict
confidence=true`` on the same pool with the same parser, one core.

Pools of ``--sizes`` sentences are made by cycling a CoNLL-U file's sentences (default EWT train,
12,544 sentences) with their HEAD and DEPREL emptied and a fresh ``sent_id`` per copy. Each command
runs in a fresh process with one thread under ``/usr/bin/time`` (CPU seconds: user + system, which
the other jobs of a shared machine do not inflate as they do wall time; peak RSS):

- ``parser-select checkpoint=... pool=... strategy=words budget=2000 cap=3`` (its two streamed
  passes: every sentence annotated with confidence, then the selected ones again to write them);
- ``parser-predict checkpoint=... input=... confidence=true`` (one pass, every sentence written).

The issue's targets: peak RSS not growing with the pool (the 10k and 100k rows), and the selection
at least as fast (words per CPU second) as ``parser-predict confidence=true``.

    PYTHONPATH=. python experiments/bench_select_pool.py --checkpoint CHECKPOINT --work $RUNS/select_bench \\
        --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from common import write_result

from parser.data.paths import resolve_ud_root, treebank_file


def make_pool(source: Path, size: int, target: Path) -> int:
    """A pool of ``size`` sentences cycling ``source``'s, heads emptied; returns its words."""
    blocks = [b for b in source.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    words = 0
    with open(target, "w", encoding="utf-8") as out:
        for i in range(size):
            lines = []
            for line in blocks[i % len(blocks)].splitlines():
                if line.startswith("# sent_id"):
                    line = f"# sent_id = pool-{i}"
                elif line and line[0].isdigit():
                    cols = line.split("\t")
                    cols[6] = cols[7] = cols[8] = "_"
                    words += cols[0].isdigit()
                    line = "\t".join(cols)
                lines.append(line)
            out.write("\n".join(lines) + "\n\n")
    return words


def timed(command: list[str], log: Path) -> dict:
    """CPU seconds, wall seconds and peak RSS (MB) of ``command`` in a fresh process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with open(log, "w", encoding="utf-8") as handle:
        done = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S %M", *command], env=env,
                              stdout=handle, stderr=subprocess.STDOUT, check=False)
    last = [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("TIME ")]
    if done.returncode != 0 or not last:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}); its log: {log}")
    wall, user, system, rss_kb = last[-1].split()[1:]
    return {"cpu": float(user) + float(system), "wall": float(wall), "rss_mb": int(rss_kb) / 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a parser checkpoint")
    parser.add_argument("--source", type=Path, default=None, help="default: EWT train")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--work", type=Path, required=True, help="pools and outputs, outside the repo")
    args = parser.parse_args(argv)
    source = args.source or treebank_file(resolve_ud_root(None), "en_ewt", "train")
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    python = sys.executable
    for size in args.sizes:
        pool = args.work / f"pool-{size}.conllu"
        words = make_pool(source, size, pool)
        runs = {
            "parser-select strategy=words budget=2000 cap=3": [
                python, "-m", "parser.cli.select", f"checkpoint={args.checkpoint}", f"pool={pool}",
                f"output={args.work / f'select-{size}.conllu'}", "strategy=words", "budget=2000",
                "cap=3", "device=cpu"],
            "parser-predict confidence=true": [
                python, "-m", "parser.cli.predict", f"checkpoint={args.checkpoint}", f"input={pool}",
                f"output={args.work / f'predict-{size}.conllu'}", "confidence=true", "device=cpu"],
        }
        for name, command in runs.items():
            result = timed(command, args.work / f"{name.split()[0]}-{size}.log")
            rows.append((size, words, name, result))
            print(size, name, result, flush=True)
    table = ["| pool sentences | words | command | CPU s | words per CPU s | peak RSS MB | wall s |",
             "| ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    table += [f"| {size:,} | {words:,} | `{name}` | {r['cpu']:.0f} | {words / r['cpu']:,.0f} | "
              f"{r['rss_mb']:.0f} | {r['wall']:.0f} |" for size, words, name, r in rows]
    write_result("select_pool.md", "Selection over a large pool: memory and speed (issue 46)",
                 f"PYTHONPATH=. python experiments/bench_select_pool.py --checkpoint CHECKPOINT "
                 f"--work $RUNS/select_bench --sizes {' '.join(map(str, args.sizes))}",
                 __doc__.split("\n\n")[1] + "\n\n" + "\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
