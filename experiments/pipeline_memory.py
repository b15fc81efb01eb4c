"""Resident memory of ``Pipeline.parse_file`` on a long raw text: the figure of
``experiments/results/raw_text_ewt.md``. The input is a raw text file's paragraphs repeated until it
holds about ``--sentences`` sentences (counted by the pipeline's own splitter in the output);
resident set size (VmRSS) is sampled every 0.2 s while the file is parsed.

    python experiments/pipeline_memory.py --pipeline ewt.pipeline \\
        --text $RUNS/eval/en_ewt-test.txt --sentences 20000 --workdir $RUNS/memory
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from parser import Pipeline


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", type=Path, required=True)
    parser.add_argument("--text", type=Path, required=True, help="raw text, paragraphs separated by blank lines")
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--per-copy", type=int, required=True, help="sentences in one copy of --text (the gold count)")
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    copies = -(-args.sentences // args.per_copy)
    source = args.workdir / "input.txt"
    block = args.text.read_text(encoding="utf-8").strip() + "\n\n"
    source.write_text(block * copies, encoding="utf-8")
    nlp = Pipeline.load(args.pipeline)
    loaded = rss_mib()
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        start = time.time()
        while not done.is_set():
            samples.append((time.time() - start, rss_mib()))
            time.sleep(0.2)

    watcher = threading.Thread(target=sample)
    watcher.start()
    started = time.time()
    count = nlp.parse_file(source, args.workdir / "output.conllu")
    done.set()
    watcher.join()
    seconds = time.time() - started
    values = [v for _, v in samples]
    tenth = max(1, len(values) // 10)
    report = {
        "pipeline": str(args.pipeline), "sentences": count, "input_mib": round(source.stat().st_size / 2**20, 1),
        "seconds": round(seconds, 1), "rss_after_load_mib": round(loaded, 1),
        "rss_first_tenth_max_mib": round(max(values[:tenth]), 1),
        "rss_last_tenth_max_mib": round(max(values[-tenth:]), 1),
        "rss_peak_mib": round(max(values), 1),
        "rss_by_decile_mib": [round(max(values[i * tenth:(i + 1) * tenth] or [0]), 1) for i in range(10)],
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
