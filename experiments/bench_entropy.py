"""Table 1 of Zmigrod, Vieira & Cotterell (TACL 2021), reproduced on the UD test sets.

Shannon entropy of the tree distribution of each test sentence (random N(0,1) arc scores, single
root, float64), one sentence at a time: by first-order expectation (``TreeCRF.entropy``: one LU,
the inverse Laplacian and the marginals, O(N^3)) versus Smith & Eisner's method as published
(``parser.structs.reference.tree.smith_eisner_entropy``: N matrix-tree determinants per sentence, O(N^4));
then our batched path (the same sentences, length-bucketed batches of at most 32). Mean milliseconds of
CPU time per sentence and speed-ups, one thread. The paper reports 4.1x (Finnish) to 15.1x
(Arabic).

    taskset -c 1 python experiments/bench_entropy.py     # writes experiments/results/entropy_table1.md
"""

from __future__ import annotations

import argparse

import torch
from common import (
    TEST_SETS,
    interleaved_cpu_times,
    length_buckets,
    markdown_table,
    random_scores,
    sentence_lengths,
    timing_note,
    write_result,
)

from parser.structs import TreeCRF
from parser.structs.reference.tree import smith_eisner_entropy

MAX_RATIO = 1.25  # batches of at most 32 sentences within 25% of each other's length
PAPER = {"fi_tdt": "4.1x (Finnish, mean length 9.2)", "ar_padt": "15.1x (Arabic, mean length 36.1)"}


def batches_of(items: list[tuple[torch.Tensor, int]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The same sentences, padded into length-bucketed batches of 32 (``[B, N+1, N+1]``)."""
    lengths = [n for _, n in items]
    out = []
    for bucket in length_buckets(lengths, 32, max_ratio=MAX_RATIO):
        size = max(lengths[i] for i in bucket) + 1
        scores = torch.zeros(len(bucket), size, size, dtype=torch.float64)
        for row, i in enumerate(bucket):
            n = lengths[i]
            scores[row, : n + 1, : n + 1] = items[i][0][0]
        out.append((scores, torch.tensor([lengths[i] for i in bucket])))
    return out


def run_set(treebank: str, *, max_sentences: int | None, repeats: int) -> list[object]:
    lengths = sentence_lengths(treebank, "test")[:max_sentences]
    generator = torch.Generator().manual_seed(0)
    items = [(random_scores(n, generator=generator), n) for n in lengths]
    tensors = [(scores, torch.tensor([n])) for scores, n in items]
    batches = batches_of(items)
    with torch.inference_mode():
        fast_values = torch.cat([TreeCRF(s, lens).entropy() for s, lens in tensors])
        slow_values = torch.stack([smith_eisner_entropy(s[0], n, single_root=True) for s, n in items])
        batched_values = torch.cat([TreeCRF(s, lens).entropy() for s, lens in batches])
        order = [i for bucket in length_buckets(lengths, 32, max_ratio=MAX_RATIO) for i in bucket]
        disagreement = max(float((fast_values - slow_values).abs().max()),
                           float((batched_values - fast_values[order]).abs().max()))
        seconds = interleaved_cpu_times({
            "smith_eisner": lambda: [smith_eisner_entropy(s[0], n, single_root=True) for s, n in items],
            "first_order": lambda: [TreeCRF(s, lens).entropy() for s, lens in tensors],
            "batched": lambda: [TreeCRF(s, lens).entropy() for s, lens in batches],
        }, repeats=repeats)
    slow, fast, batched = (1000 * seconds[k] / len(lengths) for k in ("smith_eisner", "first_order", "batched"))
    row = [treebank, len(lengths), f"{sum(lengths) / len(lengths):.1f}", f"{slow:.3f}", f"{fast:.3f}",
           f"{slow / fast:.1f}x", f"{batched:.4f}", f"{slow / batched:.0f}x", PAPER.get(treebank, "—"),
           f"{disagreement:.1e}"]
    print(row, flush=True)
    return row


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--max-sentences", type=int, default=None, help="first K sentences per set")
    arguments.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds (median)")
    arguments.add_argument("--sets", nargs="*", default=TEST_SETS)
    args = arguments.parse_args()
    torch.set_num_threads(1)
    note = timing_note()
    rows = [run_set(treebank, max_sentences=args.max_sentences, repeats=args.repeats) for treebank in args.sets]
    header = ["test set", "sentences", "mean length", "Smith & Eisner ms/sent", "first-order ms/sent",
              "speed-up", "batched ms/sent", "batched speed-up", "paper's speed-up", "max abs H difference"]
    body = (
        "Random N(0,1) arc scores, single-root trees, float64. 'Smith & Eisner' is "
        "`parser.structs.reference.tree.smith_eisner_entropy` (N determinants per sentence, O(N^4)); 'first-order' is "
        "`TreeCRF(scores, lengths).entropy()` called on one sentence at a time (construction, input checks, LU, "
        "inverse, marginals, the exactness test of every sentence included); 'batched' is the same over "
        "length-bucketed batches of at most 32 sentences, a new batch starting where a sentence is over 1.25 times "
        "as long as its batch's first (without that cap, ar_padt's last batch pads 97- to 187-word sentences to 187 "
        "and costs 4x what they cost alone). The last column is the largest disagreement between the three entropies "
        "over the set (nats). Mean lengths are those of the UD test sets here, not of the paper's treebanks.\n\n"
        + note + " Both under `torch.inference_mode()`.\n\n" + markdown_table(header, rows)
        + "\n\nZmigrod, Vieira & Cotterell (2021), Table 1: 4.1x (Finnish, mean length 9.2) to 15.1x "
        "(Arabic, 36.1) over Smith & Eisner, one sentence at a time."
    )
    command = "taskset -c 1 python experiments/bench_entropy.py"
    if args.max_sentences or args.repeats != 3 or args.sets != TEST_SETS:
        command += f" --repeats {args.repeats}" + (f" --max-sentences {args.max_sentences}" if args.max_sentences else "")
    write_result("entropy_table1.md", "Entropy: first-order expectation versus Smith & Eisner (TACL 2021, Table 1)",
                 command, body)


if __name__ == "__main__":
    main()
