"""The tree CRF where training spends its time (issue 14): every operation with the scores
requiring grad and its backward included, beside torch-struct 0.5 and SuPar 1.1.4 in the same run.

Operations (``[graph]``: input requires grad, backward of the sum included; ``[no grad]``: the
inference path, for comparison):

  log Z [no grad]            ours under inference_mode, torch-struct under no_grad
  log Z [graph, forward]     log Z with a graph, no backward
  log Z + backward
  GE-like                    marginals with create_graph (peers: autograd.grad(log Z, create_graph)),
                             then a backward of sum(marginals * random weights)
  entropy + backward         (torch-struct: no non-projective entropy)
  KL + backward              to a second CRF whose scores also require grad (torch-struct: none)

Data: the EWT test set (65 length-sorted batches of at most 32) and synthetic N in {50, 100, 250}
with B = 32, N(0, 1) scores; float32 and float64; single and multi root. Timing: CPU time, one
thread, implementations interleaved, median of the repeats (3 for N = 250) (``common.interleaved_cpu_times``).
Then one default biaffine likelihood training step (``bench_step_cost.py``'s runner: forward,
backward, clipping, AdamW step) in sentences/s with our CRF, with torch-struct's log Z swapped in,
and with Dozat & Manning's per-word head cross-entropy.

    taskset -c 1 python experiments/bench_training_path.py   # writes results/training_path.md
    python experiments/bench_training_path.py --quick        # smoke run, prints only
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from baselines import PEERS_LINE, load_baselines
from bench_step_cost import VARIANTS, Runner, prepare
from bench_throughput import to_torch_struct
from common import (
    interleaved_cpu_times,
    length_buckets,
    markdown_table,
    padded_scores,
    sentence_lengths,
    timing_note,
    write_result,
)

from parser.structs import ParserOutput, TreeCRF

SYNCS = """## Host synchronisations left on the training path (GPU)

Per TreeCRF with a graph, in order: the input check (`lengths.tolist()`, the largest score, for
the error message and the span), the smallest score (the span: whether the weights' gap test is
needed), `all_trusted` (one bool: whether any sentence takes the elimination path; it decides
which ops run), and, only when some sentence is untrusted, `nonzero` of the untrusted sentences
(sub-batch sizes). One sentence (`B = 1`): the trust test reads its terms in one `tolist()`. The
backward adds none (`all_trusted` is already a Python bool). Without a graph, log Z adds one:
`certified.all()` (whether the inverse is needed)."""

OPERATIONS = ["log Z [no grad]", "log Z [graph, forward]", "log Z + backward", "GE-like",
              "entropy + backward", "KL + backward"]
IMPLS = ["ours", "torch-struct", "supar"]
DATA = ["ewt", "synthetic-50", "synthetic-100", "synthetic-250"]


def batches_of(data: str, dtype: torch.dtype, *, quick: bool, batch_size: int = 32) -> list[tuple]:
    """``[(scores, other, weights, lengths)]`` for the EWT test set (batches of at most 32) or
    ``synthetic-N`` (one batch of ``batch_size``)."""
    generator = torch.Generator().manual_seed(0)
    if data == "ewt":
        lengths = sentence_lengths("en_ewt", "test")
        buckets = [[lengths[i] for i in bucket] for bucket in length_buckets(lengths, 32)]
        if quick:
            buckets = buckets[::8]
    else:
        n = int(data.split("-")[1])
        buckets = [[n] * (4 if quick else batch_size)]
    out = []
    for bucket in buckets:
        scores, lens = padded_scores(bucket, generator=generator, dtype=dtype)
        other, _ = padded_scores(bucket, generator=generator, dtype=dtype)
        out.append((scores, other, torch.randn(scores.shape, generator=generator, dtype=dtype), lens))
    return out


def _leaf(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_()


def ours(scores, other, weights, lengths, single_root):
    s, o = _leaf(scores), _leaf(other)
    crf = lambda x: TreeCRF(x, lengths, single_root=single_root)

    def no_grad():
        with torch.inference_mode():
            return TreeCRF(scores, lengths, single_root=single_root).log_partition

    return {
        "log Z [no grad]": no_grad,
        "log Z [graph, forward]": lambda: crf(s).log_partition,
        "log Z + backward": lambda: crf(s).log_partition.sum().backward(),
        "GE-like": lambda: (crf(s).marginals * weights).sum().backward(),
        "entropy + backward": lambda: crf(s).entropy().sum().backward(),
        "KL + backward": lambda: crf(s).kl(crf(o)).sum().backward(),
    }


def torch_struct(scores, other, weights, lengths, single_root):
    crf_class, _ = load_baselines()
    ts = to_torch_struct(scores)
    leaf = _leaf(ts)
    ts_weights = to_torch_struct(weights)
    crf = lambda x: crf_class(x, lengths, multiroot=not single_root)

    def no_grad():
        with torch.no_grad():
            return crf(ts).partition

    def ge():
        (mu,) = torch.autograd.grad(crf(leaf).partition.sum(), leaf, create_graph=True)
        (mu * ts_weights).sum().backward()

    return {
        "log Z [no grad]": no_grad,
        "log Z [graph, forward]": lambda: crf(leaf).partition,
        "log Z + backward": lambda: crf(leaf).partition.sum().backward(),
        "GE-like": ge,
    }


def supar(scores, other, weights, lengths, single_root):
    _, crf_class = load_baselines()
    s, o = _leaf(scores), _leaf(other)
    crf = lambda x: crf_class(x, lengths, multiroot=not single_root)

    def ge():
        (mu,) = torch.autograd.grad(crf(s).log_partition.sum(), s, create_graph=True)
        (mu * weights).sum().backward()

    return {
        "log Z [graph, forward]": lambda: crf(s).log_partition,
        "log Z + backward": lambda: crf(s).log_partition.sum().backward(),
        "GE-like": ge,
        "entropy + backward": lambda: crf(s).entropy.sum().backward(),
        "KL + backward": lambda: crf(s).kl(crf(o)).sum().backward(),
    }


MAKERS = {"ours": ours, "torch-struct": torch_struct, "supar": supar}


def operations(data: str, dtype: torch.dtype, single_root: bool, *, repeats: int, quick: bool):
    """Rows ``[data, dtype, root, operation, ours ms, torch-struct ms, SuPar ms, ratios]``."""
    batches = batches_of(data, dtype, quick=quick)
    ops = {impl: [MAKERS[impl](*batch, single_root) for batch in batches] for impl in IMPLS}
    rows = []
    for name in OPERATIONS:
        fns = {impl: (lambda impl=impl, name=name: [op[name]() for op in ops[impl]])
               for impl in IMPLS if name in ops[impl][0]}
        seconds = interleaved_cpu_times(fns, repeats=repeats)
        ms = {impl: 1000 * seconds[impl] for impl in seconds}
        cells = [f"{ms[impl]:.1f}" if impl in ms else "—" for impl in IMPLS]
        ratios = [f"{ms['ours'] / ms[peer]:.2f}" if peer in ms else "—" for peer in IMPLS[1:]]
        row = [data, str(dtype).replace("torch.", ""), "single" if single_root else "multi", name, *cells, *ratios]
        print(row, flush=True)
        rows.append(row)
    return rows


class TorchStructTree:
    """What the likelihood objective reads of a TreeCRF, with torch-struct's log Z: the gold tree's
    score from our CRF (a gather), log Z from ``NonProjectiveDependencyCRF``."""

    def __init__(self, dist: TreeCRF) -> None:
        self.dist, self.scores, self.lengths = dist, dist.scores, dist.lengths

    def log_prob(self, heads, labels=None):
        crf_class, _ = load_baselines()
        ts = to_torch_struct(self.dist.arc_scores.masked_fill(~self.dist.arc_mask, -1e9))
        log_z = crf_class(ts, self.lengths, multiroot=not self.dist.single_root).partition
        return self.dist.score(heads, labels) - log_z


def training_steps(*, n_batches: int, repeats: int, quick: bool,
                   device: torch.device | None = None) -> list[list[object]]:
    """Sentences/s of a default biaffine likelihood step: ours, torch-struct's log Z, per-word CE.
    On the CPU by CPU time; on a GPU by wall time with the GPU synchronised, after a warm-up step
    of each (cuDNN and cuBLAS plans, the allocator's pools)."""
    device = device or torch.device("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        prepared = prepare(Path(tmp) / "prepared.pt", n_batches=n_batches, quick=quick)
    runners = {name: Runner(VARIANTS[variant], prepared, seed=0, device=device)
               for name, variant in (("tree CRF likelihood (ours)", "a"),
                                     ("tree CRF likelihood (torch-struct log Z)", "a"),
                                     ("Dozat & Manning head cross-entropy", "b"))}
    swapped = runners["tree CRF likelihood (torch-struct log Z)"]
    objective = swapped.objective
    swapped.objective = lambda out, batch: objective(ParserOutput(TorchStructTree(out.dist), out.label_scores), batch)
    batches = [batch.to(device) for batch in prepared["batches"]]
    clock = 0 if device.type == "cuda" else 1  # Runner.step returns (wall, CPU) seconds
    if device.type == "cuda":
        for runner in runners.values():
            runner.step(batches[0])
    times = {name: [] for name in runners}
    for _ in range(repeats):  # interleaved per batch, as bench_step_cost does
        for i, batch in enumerate(batches):
            names = list(runners)
            for name in names[i % 3:] + names[: i % 3]:
                times[name].append(runners[name].step(batch)[clock])
    sentences = sum(b.size for b in batches) * repeats
    base = "Dozat & Manning head cross-entropy"
    rows = []
    for name, seconds in times.items():
        ratio = statistics.median(x / y for x, y in zip(seconds, times[base]))
        rows.append([name, f"{sentences / sum(seconds):.1f}", f"{ratio:.3f}"])
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer batches, prints only")
    parser.add_argument("--step-batches", type=int, default=8)
    parser.add_argument("--skip-steps", action="store_true", help="the CRF operations only")
    parser.add_argument("--data", nargs="+", default=DATA, choices=DATA,
                        help="a subset prints its rows only (the results file needs them all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    note = timing_note()
    rows = []
    for data in args.data:
        for dtype in (torch.float32, torch.float64):
            for single_root in (True, False):
                repeats = min(args.repeats, 3) if data == "synthetic-250" else args.repeats  # (run time)
                rows += operations(data, dtype, single_root, repeats=repeats, quick=args.quick)
    step_rows = [] if args.skip_steps else training_steps(
        n_batches=4 if args.quick else args.step_batches, repeats=1 if args.quick else 2, quick=args.quick)
    if args.quick or args.data != DATA:
        return
    header = ["data", "dtype", "root", "operation", "ours ms", "torch-struct ms", "SuPar ms",
              "ours / torch-struct", "ours / SuPar"]
    body = "\n\n".join([
        PEERS_LINE,
        note,
        ("N(0, 1) scores. `[graph]` rows: the input requires grad and the time includes the backward "
         "named; GE-like: marginals with create_graph, then a backward of sum(marginals * weights). "
         "Time per pass over the data (EWT test: all 65 batches; synthetic: one batch of 32)."),
        markdown_table(header, rows),
        ("## Default biaffine likelihood training step\n\nForward, loss, backward, clipping and AdamW "
         f"step on {args.step_batches} EWT training batches of the default token budget, interleaved; "
         "ratio: median per-batch CPU time over the per-word cross-entropy step's."),
        markdown_table(["objective", "sentences/s (CPU)", "step / cross-entropy step"], step_rows)
        if step_rows else "(not run)",
        SYNCS,
        f"Wall time of the run: {time.perf_counter() - start:.0f} s; load average at the end: "
        + ", ".join(f"{v:.1f}" for v in os.getloadavg()) + ".",
    ])
    write_result("training_path.md", "Tree CRF training path beside torch-struct and SuPar",
                 "taskset -c 1 python experiments/bench_training_path.py", body)


if __name__ == "__main__":
    main()
