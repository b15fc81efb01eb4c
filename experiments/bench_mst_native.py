"""The compiled tree decoders against the pure-torch ones: the maximum spanning tree and Eisner's
best projective tree (the UD punct rule's fallback, ``model.projective``), on the sentence
lengths of EWT test (2,077 sentences in batches of 32 by length, one thread), all with the root
constraint.

Two kinds of scores: random N(0, 1) arcs (the greedy heads are rarely a tree: Chu-Liu/Edmonds
contracts on almost every sentence) and trained-like arcs, the gold head of each word of EWT test
raised by 4 over N(0, 1) noise (most greedy heads form a tree, as a trained parser's do). Each
compiled decoder gives its torch twin's trees (checked here, and in
tests/structs/decoding/test_mst_native.py and test_eisner_native.py).

    PYTHONPATH=. taskset -c 1 python experiments/bench_mst_native.py   # writes experiments/results/mst_native.md
"""

from __future__ import annotations

import argparse

import torch
from common import interleaved_cpu_times, length_buckets, markdown_table, timing_note, write_result

from parser.data.conllu_io import read_conllu
from parser.data.paths import resolve_ud_root, treebank_file
from parser.structs import eisner, maximum_spanning_tree

DECODERS = {"maximum spanning tree": maximum_spanning_tree, "Eisner": eisner}


def batches(kind: str, *, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    sentences = read_conllu(treebank_file(resolve_ud_root(None), "en_ewt", "test")).sentences
    lengths = [len(s) for s in sentences]
    generator = torch.Generator().manual_seed(seed)
    out = []
    for bucket in length_buckets(lengths, 32):
        n = max(lengths[i] for i in bucket)
        scores = torch.randn(len(bucket), n + 1, n + 1, generator=generator)
        if kind == "trained-like":
            for b, i in enumerate(bucket):
                heads = torch.tensor(sentences[i].heads)
                scores[b, torch.arange(1, len(heads) + 1), heads] += 4.0
        out.append((scores, torch.tensor([lengths[i] for i in bucket])))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for name, decoder in DECODERS.items():
        for kind in ("trained-like", "random"):
            data = batches(kind)
            for scores, lengths in data:
                assert torch.equal(decoder(scores, lengths, single_root=True),
                                   decoder(scores, lengths, single_root=True, native=False))

            def decode(native: bool, data=data, decoder=decoder) -> None:
                for scores, lengths in data:
                    decoder(scores, lengths, single_root=True, native=native)

            times = interleaved_cpu_times({"compiled": lambda: decode(True),
                                           "torch": lambda: decode(False)}, repeats=args.repeats)
            rows.append([name, kind, 1000 * times["torch"], 1000 * times["compiled"],
                         times["torch"] / times["compiled"]])
    body = markdown_table(["decoder", "scores", "torch ms (all of EWT test)", "compiled ms", "speed-up"],
                          rows)
    write_result("mst_native.md", "The compiled tree decoders (issue 47)",
                 "PYTHONPATH=. taskset -c 1 python experiments/bench_mst_native.py",
                 f"{__doc__.split(chr(10) + chr(10))[1]}\n\n{body}\n\n{timing_note()}")
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
