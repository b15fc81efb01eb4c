"""The slow published algorithms, kept as references for tests and as baselines for benchmarks.

Self-contained on purpose (own Laplacians and determinants, nothing from ``tree_crf``): the fast
algorithms are checked against these. One sentence at a time; ``scores [M, M]`` (dep, head) with
``M >= n + 1`` (rows/columns past ``n`` are padding and ignored; outputs keep the padded shape
with zeros there). Everything is computed in float64.

Matrix convention: the matrix ``A [n, n]`` has a row per dependent word and a column per head word
(0-based: word ``d`` is index ``d - 1``), so row ``d - 1`` holds only dependent ``d``'s weights.

- multi-root (Smith & Smith 2007; McDonald & Satta 2007): ``A[d,d] = r_d + sum_h w[d,h]``,
  ``A[d,h] = -w[d,h]``; ``Z = det A``.
- single-root (Koo et al. 2007): the same without ``r`` on the diagonal, then column 0 (head word
  1) replaced by the root weights ``r``; ``Z = det A``.

Each arc ``(d, h)`` enters row ``d - 1`` linearly, with the coefficient vector ``u(d, h)`` over
columns: ``e_{d-1} - e_{h-1}`` (word head, multi-root), ``e_{d-1}`` (root, multi-root), and for
single-root ``[d != 1] e_{d-1} - [h != 1] e_{h-1}`` (word head) and ``e_0`` (root). Hence
``p(d, h) = w[d, h] * u(d, h) . A^{-1}[:, d-1]``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "druck_smith_covariance",
    "druck_smith_pairwise_marginals",
    "ge_gradient_by_covariance",
    "matrix_tree_log_partition",
    "matrix_tree_marginals",
    "smith_eisner_entropy",
    "two_edge_marginals_by_conditioning",
]


def _check(scores: Tensor, n: int) -> None:
    if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores: expected shape [N+1, N+1], got {tuple(scores.shape)}")
    if not 1 <= n <= scores.shape[0] - 1:
        raise ValueError(f"n: expected 1 <= n <= {scores.shape[0] - 1}, got {n}")
    block = scores[: n + 1, : n + 1]
    if bool((torch.isnan(block) | (block == float("inf"))).any()):
        dep, head = (int(i) for i in (torch.isnan(block) | (block == float("inf"))).nonzero()[0])
        raise ValueError(f"scores: NaN or +inf at [dep={dep}, head={head}]")


def _weights(scores: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """-> ``(s [n+1, n+1], w [n+1, n+1], shift [n+1])``: float64 scores with ``-inf`` on the
    diagonal and row 0, and ``w = exp(s - shift)`` with each dependent shifted by its maximum."""
    s = scores[: n + 1, : n + 1].to(torch.float64).clone()
    s.fill_diagonal_(float("-inf"))
    s[0] = float("-inf")
    shift = s.max(dim=1).values
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    return s, torch.exp(s - shift[:, None]), shift


def _laplacian(w: Tensor, *, single_root: bool) -> Tensor:
    """``w [n+1, n+1]`` (dep, head) -> ``A [n, n]`` (dependent word, head word), see module doc."""
    words = w[1:, 1:]
    root = w[1:, 0]
    a = torch.diag(words.sum(dim=1)) - words
    if single_root:
        a[:, 0] = root
    else:
        a = a + torch.diag(root)
    return a


def _arc_columns(n: int, *, single_root: bool) -> Tensor:
    """``u [n+1, n+1, n]``: the coefficient vector of arc (dep, head) over the matrix columns."""
    u = torch.zeros(n + 1, n + 1, n, dtype=torch.float64)
    eye = torch.eye(n, dtype=torch.float64)
    u[1:, :] += eye[:, None, :]  # +e_{d-1}: the dependent's diagonal
    u[1:, 1:] -= eye[None, :, :]  # -e_{h-1}: the head's column
    if single_root:
        u[1:, :, 0] = 0.0  # column 0 holds the root weights instead
        u[1:, 0] = 0.0
        u[1:, 0, 0] = 1.0
    return u


def _pad(x: Tensor, size: int, dims: int) -> Tensor:
    """Zero-pad the first ``dims`` axes of ``x`` to ``size``."""
    out = x.new_zeros((size,) * dims + tuple(x.shape[dims:]))
    out[tuple(slice(0, x.shape[i]) for i in range(dims))] = x
    return out


def matrix_tree_log_partition(scores: Tensor, n: int, *, single_root: bool) -> Tensor:
    """log Z of one sentence by the matrix-tree theorem; scalar float64 (``-inf`` if no tree)."""
    _check(scores, n)
    _, w, shift = _weights(scores, n)
    sign, logabsdet = torch.linalg.slogdet(_laplacian(w, single_root=single_root))
    if float(sign) <= 0:
        return torch.tensor(float("-inf"), dtype=torch.float64)
    return logabsdet + shift[1:].sum()


def _inverse_parts(scores: Tensor, n: int, *, single_root: bool):
    """-> ``(s, w, A^{-1}, u)`` or raises when the sentence has no tree."""
    _check(scores, n)
    s, w, _ = _weights(scores, n)
    a = _laplacian(w, single_root=single_root)
    sign, _ = torch.linalg.slogdet(a)
    if float(sign) <= 0:
        raise ValueError(
            f"scores: no spanning tree with finite score (n={n}, single_root={single_root})"
        )
    return s, w, torch.linalg.inv(a), _arc_columns(n, single_root=single_root)


def _projections(w: Tensor, inverse: Tensor, u: Tensor) -> Tensor:
    """``K [n+1, n+1, n]``: ``K[d, h, x] = w[d, h] * u(d, h) . A^{-1}[:, x]``."""
    return w[:, :, None] * torch.einsum("dhj,jx->dhx", u, inverse)


def _marginals_small(w: Tensor, inverse: Tensor, *, single_root: bool) -> Tensor:
    """Arc marginals ``[n+1, n+1]``: ``w[d, h] * u(d, h) . A^{-1}[:, d-1]``, in O(n^2)."""
    n = inverse.shape[0]
    column = inverse.T  # column[d-1, j] = A^{-1}[j, d-1]
    own = column.diagonal()
    marginals = torch.zeros_like(w)
    if single_root:
        not_first = torch.ones(n, dtype=torch.float64)
        not_first[0] = 0.0
        marginals[1:, 0] = w[1:, 0] * column[:, 0]
        words = (own * not_first)[:, None] - column * not_first[None, :]
    else:
        marginals[1:, 0] = w[1:, 0] * own
        words = own[:, None] - column
    marginals[1:, 1:] = w[1:, 1:] * words
    return marginals


def matrix_tree_marginals(scores: Tensor, n: int, *, single_root: bool) -> Tensor:
    """Arc marginals ``[M, M]`` (dep, head) by the inverse Laplacian (Koo et al. 2007); float64."""
    _, w, inverse, _ = _inverse_parts(scores, n, single_root=single_root)
    return _pad(_marginals_small(w, inverse, single_root=single_root), scores.shape[0], 2)


def smith_eisner_entropy(scores: Tensor, n: int, *, single_root: bool) -> Tensor:
    """Tree entropy ``H = log Z - E[score]`` as Smith & Eisner (2007) compute it, O(n^4).

    ``Z * E[s(d, head(d))]`` is the determinant with row ``d - 1`` of the Laplacian rebuilt from
    ``w[d, h] * s[d, h]`` (the determinant is linear in that row): n determinants in all.
    """
    _check(scores, n)
    s, w, _ = _weights(scores, n)
    a = _laplacian(w, single_root=single_root)
    sign, logabsdet = torch.linalg.slogdet(a)
    if float(sign) <= 0:
        raise ValueError(
            f"scores: no spanning tree with finite score (n={n}, single_root={single_root})"
        )
    weighted = torch.where(w > 0, w * s, torch.zeros_like(w))
    weighted_a = _laplacian(weighted, single_root=single_root)
    expected = torch.zeros((), dtype=torch.float64)
    for d in range(n):
        replaced = a.clone()
        replaced[d] = weighted_a[d]
        sign_d, logabsdet_d = torch.linalg.slogdet(replaced)
        expected = expected + sign_d * torch.exp(logabsdet_d - logabsdet)
    log_z = matrix_tree_log_partition(scores, n, single_root=single_root)
    return log_z - expected


def druck_smith_pairwise_marginals(scores: Tensor, n: int, *, single_root: bool) -> Tensor:
    """Two-edge marginals ``P[d1, h1, d2, h2] = p(head(d1)=h1, head(d2)=h2)``, ``[M, M, M, M]``.

    Druck & Smith (2009), eq. 3: for ``d1 != d2``, with ``K`` the projections (module doc),
    ``P = K[d1,h1,d1-1] K[d2,h2,d2-1] - K[d1,h1,d2-1] K[d2,h2,d1-1]`` (second derivative of the
    determinant); for ``d1 == d2`` it is the marginal when ``h1 == h2`` and 0 otherwise. O(n^4).
    """
    _, w, inverse, u = _inverse_parts(scores, n, single_root=single_root)
    k = _projections(w, inverse, u)[1:]  # [dep word, head, x]
    own = k.diagonal(dim1=0, dim2=2).T  # [dep word, head]: the marginals
    swapped = k.permute(2, 0, 1).unsqueeze(1)  # [d1, 1, d2, h2] = K[d2, h2, d1-1]
    pairs = own[:, :, None, None] * own[None, None, :, :] - k[:, :, :, None] * swapped
    same = torch.arange(n)
    pairs[same, :, same, :] = torch.diag_embed(own)
    full = torch.zeros((n + 1,) * 4, dtype=torch.float64)
    full[1:, :, 1:, :] = pairs
    return _pad(full, scores.shape[0], 4)


def druck_smith_covariance(
    scores: Tensor, n: int, r: Tensor, s: Tensor, *, single_root: bool
) -> Tensor:
    """``Cov(r, s) [R, S]`` of additive features ``r [M, M, R]``, ``s [M, M, S]`` (dep, head).

    As Druck & Smith (2009): materialise the ``(n+1)^2 x (n+1)^2`` covariance of arc indicators
    from the two-edge marginals, then contract it with both feature tensors.
    """
    arc_cov = _arc_covariance(scores, n, single_root=single_root)
    size = n + 1
    r_flat = r[:size, :size].to(torch.float64).reshape(size * size, -1)
    s_flat = s[:size, :size].to(torch.float64).reshape(size * size, -1)
    return r_flat.T @ arc_cov @ s_flat


def _arc_covariance(scores: Tensor, n: int, *, single_root: bool) -> Tensor:
    """``[(n+1)^2, (n+1)^2]``: ``Cov(1[arc e1], 1[arc e2]) = P(e1, e2) - p(e1) p(e2)``."""
    size = n + 1
    pairs = druck_smith_pairwise_marginals(scores[:size, :size], n, single_root=single_root)
    marginals = pairs.diagonal(dim1=0, dim2=2).diagonal(dim1=0, dim2=1)  # P[d, h, d, h]
    flat = marginals.reshape(-1)
    return pairs.reshape(size * size, size * size) - flat[:, None] * flat[None, :]


def two_edge_marginals_by_conditioning(scores: Tensor, n: int, *, single_root: bool) -> Tensor:
    """Two-edge marginals ``[M, M, M, M]`` as Druck, Mann & McCallum (2009): O(n^5).

    For each arc ``e = (d, h)``: ``p(e)`` times the arc marginals with ``e`` forced (row ``d`` of
    the scores keeps only ``h``), i.e. ``(n+1)^2`` matrix-tree computations of O(n^3).
    """
    _check(scores, n)
    size = n + 1
    block = scores[:size, :size].to(torch.float64)
    marginals = matrix_tree_marginals(block, n, single_root=single_root)
    pairs = torch.zeros((size,) * 4, dtype=torch.float64)
    for dep in range(1, size):
        for head in range(size):
            if head == dep or float(marginals[dep, head]) <= 0.0:
                continue
            forced = block.clone()
            forced[dep] = float("-inf")
            forced[dep, head] = block[dep, head]
            _, w, _ = _weights(forced, n)
            a = _laplacian(w, single_root=single_root)
            if float(torch.linalg.slogdet(a)[0]) <= 0:
                continue  # p(e) was rounding noise: no tree contains e
            conditional = _marginals_small(w, torch.linalg.inv(a), single_root=single_root)
            pairs[dep, head] = marginals[dep, head] * conditional
    return _pad(pairs, scores.shape[0], 4)


def ge_gradient_by_covariance(
    scores: Tensor, n: int, features: Tensor, targets: Tensor, *, single_root: bool
) -> Tensor:
    """Gradient ``[M, M]`` of ``sum_f (targets_f - E[f])^2`` w.r.t. the arc scores.

    features: ``[M, M, F]`` additive (dep, head) features; targets: ``[F]``.
    Druck & Smith's route: ``dE[f]/dscore_e = Cov(f, 1_e)``, so
    ``grad_e = sum_f -2 (t_f - E[f]) Cov(f, 1_e)`` with the arc covariance materialised.
    """
    size = n + 1
    arc_cov = _arc_covariance(scores, n, single_root=single_root)
    feats = features[:size, :size].to(torch.float64).reshape(size * size, -1)  # [arcs, F]
    _, w, inverse, _ = _inverse_parts(scores, n, single_root=single_root)
    marginals = _marginals_small(w, inverse, single_root=single_root).reshape(-1)
    expected = marginals @ feats  # [F]
    residual = targets.to(torch.float64) - expected
    grad = (-2.0 * residual) @ (feats.T @ arc_cov)  # [arcs]
    return _pad(grad.reshape(size, size), scores.shape[0], 2)
