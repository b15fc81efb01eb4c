"""Brute-force references for GE: an independent reading of each constraint on one arc, and
the expected number of firing arcs by enumerating every tree."""

from __future__ import annotations

import torch

from tests.objectives.brute_ref import probabilities


def fires(constraint, tags, dep, head):
    """Independent reading of one constraint on arc (dep, head); positions 1-based."""
    if not is_child(constraint, tags, dep):
        return False
    if constraint.rules is not None:
        return (tags[dep - 1], "ROOT" if head == 0 else tags[head - 1]) in constraint.rules
    if constraint.to_root:
        return head == 0
    if head == 0 or (constraint.parent is not None and tags[head - 1] not in constraint.parent):
        return False
    if constraint.direction == "left" and not head < dep:
        return False
    if constraint.direction == "right" and not head > dep:
        return False
    if constraint.distance is not None:
        low, high = constraint.distance
        if abs(head - dep) < low or (high is not None and abs(head - dep) > high):
            return False
    return True


def is_child(constraint, tags, dep):
    """Whether word ``dep`` (1-based) is one the constraint counts: its UPOS is a child UPOS and,
    with a context, the word before it (not ROOT) has an ``after`` UPOS."""
    if tags[dep - 1] not in constraint.child:
        return False
    if getattr(constraint, "position", "any") == "first" and dep != 1:
        return False
    if getattr(constraint, "position", "any") == "last" and dep != len(tags):
        return False
    return constraint.after is None or (dep > 1 and tags[dep - 2] in constraint.after)


def fires_in_tree(constraint, tags, dep, tree):
    """``fires`` on word ``dep``'s arc in ``tree`` (heads of words 1..n), plus a second-order
    constraint's test of the head's own head (ROOT or a grandparent UPOS)."""
    head = tree[dep - 1]
    if not fires(constraint, tags, dep, head):
        return False
    if getattr(constraint, "grandparent", None) is None:
        return True
    grand = tree[head - 1]
    return ("ROOT" if grand == 0 else tags[grand - 1]) in constraint.grandparent


def brute_expectations(scores, constraints, sentences):
    """``([K] expected firing arcs, [K] child counts)`` summed over the sentences."""
    k = len(constraints.constraints)
    expected, counts = torch.zeros(k, dtype=torch.float64), torch.zeros(k, dtype=torch.float64)
    for b, tags in enumerate(sentences):
        n = len(tags)
        items, p = probabilities(scores[b, : n + 1, : n + 1], n, single_root=True)
        for j, c in enumerate(constraints.constraints):
            counts[j] += sum(is_child(c, tags, d) for d in range(1, n + 1))
            per_tree = torch.tensor(
                [sum(fires_in_tree(c, tags, d, tree) for d in range(1, n + 1)) for tree, _ in items],
                dtype=torch.float64,
            )
            expected = expected.index_add(0, torch.tensor([j]), (p * per_tree).sum().view(1))
    return expected, counts


def divergences(model, target, criterion, eps=1e-6):
    """``[K]`` the GE penalty of each constraint, written out independently of the objective:
    ``(t - m)^2`` (squared) or ``KL(Bernoulli(t) || Bernoulli(m))`` with ``m`` clamped to
    ``[eps, 1 - eps]`` (kl)."""
    if criterion == "squared":
        return (target - model) ** 2
    m = model.clamp(eps, 1 - eps)
    return (torch.xlogy(target, target) - target * m.log()
            + torch.xlogy(1 - target, 1 - target) - (1 - target) * (1 - m).log())  # fmt: skip
