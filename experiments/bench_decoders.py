"""Decoding and projective-CRF cost on the whole EWT test set, beside SuPar's projective CRF.

The same random N(0, 1) arc scores as bench_throughput.py (2,077 EWT test sentences, batches of 32
by length, one thread). Decoders: the maximum spanning tree, the best projective tree (Eisner),
Eisner plus the UD punct/cc rule (the EWT test words' own UPOS mark which words move), SuPar's
Eisner (``DependencyCRF.argmax``, autograd through its max-semiring inside pass). Distributions: log
Z + marginals of ``ProjectiveTreeCRF`` and of SuPar's ``DependencyCRF`` (both inside algorithms
with autograd), and of the non-projective ``TreeCRF`` for scale. Exactness: the largest difference
between our Eisner tree's score and SuPar's, and between the two projective log Z.

    python experiments/bench_decoders.py            # writes experiments/results/decoders.md
"""

from __future__ import annotations

import argparse

import torch
from baselines import load_supar_projective
from bench_throughput import ewt_batches
from common import interleaved_cpu_times, markdown_table, timing_note, write_result

from parser.data.conllu_io import read_conllu
from parser.data.paths import resolve_ud_root, treebank_file
from parser.structs import ProjectiveTreeCRF, TreeCRF, attach_to_units


def unit_marks(batches) -> list[torch.Tensor]:
    """``[B, N+1]`` bool per batch: PUNCT and CCONJ words of EWT test, in the batches' order."""
    sentences = read_conllu(treebank_file(resolve_ud_root(None), "en_ewt", "test")).sentences
    tags = [list(s.upos) for s in sentences]
    by_length: dict[int, list[list[str]]] = {}
    for sentence in tags:
        by_length.setdefault(len(sentence), []).append(sentence)
    marks = []
    for scores, _, lengths in batches:
        mark = torch.zeros(scores.shape[0], scores.shape[1], dtype=torch.bool)
        for b, n in enumerate(lengths.tolist()):
            sentence = by_length[n].pop()  # a sentence of this length (the batches hold the same lengths)
            mark[b, 1 : n + 1] = torch.tensor([t in ("PUNCT", "CCONJ") for t in sentence])
        marks.append(mark)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dependency_crf = load_supar_projective()
    batches = ewt_batches(torch.float32)
    marks = unit_marks(batches)

    def run(fn):
        return lambda: [fn(s, l, m) for (s, _, l), m in zip(batches, marks)]

    def supar_marginals(s, l, m):
        leaf = s.clone().requires_grad_()
        return dependency_crf(leaf, l).marginals

    def projective_marginals(s, l, m):
        return ProjectiveTreeCRF(s, l).arc_marginals

    def supar_argmax(s, l, m):
        with torch.enable_grad():
            return dependency_crf(s.clone().requires_grad_(), l).argmax

    decoders = {
        "maximum spanning tree": run(lambda s, l, m: TreeCRF(s, l).argmax()),
        "Eisner (ours)": run(lambda s, l, m: TreeCRF(s, l).argmax(projective=True)),
        "Eisner + punct/cc rule (ours)": run(lambda s, l, m: attach_to_units(TreeCRF(s, l).argmax(projective=True), l, m)),
        "Eisner (SuPar)": run(supar_argmax),
    }
    distributions = {
        "projective log Z + marginals (ours)": run(projective_marginals),
        "projective log Z + marginals (SuPar)": run(supar_marginals),
        "non-projective log Z + marginals (ours, TreeCRF)": run(lambda s, l, m: TreeCRF(s, l).marginals),
    }
    with torch.inference_mode(False):
        seconds = interleaved_cpu_times({**decoders, **distributions}, repeats=args.repeats)
    gap_tree = gap_z = 0.0
    for scores, _, lengths in batches:
        ours = TreeCRF(scores.double(), lengths).argmax(projective=True)
        theirs = supar_argmax(scores.double(), lengths, None)
        crf = TreeCRF(scores.double(), lengths)
        gap_tree = max(gap_tree, float((crf.score(ours) - crf.score(theirs)).abs().max()))
        z_ours = ProjectiveTreeCRF(scores.double(), lengths).log_partition
        z_theirs = dependency_crf(scores.double(), lengths).log_partition.detach()
        gap_z = max(gap_z, float((z_ours - z_theirs).abs().max()))
    rows = [[name, f"{1000 * seconds[name]:.1f}"] for name in {**decoders, **distributions}]
    body = (
        "float32 scores, ms per pass over EWT test (2,077 sentences, batches of 32), median of "
        f"{args.repeats} interleaved rounds, one thread:\n\n"
        + markdown_table(["operation", "ms"], rows)
        + f"\n\nLargest |score(our Eisner tree) - score(SuPar's)|: {gap_tree:.1e} (float64 scores); "
        f"largest |log Z ours - SuPar's| for projective trees: {gap_z:.1e}.\n\n" + timing_note()
    )
    write_result("decoders.md", "Decoders and the projective CRF on EWT test",
                 "taskset -c 1 python experiments/bench_decoders.py", body)


if __name__ == "__main__":
    main()
