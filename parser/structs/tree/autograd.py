"""Autograd for the tree CRF without a graph of small ops: log Z and the marginals as two custom
``torch.autograd.Function`` s over the arc scores ``[B, dep, head]`` (any float dtype).

Forward is the no-graph route of :class:`.partition.PartitionPath` (float64 LU, trust test,
log-space elimination for the sentences the test rejects), run by a detached twin of the
distribution (``twin`` below: a :class:`.partition.ArcPartition` over the detached scores).
Backward:

* log Z: ``grad * marginals`` (the marginals are the gradient of log Z), in the input dtype;
* marginals: the Hessian-vector product ``H g`` (the Hessian of log Z is the arcs' covariance),
  in closed form from the inverse Laplacian (Zmigrod, Vieira & Cotterell 2021, T2): with
  ``B = M^{-1}`` and ``G = sum_e g_e w_e e_{d_e} u_e^T`` (the Laplacian built from the weights
  ``g * w``), ``(H g)_f = g_f mu_f - w_f u_f^T (B G B) e_{d_f}`` (``u_e`` as in
  :mod:`.laplacian`), two batched products on top of the inverse; the sentences that took the
  elimination path get theirs by double backward through that path, for those sentences only.

With ``create_graph`` the backward of the marginals is itself differentiable (third derivatives
of log Z, e.g. the gradient of a GE gradient): it is then computed by the same formulas from
differentiable factors. No host synchronisation here beyond what the forward already did.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function

from parser.structs.common import NEG_INF
from parser.structs.tree.elimination import log_partition_by_elimination
from parser.structs.tree.laplacian import LaplacianFactors, matrix_tree

__all__ = ["graph_factors", "hessian_vector", "log_partition", "marginals"]


class _LogPartition(Function):
    @staticmethod
    def forward(ctx, scores: Tensor, twin) -> Tensor:
        ctx.twin = twin
        ctx.save_for_backward(scores)
        factors = twin._factors
        # Trusted everywhere: the LU's log Z, without building the full-shape marginals (the
        # backward reads their word rows); else the merged route. (clone: a fresh tensor, which
        # autograd takes ownership of.)
        return (factors.log_z if factors.all_trusted else twin._partition[0]).clone()

    @staticmethod
    def backward(ctx, grad: Tensor):
        (scores,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: marginals that remember how to differentiate
            return (grad[:, None, None] * _Marginals.apply(scores, ctx.twin)).to(scores.dtype), None
        return _scaled_marginals(ctx.twin, grad, scores.dtype), None


class _Marginals(Function):
    @staticmethod
    def forward(ctx, scores: Tensor, twin) -> Tensor:
        ctx.twin = twin
        ctx.save_for_backward(scores)
        return twin._partition[1].clone()

    @staticmethod
    def backward(ctx, grad: Tensor):
        (scores,) = ctx.saved_tensors
        graph = scores if torch.is_grad_enabled() else None
        return hessian_vector(ctx.twin, grad, graph=graph).to(scores.dtype), None


def log_partition(scores: Tensor, twin) -> Tensor:
    """``[B]`` float64 log Z of ``twin`` (the detached twin of ``scores``), differentiable (any
    order) in ``scores``."""
    return _LogPartition.apply(scores, twin)


def marginals(scores: Tensor, twin) -> Tensor:
    """``[B, dep, head]`` float64 arc marginals of ``twin``, differentiable in ``scores``."""
    return _Marginals.apply(scores, twin)


def _scaled_marginals(twin, grad: Tensor, dtype: torch.dtype) -> Tensor:
    """``grad[b] * marginals [B, dep, head]`` in ``dtype``: the product, the cast and ROOT's zero
    row in one pass over the word rows when the LU is trusted everywhere."""
    factors = twin._factors
    if not factors.all_trusted:
        return (grad[:, None, None] * twin._partition[1]).to(dtype)
    rows = factors.marginal_rows
    out = rows.new_empty(rows.shape[0], rows.shape[2], rows.shape[2], dtype=dtype)
    out.select(1, 0).zero_()
    torch.mul(rows, grad[:, None, None], out=out.narrow(1, 1, rows.shape[1]))
    return out


def graph_factors(scores64: Tensor, twin) -> LaplacianFactors:
    """The LU fast path with a graph over masked float64 ``scores64``; the sentences ``twin``
    did not trust get scores 0 (their values come from the exact path; this keeps NaN out of
    the LU's backward)."""
    factors = twin._factors
    kept = scores64
    if not factors.all_trusted:
        calm = torch.zeros_like(scores64).masked_fill(~twin.arc_mask, NEG_INF)
        kept = torch.where(factors.trusted[:, None, None], scores64, calm)
    return matrix_tree(kept, twin.lengths, single_root=twin.single_root, tolerance=twin._tolerance)


def hessian_vector(twin, g: Tensor, *, graph: Tensor | None = None) -> Tensor:
    """``H g [B, dep, head]`` float64: the Hessian of log Z (w.r.t. the arc scores) times ``g``.

    ``graph``: the arc scores with their graph (the Functions' input), to make the result
    differentiable (then ``g`` may carry a graph too); None: plain tensors, no graph.
    """
    factors = twin._factors
    masked = None
    if graph is None:
        mu, weight_rows, inverse = twin._partition[1], factors.weight_rows, factors.inverse
    else:
        masked = graph.to(torch.float64).masked_fill(~twin.arc_mask, NEG_INF)
        differentiable = graph_factors(masked, twin)
        mu, weight_rows, inverse = marginals(graph, twin), differentiable.weight_rows, differentiable.inverse
    n = weight_rows.shape[1]
    g = g.to(torch.float64)
    g_rows = g.narrow(1, 1, n)
    gw = g_rows * weight_rows  # 0 off arcs (weight 0) for finite g
    # B G B with G = dM in the direction g * w: the Laplacian built from the weights g * w.
    product = inverse @ _laplacian(gw, single_root=twin.single_root) @ inverse
    rows = g_rows * mu.narrow(1, 1, n) - weight_rows * _coefficients(product, single_root=twin.single_root)
    out = torch.constant_pad_nd(rows, (0, 0, 1, 0))  # ROOT's row: 0
    if not factors.all_trusted:
        bad = twin._untrusted
        if bad.numel():
            out = out.index_copy(0, bad, _by_elimination(twin, g, bad, masked))
    return out


def _laplacian(weight_rows: Tensor, *, single_root: bool) -> Tensor:
    """``[B, N, N]`` the (Koo) Laplacian of word rows ``[B, N, N+1]`` (out of place, so that it
    is differentiable): as :class:`.laplacian.Factorization` builds M, without padding's 1s."""
    words, root = weight_rows.narrow(2, 1, weight_rows.shape[1]), weight_rows.select(2, 0)
    incoming = words.sum(-1) if single_root else words.sum(-1) + root
    lap = torch.diagonal_scatter(-words, incoming, 0, dim1=-2, dim2=-1)
    return torch.select_scatter(lap, root, 2, 0) if single_root else lap


def _coefficients(matrix: Tensor, *, single_root: bool) -> Tensor:
    """``[B, N, N+1]`` ``u_(d,h)^T Y e_d`` for ``Y = matrix [B, N, N]`` (``mu = w * this`` for
    ``Y = B``): column 0 the ROOT arcs, column h the word arcs."""
    if single_root:  # u = [d != 1] e_d - [h != 1] e_h for word arcs, e_1 for ROOT arcs
        keep = torch.ones_like(matrix[0, :, :1])
        keep[0] = 0.0
        masked = matrix * keep  # word 1's row zeroed
        root = matrix.select(1, 0)
    else:  # u = e_d - e_h, e_0 = 0
        masked = matrix
        root = matrix.diagonal(dim1=-2, dim2=-1)
    words = masked.diagonal(dim1=-2, dim2=-1).unsqueeze(-1) - masked.mT
    return torch.cat([root.unsqueeze(-1), words], -1)


def _by_elimination(twin, g: Tensor, bad: Tensor, masked: Tensor | None) -> Tensor:
    """``H g`` of the sentences ``bad`` by double backward through log-space elimination;
    ``masked``: the masked float64 scores with their graph (None: no graph)."""
    create = masked is not None
    with torch.inference_mode(False), torch.enable_grad():
        sub = masked[bad] if create else twin._scores64[bad].clone().requires_grad_()
        lengths = twin.lengths[bad]
        log_z = log_partition_by_elimination(sub, lengths, single_root=twin.single_root)
        (mu,) = torch.autograd.grad(log_z.sum(), sub, create_graph=True)
        keep = torch.isfinite(log_z)[:, None, None] & twin.arc_mask[bad]
        mu = torch.where(keep, mu, torch.zeros_like(mu))
        (hv,) = torch.autograd.grad(mu, sub, g[bad], create_graph=create)
    return torch.where(keep, hv, torch.zeros_like(hv))
