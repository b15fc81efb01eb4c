"""GE gradient (TACL 2021, Section 6.2): first-order expectation + autograd vs the covariance.

The squared-error GE objective of Druck, Mann & McCallum (2009), ``sum_k (t_k - m_k)^2`` with
``m_k = E[# arcs firing constraint k] / # words that can fire it``, over 20 sparse constraint
features: the ``ud_universal`` set of ``parser.constraints`` (UD-guideline (child UPOS, parent
UPOS or ROOT, direction) constraints) without its one dense constraint (function words as
leaves), on the real UPOS of the EWT test sentences, random N(0,1) arc scores, single root,
float64. Its gradient with respect to the arc scores of each sentence, one sentence at a time:

- ours: ``TreeCRF.expect_sparse`` (first-order expectation) and one backward pass, O(N^3);
- Druck & Smith: ``dm_k/ds_e = Cov(f_k, 1_e)`` with the ``(N+1)^2 x (N+1)^2`` arc covariance
  materialised from the two-edge marginals (``parser.structs.reference.tree.ge_gradient_by_covariance``),
  O(N^4) time and memory.

Then ours over length-bucketed batches of 32. Mean ms of CPU time per sentence, one thread.

    taskset -c 1 python experiments/bench_ge_gradient.py   # writes experiments/results/ge_gradient.md
"""

from __future__ import annotations

import argparse

import torch
from common import (
    interleaved_cpu_times,
    length_buckets,
    markdown_table,
    timing_note,
    ud_root,
    write_result,
)

from parser.constraints import UPOS_TAGS, ConstraintSet, load_constraints
from parser.data.conllu_io import read_conllu
from parser.structs import TreeCRF
from parser.structs.reference.tree import ge_gradient_by_covariance

COVARIANCE_LIMIT = 2**30  # bytes of one materialised (N+1)^2 x (N+1)^2 float64 covariance


def constraint_set() -> ConstraintSet:
    full = load_constraints("ud_universal", list(UPOS_TAGS))
    sparse = [c for c in full.constraints if c.name != "function-words-are-leaves"]
    if len(sparse) != 20:
        raise SystemExit(f"expected 20 sparse constraints in ud_universal, got {len(sparse)}")
    return ConstraintSet(sparse, list(UPOS_TAGS), source="ud_universal minus function-words-are-leaves")


def sentences(max_sentences: int | None) -> list[tuple[torch.Tensor, int]]:
    """``(upos [N+1] ids, N)`` of the EWT test sentences (ROOT gets id 0, never a child)."""
    ids = {tag: i for i, tag in enumerate(UPOS_TAGS)}
    treebank = read_conllu(ud_root() / "en_ewt" / "en_ewt-ud-test.conllu")
    out = []
    for sentence in treebank.sentences[:max_sentences]:
        upos = [0] + [ids.get(tag or "X", ids["X"]) for tag in sentence.upos]
        out.append((torch.tensor(upos), len(sentence.upos)))
    return out


def batch_inputs(group, constraints: ConstraintSet, generator: torch.Generator):
    """Padded scores ``[B, S, S]``, lengths, sparse features scaled by 1/count, dense ``[B, S, S, K]``."""
    size = max(n for _, n in group) + 1
    upos = torch.zeros(len(group), size, dtype=torch.long)
    for row, (tags, n) in enumerate(group):
        upos[row, : n + 1] = tags
    lengths = torch.tensor([n for _, n in group])
    scores = torch.randn(len(group), size, size, generator=generator, dtype=torch.float64)
    feats = constraints.features(upos, lengths)
    scale = 1.0 / feats.counts.double().clamp(min=1.0)  # m_k is a proportion
    values = scale[feats.arc_index[:, 0], feats.feature_ids]
    dense = torch.zeros(len(group), size, size, feats.n_features, dtype=torch.float64)
    dense.index_put_((*feats.arc_index.t(), feats.feature_ids), values, accumulate=True)
    return scores, lengths, (feats.arc_index, feats.feature_ids, values, feats.n_features), dense


def ours(scores: torch.Tensor, lengths: torch.Tensor, sparse, targets: torch.Tensor) -> torch.Tensor:
    """``d loss / d scores`` by first-order expectation and autograd."""
    leaf = scores.detach().requires_grad_()
    expected = TreeCRF(leaf, lengths).expect_sparse(*sparse)
    loss = ((targets - expected) ** 2).sum()
    (grad,) = torch.autograd.grad(loss, leaf)
    return grad


def druck_smith(scores: torch.Tensor, n: int, dense: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return ge_gradient_by_covariance(scores[0], n, dense[0], targets, single_root=True)


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--max-sentences", type=int, default=None)
    arguments.add_argument("--repeats", type=int, default=3)
    args = arguments.parse_args()
    torch.set_num_threads(1)
    note = timing_note()
    constraints = constraint_set()
    targets = constraints.targets
    everything = sentences(args.max_sentences)
    kept = [s for s in everything if (s[1] + 1) ** 4 * 8 <= COVARIANCE_LIMIT]
    generator = torch.Generator().manual_seed(0)
    singles = [batch_inputs([s], constraints, generator) for s in kept]
    lengths = [n for _, n in kept]
    batches = []
    for bucket in length_buckets(lengths, 32):  # the same scores, padded into batches
        group = [kept[i] for i in bucket]
        scores, lens, sparse, _ = batch_inputs(group, constraints, torch.Generator().manual_seed(1))
        for row, i in enumerate(bucket):
            n = lengths[i]
            scores[row, : n + 1, : n + 1] = singles[i][0][0]
        batches.append((scores, lens, sparse))

    difference = 0.0
    for (scores, lens, sparse, dense), n in zip(singles, lengths):
        fast = ours(scores, lens, sparse, targets)[0, : n + 1, : n + 1]
        slow = druck_smith(scores, n, dense, targets)[: n + 1, : n + 1]
        difference = max(difference, float((fast - slow).abs().max()))
    seconds = interleaved_cpu_times({
        "druck_smith": lambda: [druck_smith(s, int(le[0]), d, targets) for s, le, _, d in singles],
        "ours": lambda: [ours(s, le, sp, targets) for s, le, sp, _ in singles],
        "batched": lambda: [ours(s, le, sp, targets) for s, le, sp in batches],
    }, repeats=args.repeats)
    per = {k: 1000 * v / len(kept) for k, v in seconds.items()}
    header = ["sentences", "mean length", "max length", "Druck & Smith ms/sent", "ours ms/sent", "speed-up",
              "ours batched ms/sent", "batched speed-up", "max abs gradient difference"]
    row = [len(kept), f"{sum(lengths) / len(lengths):.1f}", max(lengths), f"{per['druck_smith']:.2f}",
           f"{per['ours']:.3f}", f"{per['druck_smith'] / per['ours']:.1f}x", f"{per['batched']:.4f}",
           f"{per['druck_smith'] / per['batched']:.0f}x", f"{difference:.1e}"]
    print(row, flush=True)
    limit_note = (
        f"All {len(everything)} EWT test sentences are used: the largest materialised covariance, "
        f"{(max(lengths) + 1) ** 4 * 8 / 2**20:.0f} MiB at N = {max(lengths)}, is under the 1 GiB limit."
        if len(kept) == len(everything) else
        f"{len(kept)} of {len(everything)} EWT test sentences: those whose materialised covariance "
        f"((N+1)^4 float64) fits in 1 GiB."
    )
    body = (
        "Gradient of the squared-error GE objective (20 sparse UD-guideline constraints, "
        f"{constraints.source}; m_k normalised by the sentence's count of words that can fire k) with respect "
        "to the arc scores, EWT test with its real UPOS, random N(0,1) arc scores, single root, float64. "
        "'Druck & Smith' is `parser.structs.reference.tree.ge_gradient_by_covariance` (two-edge marginals, covariance "
        "materialised); 'ours' is `TreeCRF.expect_sparse` + `torch.autograd.grad`, one sentence at a time "
        "(construction, checks and the backward pass included), and 'batched' the same over length-bucketed "
        "batches of 32. " + limit_note + " The last column is the largest difference between the two gradients.\n\n"
        + note + " Ours needs autograd (one backward pass); the baseline uses none.\n\n" + markdown_table(header, [row])
        + "\n\nZmigrod, Vieira & Cotterell (2021): 9x faster than materialising the covariance."
    )
    command = "taskset -c 1 python experiments/bench_ge_gradient.py"
    if args.max_sentences or args.repeats != 3:
        command += f" --repeats {args.repeats}" + (f" --max-sentences {args.max_sentences}" if args.max_sentences else "")
    write_result("ge_gradient.md", "GE gradient: first-order expectation + autograd versus the covariance",
                 command, body)


if __name__ == "__main__":
    main()
