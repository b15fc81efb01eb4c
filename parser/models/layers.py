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


# Elements of one block's [b, dep, L, n_in] intermediate in Bilinear._blocked (16 MB in float32).
BLOCK_ELEMENTS = 1 << 22


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
        if not torch.is_grad_enabled():
            return self._blocked(dep, head)
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

    def at(self, dep: Tensor, head: Tensor) -> LabelsAt:
        """:meth:`forward`'s scores on the arcs a caller asks for only (:class:`LabelsAt`)."""
        return LabelsAt(self, dep, head)

    def _blocked(self, dep: Tensor, head: Tensor) -> Tensor:
        """:meth:`forward` without autograd, a few sentences at a time: each block's ``dep_i^T
        U_l`` (``[b, dep, L, n_in]``, L times the states) is used while it is still in cache, and
        the sums are added in place. The same operations on the same values: the same bits."""
        batch, width, n_in = dep.shape
        n_labels = self.weight.shape[0]
        out = dep.new_empty(batch, width, n_labels, width)  # [B, dep, L, head], as forward's
        dep_linear, head_linear = dep @ self.dep_weight, head @ self.head_weight
        step = max(1, BLOCK_ELEMENTS // (width * n_labels * n_in))
        for start in range(0, batch, step):
            rows = slice(start, start + step)
            left = torch.einsum("bid,lde->bile", dep[rows], self.weight)
            block = out[rows]
            torch.matmul(left.reshape(-1, width * n_labels, n_in), head[rows].transpose(1, 2),
                         out=block.view(-1, width * n_labels, width))
            grid = block.transpose(2, 3)  # [b, dep, head, L]
            grid += dep_linear[rows][:, :, None, :] + head_linear[rows][:, None, :, :]
            grid += self.bias
        return out.transpose(2, 3)


class LabelsAt:
    """``heads [B, N+1] -> [B, dep, L]``: a :class:`Bilinear`'s scores on the arcs ``heads ->
    dep`` (heads >= 0), the grid's values at those heads without the grid: ``L n_in^2`` a word,
    as one matrix product of each word's ``dep_i head_i^T`` (``n_in^2``, a few hundred words at
    a time) with the ``[n_in^2, L]`` weights (a third faster on one core than ``dep_i^T U_l``
    then a product with the head, the same sums in another order). The last trees' scores are
    kept: the relations and the confidence of the decoded tree read them twice."""

    def __init__(self, bilinear: Bilinear, dep: Tensor, head: Tensor) -> None:
        self.bilinear, self.dep, self.head = bilinear, dep, head
        self._last: tuple[Tensor, Tensor] | None = None

    def __call__(self, heads: Tensor) -> Tensor:
        if self._last is not None and torch.equal(self._last[0], heads):
            return self._last[1]
        b, (batch, width, n_in) = self.bilinear, self.dep.shape
        chosen = self.head.gather(1, heads[..., None].expand(batch, width, n_in))  # [B, dep, n_in]
        out = self.dep @ b.dep_weight + chosen @ b.head_weight + b.bias  # [B, dep, L]
        words, dep, chosen = out.view(batch * width, -1), self.dep.reshape(-1, n_in), chosen.reshape(-1, n_in)
        weight = b.weight.reshape(b.weight.shape[0], n_in * n_in).t()  # [n_in^2, L]
        step = max(1, BLOCK_ELEMENTS // (n_in * n_in))
        for start in range(0, len(words), step):
            rows = slice(start, start + step)
            outer = (dep[rows, :, None] * chosen[rows, None, :]).view(-1, n_in * n_in)
            words[rows].addmm_(outer, weight)
        self._last = (heads.clone(), out)
        return out


class LinearScores:
    """``head(states)`` ``[B, T, C]`` computed where read (:class:`parser.data.layers.base.ClassScores`):
    a layer's dictionary reads two or three of a LEMMA head's hundreds of classes for a known
    form, so prediction computes those dot products (and whole rows for unrestricted words)
    instead of the ``[B, T, n_in] x [n_in, C]`` product. Values equal the product's up to float
    rounding (another summation order)."""

    def __init__(self, head: nn.Linear, states: Tensor, *, start: int = 0) -> None:
        # the states flattened once (a view when contiguous); ``start``: the first position read
        self.head, self.states, self.start = head, states, start
        self._flat = states.reshape(-1, states.shape[-1])

    def __getitem__(self, index: tuple[slice, slice]) -> LinearScores:
        """The scores from position ``k`` on (``index``: ``[:, k:]``, as the readers drop ROOT),
        reading the same states: no copy."""
        rows, positions = index
        if rows != slice(None) or positions.stop is not None or positions.step is not None:
            raise IndexError(f"LinearScores: only [:, k:] is supported, got {index!r}")
        return LinearScores(self.head, self.states, start=self.start + (positions.start or 0))

    def full(self) -> Tensor:
        return self.head(self.states[:, self.start:])

    def rows(self, b: Tensor, t: Tensor) -> Tensor:
        return self.head(self._states_at(b, t))

    def cells(self, b: Tensor, t: Tensor, c: Tensor) -> Tensor:
        weight, bias = self.head.weight, self.head.bias
        return self._states_at(b, t).mul_(weight.index_select(0, c)).sum(-1) + bias.index_select(0, c)

    def _states_at(self, b: Tensor, t: Tensor) -> Tensor:
        # one index_select over the flattened states: several times faster than states[b, t]
        return self._flat.index_select(0, b * self.states.shape[1] + t + self.start)


def reverse_within(x: Tensor, lengths: Tensor) -> Tensor:
    """``x[b, :lengths[b]]`` reversed for every ``b``, the padding after it left in place.

    x: ``[B, T, D]``; lengths: ``[B]``. Applying it twice gives ``x`` back.
    """
    steps = torch.arange(x.shape[1], device=x.device)
    last = lengths.to(x.device)[:, None] - 1
    index = torch.where(steps <= last, last - steps, steps)  # [B, T]
    return x.gather(1, index[:, :, None].expand(x.shape))


class BiLSTM(nn.Module):
    """A multi-layer bidirectional LSTM over left-aligned, padded sequences, without packing.

    The same function as ``nn.LSTM(n_in, hidden, num_layers, bidirectional=True,
    batch_first=True, dropout=dropout)`` run on a packed batch, computed as two unidirectional
    LSTMs per layer on padded tensors: the forward one is exact as it is (a state never depends on
    later steps), the backward one runs forwards over each sequence reversed within its own length
    (``reverse_within``), so the padding comes after the real steps there too. On CPU this avoids
    the packed backward pass, which zero-fills a packed-size gradient for every time step.

    Parameters live in ``forward_layers[k]`` and ``backward_layers[k]`` (one-layer ``nn.LSTM``
    each); a state dict saved from the ``nn.LSTM`` layout (``weight_ih_l0``,
    ``weight_ih_l0_reverse``, ...) is renamed on load.
    """

    def __init__(self, n_in: int, hidden: int, *, num_layers: int, dropout: float) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers={num_layers}: expected at least 1")
        self.input_size, self.hidden_size, self.num_layers = n_in, hidden, num_layers
        self.dropout = dropout
        sizes = [n_in] + [2 * hidden] * (num_layers - 1)
        self.forward_layers = nn.ModuleList(nn.LSTM(n, hidden, batch_first=True) for n in sizes)
        self.backward_layers = nn.ModuleList(nn.LSTM(n, hidden, batch_first=True) for n in sizes)
        self.register_load_state_dict_pre_hook(_rename_packed_layout)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """x: ``[B, T, n_in]``; lengths: ``[B]``, each in ``1..T``.

        Returns the states ``[B, T, 2 * hidden]`` (forward half first, zero beyond each length)
        and the final states ``[B, 2 * hidden]`` (forward at the last step, backward at the first),
        as ``nn.LSTM``'s ``h_n`` of the last layer.
        """
        for k, (forward, backward) in enumerate(zip(self.forward_layers, self.backward_layers)):
            if k > 0:  # nn.LSTM's dropout: between layers, not after the last
                x = nn.functional.dropout(x, self.dropout, self.training)
            ahead = forward(x)[0]
            behind = reverse_within(backward(reverse_within(x, lengths))[0], lengths)
            x = torch.cat([ahead, behind], dim=-1)
        present = torch.arange(x.shape[1], device=x.device) < lengths.to(x.device)[:, None]
        states = x * present[:, :, None]
        last = (lengths.to(x.device) - 1)[:, None, None].expand(-1, 1, self.hidden_size)
        final = torch.cat([ahead.gather(1, last)[:, 0], behind[:, 0]], dim=-1)
        return states, final


def _rename_packed_layout(
    module: nn.Module,
    state_dict: dict,
    prefix: str,
    local_metadata: dict,
    strict: bool,
    missing_keys: list,
    unexpected_keys: list,
    error_msgs: list,
) -> None:
    # nn.LSTM names "weight_ih_l2_reverse"; here it is "backward_layers.2.weight_ih_l0".
    for key in [key for key in state_dict if key.startswith(prefix)]:
        name = key[len(prefix) :]
        parts = name.split("_")
        if len(parts) not in (3, 4) or parts[0] not in ("weight", "bias") or "." in name:
            continue
        if not parts[2].startswith("l") or not parts[2][1:].isdigit():
            continue
        if len(parts) == 4 and parts[3] != "reverse":
            continue
        side = "backward_layers" if len(parts) == 4 else "forward_layers"
        new = f"{prefix}{side}.{parts[2][1:]}.{parts[0]}_{parts[1]}_l0"
        state_dict[new] = state_dict.pop(key)


def dropped_words(word_mask: Tensor, rate: float) -> Tensor:
    """``[B, N+1]`` bool: real words (``word_mask``: not ROOT, not padding) to read as UNK in
    training, each with probability ``rate`` (word dropout)."""
    return (torch.rand(word_mask.shape, device=word_mask.device) < rate) & word_mask


class ConvEncoder(nn.Module):
    """Residual 1-D convolutions over a sentence's words: the encoder of a lean student
    (``model/encoder=cnn``; issue 47), as spaCy's tok2vec CNN (a window of one word each side,
    depth 4) where the BiLSTM reads the whole sentence at several times the arithmetic.

    A linear map to ``width``, then ``depth`` blocks, each ``h = LayerNorm(h + dropout(GELU(
    conv(h))))`` with a ``kernel``-word window; block ``k`` spaces its window's words
    ``dilation ** k`` apart (Strubell et al. 2017's iterated dilated CNN: with 2, four blocks of
    3-word windows see 31 words at the arithmetic of 9); padding is zeroed before every
    convolution, so a sentence encodes the same in any batch. The call is the BiLSTM's: ``(x [B, T, n_in], lengths
    [B]) -> (states [B, T, width], None)``, zero beyond each length.
    """

    def __init__(self, n_in: int, width: int, *, depth: int, kernel: int, dropout: float,
                 dilation: int = 1) -> None:
        super().__init__()
        if depth < 1 or width < 1 or kernel < 1 or kernel % 2 == 0 or dilation < 1:
            raise ValueError(f"encoder: conv_width={width}, conv_depth={depth}, conv_kernel="
                             f"{kernel}, conv_dilation={dilation}: need positive sizes and an odd kernel")
        self.hidden_size, self.dropout = width, dropout
        self.project = nn.Linear(n_in, width)
        self.convs = nn.ModuleList(
            nn.Conv1d(width, width, kernel, dilation=dilation**k, padding=kernel // 2 * dilation**k)
            for k in range(depth))
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, None]:
        present = (torch.arange(x.shape[1], device=x.device) < lengths.to(x.device)[:, None])[..., None]
        h = self.project(x) * present
        for conv, norm in zip(self.convs, self.norms):
            y = nn.functional.gelu(conv(h.transpose(1, 2)).transpose(1, 2))
            h = norm(h + nn.functional.dropout(y, self.dropout, self.training)) * present
        return h, None
