"""What bounds the tree CRF's training path on CPU (issue 14): log Z + backward on the EWT test
set beside torch-struct 0.5 and two lower bounds of any float64 matrix-tree implementation.

  ours           TreeCRF(scores).log_partition.sum().backward()
  torch-struct   NonProjectiveDependencyCRF(...).partition.sum().backward() (float32 LU when the
                 input is float32)
  float64 floor  the least a float64 matrix-tree log Z + backward does, written here as one
                 custom Function: mask, shift, exp, the Laplacian, one LAPACK getrf + getrs for
                 log det and the inverse, the marginals, and the backward's product. No trust
                 test, no fallback for ill-conditioned sentences, no input checks: not exact in
                 general, only a bound on what an exact path can cost.
  LAPACK alone   getrf + getrs of the float64 Laplacians (the floor's linear algebra, no
                 elementwise work); torch-struct's float32 LAPACK (getrf for logdet, getrs in its
                 backward) for comparison.

    taskset -c 1 python experiments/bench_training_floor.py    # writes results/training_floor.md
    python experiments/bench_training_floor.py --quick         # smoke run, prints only
"""

from __future__ import annotations

import argparse
from functools import cache

import torch
from baselines import load_baselines
from bench_throughput import to_torch_struct
from bench_training_path import batches_of
from common import interleaved_cpu_times, markdown_table, timing_note, write_result
from torch.autograd import Function

from parser.structs import TreeCRF
from parser.structs.common import off_arc_mask

READING = """## What this says

LAPACK is a quarter of torch-struct's time or less: at EWT sizes (65 batches, N from 1 to 81) the
training path is elementwise passes and per-op costs. The float64 floor, which keeps only what
any float64 matrix-tree gradient must do (its per-size constants built once), is the `floor / ts`
column; ours (`ours / ts`) adds the trust test (about seven passes over the word rows and twenty
small ops), the input checks and its Python layers. Where `floor / ts` is below 0.8, float64 alone
does not rule out issue 14's target (<= 0.8x torch-struct): the gap between the two columns is
what an exact path pays for its exactness test and its layers, and what would have to shrink. The
machine was shared while these ran (see the load above), and two runs of the same code moved
ratios by up to 0.1, so read the columns side by side, not across files."""


@cache
def _constants(size: int, single_root: bool) -> tuple[torch.Tensor, ...]:
    """Per-size constants, built once (so the floor pays no per-call set-up): the Laplacian's
    head signs, the solve's right-hand side, the marginals' spread, word positions 1..N."""
    n = size - 1
    signs = torch.full((size,), -1.0, dtype=torch.float64)
    signs[0] = 1.0
    rhs = torch.cat([torch.zeros(n, 1, dtype=torch.float64), -torch.eye(n, dtype=torch.float64)], 1)
    spread = -torch.ones(size, dtype=torch.float64)
    if single_root:
        rhs[0, 0], rhs[0, 1] = 1.0, 0.0
        spread[0] = 0.0
    return signs, rhs, spread, torch.arange(1, size)


class _FloorLogPartition(Function):
    """float64 log Z of ``scores [B, dep, head]`` (masked off arcs, one LU), backward = marginals."""

    @staticmethod
    def forward(ctx, scores, lengths, single_root):
        size = scores.shape[1]
        n = size - 1
        rows = scores.detach().narrow(1, 1, n).to(torch.float64)
        rows.masked_fill_(off_arc_mask(lengths, size).narrow(1, 1, n), float("-inf"))
        shift = rows.amax(-1).nan_to_num_(neginf=0.0)
        weights = rows.sub_(shift.unsqueeze(-1)).exp_()
        signs, rhs, spread, positions = _constants(size, single_root)
        table = weights * signs
        incoming = weights.narrow(2, 1, n).sum(-1) if single_root else weights.sum(-1)
        table.diagonal(1, dim1=-2, dim2=-1).copy_(incoming.add_(lengths.unsqueeze(-1) < positions))
        if single_root:
            table.select(2, 1).copy_(weights.select(2, 0))
        solved, lu, _, _ = torch.ops.aten._linalg_solve_ex(table.narrow(2, 1, n).mT, rhs)
        diag = solved.diagonal(1, dim1=-2, dim2=-1).unsqueeze(-1).clone()  # (solved is overwritten)
        ctx.save_for_backward(weights.mul_(solved.addcmul_(diag, spread)))
        ctx.dtype = scores.dtype
        return lu.diagonal(dim1=-2, dim2=-1).abs().log().sum(-1) + shift.sum(-1)

    @staticmethod
    def backward(ctx, grad):
        (marginal_rows,) = ctx.saved_tensors
        size = marginal_rows.shape[2]
        out = marginal_rows.new_empty(marginal_rows.shape[0], size, size, dtype=ctx.dtype)
        out.select(1, 0).zero_()
        torch.mul(marginal_rows, grad[:, None, None], out=out.narrow(1, 1, size - 1))
        return out, None, None


def laplacians(scores: torch.Tensor, lengths: torch.Tensor, single_root: bool) -> torch.Tensor:
    """The float64 Laplacians (transposed, as factored) of one batch, built once, for LAPACK alone."""
    crf = TreeCRF(scores.double(), lengths, single_root=single_root)
    return crf._lu.lap.mT.contiguous()


def timings(dtype: torch.dtype, single_root: bool, crf_class, *, repeats: int, quick: bool) -> dict[str, float]:
    """ms of CPU time per pass over EWT test for each implementation (interleaved medians)."""
    batches = batches_of("ewt", dtype, quick=quick)
    leaves = [(s.detach().clone().requires_grad_(), lens) for s, _, _, lens in batches]
    ts_leaves = [(to_torch_struct(s).requires_grad_(), lens) for s, _, _, lens in batches]
    laps = [laplacians(s, lens, single_root) for s, _, _, lens in batches]
    ts_laps = [lap.to(dtype) for lap in laps]
    eyes = [torch.eye(lap.shape[-1], dtype=torch.float64) for lap in laps]
    ts_eyes = [eye.to(dtype) for eye in eyes]

    def ours():
        for s, lens in leaves:
            TreeCRF(s, lens, single_root=single_root).log_partition.sum().backward()

    def torch_struct():
        for s, lens in ts_leaves:
            crf_class(s, lens, multiroot=not single_root).partition.sum().backward()

    def floor():
        for s, lens in leaves:
            _FloorLogPartition.apply(s, lens, single_root).sum().backward()

    def lapack64():
        for lap, eye in zip(laps, eyes):
            torch.ops.aten._linalg_solve_ex(lap, eye)

    def lapack_ts():
        for lap, eye in zip(ts_laps, ts_eyes):
            lu, pivots, _ = torch.linalg.lu_factor_ex(lap)
            torch.linalg.lu_solve(lu, pivots, eye)

    fns = {"ours": ours, "torch-struct": torch_struct, "float64 floor": floor,
           "LAPACK float64": lapack64, "LAPACK torch-struct": lapack_ts}
    return {k: 1000 * v for k, v in interleaved_cpu_times(fns, repeats=repeats).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    crf_class, _ = load_baselines()
    note = timing_note()
    rows = []
    for dtype in (torch.float32, torch.float64):
        for single_root in (True, False):
            ms = timings(dtype, single_root, crf_class, repeats=args.repeats, quick=args.quick)
            ts = ms["torch-struct"]
            row = [str(dtype).replace("torch.", ""), "single" if single_root else "multi",
                   *(f"{v:.1f}" for v in ms.values()), f"{ms['ours'] / ts:.2f}", f"{ms['float64 floor'] / ts:.2f}",
                   f"{ms['LAPACK float64'] / ts:.2f}"]
            print(row, flush=True)
            rows.append(row)
    if args.quick:
        return
    header = ["dtype", "root", "ours ms", "torch-struct ms", "float64 floor ms", "LAPACK float64 ms",
              "LAPACK torch-struct ms", "ours / ts", "floor / ts", "LAPACK float64 / ts"]
    body = "\n\n".join([
        note,
        ("EWT test, 65 length-sorted batches of at most 32, N(0, 1) scores; log Z + backward, the "
         "likelihood's gradient. `float64 floor`: the least any float64 matrix-tree path does (see the "
         "script's docstring: no trust test, no fallback, not exact in general). `LAPACK float64`: its "
         "getrf + getrs alone; `LAPACK torch-struct`: torch-struct's getrf + getrs in its input dtype."),
        markdown_table(header, rows),
        READING,
    ])
    write_result("training_floor.md", "What bounds the tree CRF's training path on CPU",
                 "taskset -c 1 python experiments/bench_training_floor.py", body)


if __name__ == "__main__":
    main()
