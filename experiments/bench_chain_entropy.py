"""Entropy gradient of a linear-chain CRF: Mann & McCallum (2007) lattices, plain autograd, and the
covariance method of Jiao et al. (2006), for n (positions) in {10, 25, 50, 100} and s (states) in
{17, 50}.

Random N(0, 1) scores ``[B, n, s, s]``, float32, a batch of a few full-length sequences, one thread,
median wall time over repeats (after a warm-up). Each method is also given as a multiple of one
forward-backward pass (the pairwise marginals) and of one supervised gradient (log Z and its
backward). Mann & McCallum report their method at about 1.5x the cost of supervised training,
against O(n^2 s^3) for Jiao et al.

    python experiments/bench_chain_entropy.py     # writes experiments/results/chain_entropy.md
"""

from __future__ import annotations

import argparse
from functools import partial

import torch
from common import markdown_table, time_call, write_result

from parser.structs import LinearChainCRF
from parser.structs.chain.entropy import entropy_gradient_mann_mccallum
from parser.structs.reference.chain import entropy_gradient_jiao


def forward_backward(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return LinearChainCRF(scores, lengths).marginals


def supervised_gradient(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    leaf = scores.detach().requires_grad_()
    return torch.autograd.grad(LinearChainCRF(leaf, lengths).log_partition.sum(), leaf)[0]


def autograd_gradient(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    leaf = scores.detach().requires_grad_()
    return torch.autograd.grad(LinearChainCRF(leaf, lengths).entropy().sum(), leaf)[0]


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--batch", type=int, default=4, help="sequences per call")
    arguments.add_argument("--repeats", type=int, default=5, help="timed runs of the fast methods")
    arguments.add_argument("--jiao-repeats", type=int, default=3, help="timed runs of Jiao et al.")
    args = arguments.parse_args()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    rows = []
    for states in (17, 50):
        for positions in (10, 25, 50, 100):
            scores = torch.randn(args.batch, positions, states, states, generator=generator)
            lengths = torch.full((args.batch,), positions)
            fb, sup, mm, auto, jiao = (
                time_call(partial(fn, scores, lengths), repeats=repeats)
                for fn, repeats in (
                    (forward_backward, args.repeats),
                    (supervised_gradient, args.repeats),
                    (entropy_gradient_mann_mccallum, args.repeats),
                    (autograd_gradient, args.repeats),
                    (entropy_gradient_jiao, args.jiao_repeats),
                )
            )
            reference = entropy_gradient_mann_mccallum(scores.double(), lengths)
            error = max(
                float((fn(scores, lengths).double() - reference).abs().max())
                for fn in (entropy_gradient_mann_mccallum, autograd_gradient, entropy_gradient_jiao)
            )
            rows.append(
                [positions, states, 1e3 * fb, 1e3 * mm, 1e3 * auto, 1e3 * jiao]
                + [mm / fb, auto / fb, jiao / fb, mm / sup, jiao / mm, auto / mm, f"{error:.1e}"]
            )
            print(rows[-1], flush=True)
    header = [
        "n", "s", "fwd-bwd ms", "M&M ms", "autograd ms", "Jiao ms",
        "M&M / fwd-bwd", "autograd / fwd-bwd", "Jiao / fwd-bwd", "M&M / supervised grad",
        "Jiao / M&M", "autograd / M&M", "max abs err (float32 vs float64 M&M)",
    ]  # fmt: skip
    body = (
        f"Batch of {args.batch} full-length sequences per call, float32, random N(0, 1) scores; "
        f"median of {args.repeats} runs ({args.jiao_repeats} for Jiao et al.) after a warm-up; "
        "times in milliseconds per call. fwd-bwd = pairwise marginals by forward-backward; "
        "supervised grad = log Z and its backward (autograd); M&M = Mann & McCallum 2007 entropy "
        "lattices (O(n s^2)); autograd = backward through entropy = log Z - <marginals, scores>; "
        "Jiao = covariance method of Jiao et al. 2006 (O(n^2 s^3)). One run on a shared, noisy "
        "machine: read the ratios, not the absolute times.\n\n" + markdown_table(header, rows)
    )
    command = "python experiments/bench_chain_entropy.py"
    if args.batch != 4 or args.repeats != 5 or args.jiao_repeats != 3:
        command += (
            f" --batch {args.batch} --repeats {args.repeats} --jiao-repeats {args.jiao_repeats}"
        )
    write_result("chain_entropy.md", "Linear-chain CRF entropy gradient", command, body)


if __name__ == "__main__":
    main()
