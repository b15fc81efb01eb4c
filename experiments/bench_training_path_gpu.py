"""The tree CRF's training path on a GPU (issue 14), beside torch-struct 0.5 and SuPar 1.1.4 in the
same run: the operations of ``bench_training_path.py`` (no grad; log Z with a graph; log Z +
backward; GE-like; entropy + backward; KL + backward), float32 and float64, single and multi root,
on the EWT test set (65 length-sorted batches of at most 32) and synthetic N in {50, 100, 250}
with B in {32, 256}; then host synchronisations counted per operation, peak GPU memory, and
sentences/s of a default biaffine likelihood training step (ours, torch-struct's log Z swapped in,
per-word cross-entropy).

Timing: wall time with the GPU synchronised before and after each call, the implementations'
repeats interleaved (A B C A B C ...), medians. Peak memory: ``torch.cuda.max_memory_allocated``
during one call, above what was allocated before it (the inputs).

    python experiments/bench_training_path_gpu.py                 # writes results/training_path_gpu.md
    python experiments/bench_training_path_gpu.py --device cpu --quick   # smoke run, prints only
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import torch
from bench_training_path import MAKERS, OPERATIONS, SYNCS, batches_of, training_steps
from common import RESULTS, interleaved_times, markdown_table, write_result

IMPLS = list(MAKERS)
DATA = [("ewt", 32)] + [(f"synthetic-{n}", b) for n in (50, 100, 250) for b in (32, 256)]


def on_device(data: str, batch_size: int, dtype: torch.dtype, device: torch.device, *, quick: bool):
    """``batches_of``'s batches moved to ``device``."""
    return [tuple(x.to(device) for x in batch)
            for batch in batches_of(data, dtype, quick=quick, batch_size=batch_size)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_mib(fn, device: torch.device) -> float:
    """GPU memory allocated at the peak of one ``fn()`` above what was allocated before it."""
    if device.type != "cuda":
        return float("nan")
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def host_syncs(fn, device: torch.device) -> int | str:
    """How many times ``fn()`` makes the host wait for the GPU (CUDA sync debug mode's warnings)."""
    if device.type != "cuda":
        return "—"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def operations(data: str, batch_size: int, dtype: torch.dtype, single_root: bool,
               device: torch.device, *, repeats: int, quick: bool):
    batches = on_device(data, batch_size, dtype, device, quick=quick)
    ops = {impl: [MAKERS[impl](*batch, single_root) for batch in batches] for impl in IMPLS}
    rows = []
    for name in OPERATIONS:
        fns = {impl: (lambda impl=impl, name=name: [op[name]() for op in ops[impl]])
               for impl in IMPLS if name in ops[impl][0]}
        seconds = interleaved_times(fns, repeats=repeats, clock=time.perf_counter,
                                    settle=lambda: synchronize(device))
        ms = {impl: 1000 * s for impl, s in seconds.items()}
        mib = {impl: peak_mib(fn, device) for impl, fn in fns.items()}
        syncs = host_syncs(ops["ours"][0][name], device)
        fastest_peer = min((ms[p] for p in IMPLS[1:] if p in ms), default=None)
        rows.append([
            data, batch_size, str(dtype).replace("torch.", ""), "single" if single_root else "multi", name,
            *[f"{ms[i]:.2f}" if i in ms else "—" for i in IMPLS],
            f"{ms['ours'] / fastest_peer:.2f}" if fastest_peer else "—",
            *[f"{mib[i]:.0f}" if i in mib else "—" for i in IMPLS],
            syncs,
        ])
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer batches, prints only")
    parser.add_argument("--step-batches", type=int, default=16)
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for training_path_gpu.md")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (use --device cpu for a smoke run)")
    start = time.perf_counter()
    rows = []
    for data, batch_size in DATA[:3] if args.quick else DATA:
        for dtype in (torch.float32, torch.float64):
            for single_root in (True, False):
                rows += operations(data, batch_size, dtype, single_root, device,
                                   repeats=2 if args.quick else args.repeats, quick=args.quick)
    step_rows = training_steps(device=device, n_batches=4 if args.quick else args.step_batches,
                               repeats=1 if args.quick else 3, quick=args.quick)
    if args.quick:
        return
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    header = ["data", "B", "dtype", "root", "operation", "ours ms", "torch-struct ms", "SuPar ms",
              "ours / faster peer", "ours MiB", "torch-struct MiB", "SuPar MiB", "host syncs (ours)"]
    body = "\n\n".join([
        ("Wall time per pass over the data (EWT test: all 65 batches; synthetic: one batch), the GPU "
         "synchronised around every call, implementations interleaved, median of "
         f"{args.repeats} repeats after a warm-up. N(0, 1) scores. `[graph]` rows: the input requires "
         "grad and the time includes the backward named. MiB: peak GPU memory of one pass above its "
         "inputs. Host syncs: CUDA sync-debug warnings during one batch of ours (the first, for EWT)."),
        markdown_table(header, rows),
        ("## Default biaffine likelihood training step on the GPU\n\nForward, loss, backward, "
         f"clipping and AdamW step on {args.step_batches} EWT training batches of the default token "
         "budget, 3 rounds, interleaved per batch; ratio: median per-batch wall time over the per-word "
         "cross-entropy step's."),
        markdown_table(["objective", "sentences/s", "step / cross-entropy step"], step_rows),
        SYNCS,
        f"Wall time of the run: {time.perf_counter() - start:.0f} s.",
    ])
    write_result("training_path_gpu.md", "Tree CRF training path on a GPU, beside torch-struct and SuPar",
                 "python experiments/bench_training_path_gpu.py", body, directory=args.out,
                 machine_text=f"{gpu}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
