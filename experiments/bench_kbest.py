"""Exact k-best trees (``TreeCRF.kbest``) on EWT test sentence lengths, beside the single best tree.

Random N(0, 1) arc scores, float32, the 2,077 EWT test sentences in batches of 32 by length (the
batches of bench_throughput.py), single-root, one thread. Times one pass over the whole set for
k in {1, 5, 20} and for ``argmax`` (the maximum spanning tree), and checks that rank 1 is the
argmax tree and that scores never increase with the rank.

    taskset -c 1 python experiments/bench_kbest.py   # writes experiments/results/kbest.md
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from bench_throughput import ewt_batches
from common import markdown_table, timing_note, write_result

from parser.structs import TreeCRF

KS = (1, 5, 20)


def one_pass(batches, k: int | None) -> float:
    start = time.process_time()
    for scores, _, lengths in batches:
        crf = TreeCRF(scores, lengths)
        crf.argmax() if k is None else crf.kbest(k)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    batches = ewt_batches(torch.float32)
    words = sum(int(lengths.sum()) for _, _, lengths in batches)
    sentences = sum(len(lengths) for _, _, lengths in batches)
    one_pass(batches[:4], 5)  # warm-up
    for scores, _, lengths in batches:  # rank 1 is the argmax (random scores: no ties)
        crf = TreeCRF(scores, lengths)
        best = crf.kbest(3)
        assert torch.equal(best.heads[0], crf.argmax())
        assert (best.scores[:-1] >= best.scores[1:]).all()
    seconds = {name: [] for name in ["argmax", *KS]}
    for _ in range(args.repeats):
        for name, values in seconds.items():
            values.append(one_pass(batches, None if name == "argmax" else name))
    rows = []
    for name, values in seconds.items():
        total = statistics.median(values)
        label = "argmax (maximum spanning tree)" if name == "argmax" else f"kbest(k={name})"
        rows.append([label, f"{total:.2f}", f"{1e3 * total / sentences:.2f}"])
    body = (
        f"float32 random N(0, 1) scores, EWT test lengths ({sentences:,} sentences, {words:,} words, "
        f"batches of 32 by length), single-root; CPU seconds per pass over the set, median of "
        f"{args.repeats} pass(es); rank 1 checked equal to argmax on every batch:\n\n"
        + markdown_table(["decoder", "s per pass", "ms per sentence"], rows)
        + "\n\n" + timing_note()
    )
    write_result("kbest.md", "Exact k-best trees on EWT test lengths",
                 "taskset -c 1 python experiments/bench_kbest.py", body)


if __name__ == "__main__":
    main()
