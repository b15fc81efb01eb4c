"""Building blocks of the biaffine scorer (Dozat & Manning 2017): MLP projections, the biaffine
arc scorer and the bilinear label scorer."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class MLP(nn.Module):
    """``[..., n_in] -> [..., n_out]``: linear, leaky ReLU (slope 0.1), dropout."""

    def __init__(self, n_in: int, n_out: int, *, dropout: float) -> None:
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)
        self.activation = nn.LeakyReLU(0.1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.activation(self.linear(x)))


def _near_zero(weight: Tensor, n_in: int) -> None:
    # Dozat & Manning start the biaffine weights at zero; a tiny non-zero start keeps their
    # behaviour while letting the very first backward pass reach the encoder.
    nn.init.normal_(weight, std=1.0 / n_in)


class Biaffine(nn.Module):
    """Arc scores ``s[b, dep, head] = dep_i^T W head_j + u^T head_j`` (a head prior; a term in
    the dependent alone is constant across heads and would cancel in the tree CRF)."""

    def __init__(self, n_in: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_in))
        self.head_bias = nn.Parameter(torch.zeros(n_in))
        _near_zero(self.weight, n_in)

    def forward(self, dep: Tensor, head: Tensor) -> Tensor:
        """dep, head: ``[B, N+1, n_in]`` -> ``[B, dep, head]``."""
        bilinear = (dep @ self.weight) @ head.transpose(1, 2)
        return bilinear + (head @ self.head_bias)[:, None, :]


class Bilinear(nn.Module):
    """Label scores ``s[b, dep, head, rel] = dep_i^T U_rel head_j + w_rel.[dep_i; head_j] + b_rel``
    for dependent ``i`` and head ``j``."""

    def __init__(self, n_in: int, n_labels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_labels, n_in, n_in))
        self.dep_weight = nn.Parameter(torch.zeros(n_in, n_labels))
        self.head_weight = nn.Parameter(torch.zeros(n_in, n_labels))
        self.bias = nn.Parameter(torch.zeros(n_labels))
        _near_zero(self.weight, n_in)

    def forward(self, dep: Tensor, head: Tensor) -> Tensor:
        """dep, head: ``[B, N+1, n_in]`` -> ``[B, dep, head, L]``."""
        batch, width, n_in = dep.shape
        n_labels = self.weight.shape[0]
        # dep_i^T U_l for every (i, l), then one batched matmul with the heads.
        left = torch.einsum("bid,lde->bile", dep, self.weight).reshape(
            batch, width * n_labels, n_in
        )
        bilinear = (
            (left @ head.transpose(1, 2)).reshape(batch, width, n_labels, width).transpose(2, 3)
        )
        linear = (dep @ self.dep_weight)[:, :, None, :] + (head @ self.head_weight)[:, None, :, :]
        return bilinear + linear + self.bias
