"""Table 1 of Zmigrod, Vieira & Cotterell (TACL 2021), reproduced on the UD test sets.

Shannon entropy of the tree distribution of each test sentence (random N(0,1) arc scores, single
root, float64), one sentence at a time: by first-order expectation (one matrix-tree evaluation and
its marginals, O(N^3)) versus Smith & Eisner's method as published (N matrix-tree evaluations per
sentence, O(N^4)); then our batched path (length-bucketed batches of 32). Mean milliseconds per
sentence and speed-ups, one thread. The paper reports 4.1x (Finnish) to 15.1x (Arabic).

    python experiments/bench_entropy.py            # writes experiments/results/entropy_table1.md
"""

from __future__ import annotations

import argparse
import time

import torch

from common import TEST_SETS, length_buckets, markdown_table, padded_scores, random_scores, sentence_lengths, write_result

from parser.structs import TreeCRF
from parser.structs.slow import smith_eisner_entropy


def per_sentence_seconds(fn, items) -> tuple[float, list[torch.Tensor]]:
    fn(*items[0])  # warm-up
    values = []
    start = time.perf_counter()
    for item in items:
        values.append(fn(*item))
    return (time.perf_counter() - start) / len(items), values


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--max-sentences", type=int, default=None, help="first K sentences per set")
    args = arguments.parse_args()
    torch.set_num_threads(1)
    rows = []
    for treebank in TEST_SETS:
        lengths = sentence_lengths(treebank, "test")[: args.max_sentences]
        generator = torch.Generator().manual_seed(0)
        items = [(random_scores(n, generator=generator), n) for n in lengths]
        with torch.no_grad():
            fast, fast_values = per_sentence_seconds(
                lambda s, n: TreeCRF(s, torch.tensor([n])).entropy()[0], items)
            slow, slow_values = per_sentence_seconds(
                lambda s, n: smith_eisner_entropy(s[0], n, single_root=True), items)
            batched_items = []
            for bucket in length_buckets(lengths, 32):
                scores = torch.zeros(len(bucket), max(lengths[i] for i in bucket) + 1, max(lengths[i] for i in bucket) + 1,
                                     dtype=torch.float64)
                for row, i in enumerate(bucket):
                    n = lengths[i]
                    scores[row, : n + 1, : n + 1] = items[i][0][0]
                batched_items.append((scores, torch.tensor([lengths[i] for i in bucket])))
            start = time.perf_counter()
            for scores, lens in batched_items:
                TreeCRF(scores, lens).entropy()
            batched = (time.perf_counter() - start) / len(lengths)
        disagreement = max(float(abs(a - b)) for a, b in zip(fast_values, slow_values))
        rows.append([
            treebank, len(lengths), f"{sum(lengths) / len(lengths):.1f}",
            f"{1000 * slow:.3f}", f"{1000 * fast:.3f}", f"{slow / fast:.1f}x",
            f"{1000 * batched:.3f}", f"{slow / batched:.1f}x", f"{disagreement:.1e}",
        ])
        print(rows[-1], flush=True)
    header = ["test set", "sentences", "mean length", "Smith & Eisner ms/sent", "first-order ms/sent",
              "speed-up", "batched ms/sent", "batched speed-up", "max |H difference|"]
    body = (
        "Random N(0,1) arc scores, single-root trees, float64, one thread. 'first-order' is our TreeCRF "
        "called on one sentence at a time; 'batched' is the same over length-bucketed batches of 32. "
        "The last column is the largest disagreement between the two entropies over the set.\n\n"
        + markdown_table(header, rows)
        + "\n\nZmigrod, Vieira & Cotterell (2021), Table 1: 4.1x (Finnish, mean length 9.2) to 15.1x (Arabic, 36.1)."
    )
    write_result("entropy_table1.md", "Entropy: first-order expectation versus Smith & Eisner (TACL 2021, Table 1)",
                 "taskset -c 1 python experiments/bench_entropy.py", body)


if __name__ == "__main__":
    main()
