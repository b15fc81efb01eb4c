"""to_output: scores -> tree CRF. Compared with brute-force enumeration of trees."""

from __future__ import annotations

import pytest
import torch

from parser.models import EdgeScores, to_output
from tests.structs.brute import enumerate_distribution


def scores(lengths: list[int], n_rels: int, *, seed: int) -> EdgeScores:
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths) + 1
    arcs = torch.randn(len(lengths), width, width, generator=gen)
    labels = torch.randn(len(lengths), width, width, n_rels, generator=gen)
    return EdgeScores(arcs=arcs, labels=labels)


def test_bad_mode_or_shape_raises() -> None:
    edge = scores([2], 3, seed=0)
    with pytest.raises(ValueError, match="labels='both'.*joint, classifier"):
        to_output(edge, torch.tensor([2]), labels="both")
    with pytest.raises(ValueError, match="edge_scores.labels"):
        to_output(EdgeScores(edge.arcs, edge.labels[:, :2]), torch.tensor([2]), labels="joint")


@pytest.mark.parametrize("single_root", [True, False])
def test_joint_and_classifier_match_brute_force(single_root: bool) -> None:
    pytest.importorskip("parser.structs.tree.crf")
    lengths = [3, 1, 4]
    edge = scores(lengths, 3, seed=1)
    length_tensor = torch.tensor(lengths)

    joint = to_output(edge, length_tensor, labels="joint", single_root=single_root)
    assert joint.label_scores is None
    merged = (edge.arcs[..., None] + edge.labels).logsumexp(-1)  # labeled multigraph
    classifier = to_output(edge, length_tensor, labels="classifier", single_root=single_root)
    assert classifier.label_scores is edge.labels
    unlabeled = to_output(
        EdgeScores(edge.arcs), length_tensor, labels="joint", single_root=single_root
    )
    assert unlabeled.label_scores is None
    for b, n in enumerate(lengths):
        _, _, log_z = enumerate_distribution(merged[b].double(), n, single_root=single_root)
        assert joint.dist.log_partition[b].item() == pytest.approx(log_z.item(), abs=1e-4)
        _, _, log_z = enumerate_distribution(edge.arcs[b].double(), n, single_root=single_root)
        assert classifier.dist.log_partition[b].item() == pytest.approx(log_z.item(), abs=1e-4)
        assert unlabeled.dist.log_partition[b].item() == pytest.approx(log_z.item(), abs=1e-4)


def test_projective_crf_kind() -> None:
    from parser.structs import ProjectiveTreeCRF

    edge = scores([4, 2], 3, seed=1)
    out = to_output(edge, torch.tensor([4, 2]), labels="classifier", crf="projective")
    assert isinstance(out.dist, ProjectiveTreeCRF) and out.label_scores is edge.labels
    assert isinstance(to_output(EdgeScores(edge.arcs), torch.tensor([4, 2]), crf="projective").dist, ProjectiveTreeCRF)
    with pytest.raises(ValueError, match="unlabeled arcs"):
        to_output(edge, torch.tensor([4, 2]), labels="joint", crf="projective")
    with pytest.raises(ValueError, match="crf='eisner'"):
        to_output(edge, torch.tensor([4, 2]), crf="eisner")
