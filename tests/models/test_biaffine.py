from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from parser.data.batch import Batch
from parser.models import BiaffineScorer, layers
from parser.models.char_encoder import CharLSTM
from parser.models.layers import Bilinear, BiLSTM, reverse_within
from tests.models.batches import (
    N_CHARS,
    N_RELS,
    N_UPOS,
    N_WORDS,
    assert_padding_invariant,
    random_batch,
    with_noisy_padding,
)

LENGTHS = [4, 1, 7, 3]


def small_model(
    *,
    n_rels: int = N_RELS,
    seed: int = 0,
    dropout: float = 0.33,
    word_dropout: float = 0.25,
    use_upos: bool = True,
) -> BiaffineScorer:
    torch.manual_seed(seed)
    return BiaffineScorer(
        n_words=N_WORDS,
        n_chars=N_CHARS,
        n_upos=N_UPOS,
        n_rels=n_rels,
        word_dim=16,
        char_dim=8,
        char_hidden=8,
        use_upos=use_upos,
        upos_dim=8,
        lstm_hidden=16,
        lstm_layers=2,
        arc_mlp=12,
        rel_mlp=6,
        dropout=dropout,
        word_dropout=word_dropout,
    )


@pytest.mark.parametrize("n_rels", [N_RELS, 0])
@pytest.mark.parametrize("use_upos", [True, False])
def test_shapes_and_finite(n_rels: int, use_upos: bool) -> None:
    model = small_model(n_rels=n_rels, use_upos=use_upos)
    batch = with_noisy_padding(random_batch(LENGTHS, seed=1), extra=2, extra_chars=1, seed=2)
    for training in (True, False):
        model.train(training)
        out = model(batch)
        assert out.arcs.shape == (4, 10, 10)
        assert out.arcs.dtype == torch.float32 and torch.isfinite(out.arcs).all()
        if n_rels:
            assert out.labels.shape == (4, 10, 10, n_rels) and torch.isfinite(out.labels).all()
        else:
            assert out.labels is None


def test_padding_invariance_and_batched_equals_single() -> None:
    model = small_model().eval()
    tight = random_batch(LENGTHS, seed=3)
    noisy = with_noisy_padding(tight, extra=3, extra_chars=2, seed=4)
    assert_padding_invariant(model, tight, noisy)


def test_eval_is_deterministic_and_training_is_not() -> None:
    model = small_model()
    batch = random_batch(LENGTHS, seed=5)
    model.eval()
    torch.testing.assert_close(model(batch).arcs, model(batch).arcs, rtol=0, atol=0)
    model.train()
    assert not torch.equal(model(batch).arcs, model(batch).arcs)


def test_word_dropout_replaces_real_words_by_unk_and_leaves_the_batch_alone() -> None:
    model = small_model(dropout=0.0, word_dropout=0.5)
    batch = random_batch(LENGTHS, seed=6)
    words_before = batch.words.clone()
    torch.manual_seed(11)
    trained = model.train()(batch).arcs
    assert torch.equal(batch.words, words_before)
    torch.manual_seed(11)
    drop = (torch.rand(batch.words.shape) < 0.5) & batch.word_mask
    assert drop.any()
    dropped = Batch(
        words=batch.words.masked_fill(drop, 1),
        chars=batch.chars,
        upos=batch.upos,
        lengths=batch.lengths,
    )
    with torch.no_grad():
        expected = model.eval()(dropped).arcs
    torch.testing.assert_close(trained.detach(), expected)


def test_gradient_reaches_every_parameter() -> None:
    model = small_model().train()
    batch = random_batch(LENGTHS, seed=7)
    out = model(batch)
    gen = torch.Generator().manual_seed(0)
    loss = (out.arcs * torch.randn(out.arcs.shape, generator=gen)).sum()
    loss = loss + (out.labels * torch.randn(out.labels.shape, generator=gen)).sum()
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


def test_char_encoder_ignores_padding_and_zeroes_empty_words() -> None:
    torch.manual_seed(0)
    encoder = CharLSTM(N_CHARS, char_dim=4, hidden=5, n_out=3)
    chars = torch.tensor([[[4, 5, 0], [0, 0, 0], [6, 0, 0]]])
    present = torch.tensor([[True, True, False]])
    out = encoder(chars, present)
    assert out.shape == (1, 3, 3)
    assert out[0, 0].abs().sum() > 0
    assert torch.equal(out[0, 1:], torch.zeros(2, 3))  # no characters; absent position
    longer = torch.cat([chars, torch.zeros(1, 3, 4, dtype=torch.long)], dim=-1)
    torch.testing.assert_close(encoder(longer, present), out)


def _random_chars(gen: torch.Generator, batch: int, width: int, n_max: int) -> torch.Tensor:
    chars = torch.zeros(batch, width, n_max, dtype=torch.long)
    for b in range(batch):
        for i in range(width):
            n = int(torch.randint(0, n_max + 1, (1,), generator=gen))
            chars[b, i, :n] = torch.randint(1, 4, (n,), generator=gen)  # 3 letters: many repeats
    return chars


def test_char_encoder_remembering_gives_each_batch_the_same_values() -> None:
    torch.manual_seed(0)
    encoder = CharLSTM(N_CHARS, char_dim=4, hidden=5, n_out=3).eval()
    gen = torch.Generator().manual_seed(2)
    # Batches padded to different character widths; forms of every bucket, repeated across them.
    batches = [_random_chars(gen, 3, 6, n_max) for n_max in (4, 9, 20)]
    present = torch.ones(3, 6, dtype=torch.bool)
    present[1, 4:] = False
    with torch.no_grad():
        alone = [encoder(chars, present) for chars in batches]
        rows = torch.cat([torch.nn.functional.pad(c, (0, 20 - c.shape[-1])).flatten(0, 1)
                          for c in batches[:2]])  # the third batch's long forms are unknown
        with encoder.remembering(rows):
            assert encoder._memo is not None
            remembered = [encoder(chars, present) for chars in batches[:2]]
            assert encoder._remembered(batches[2][present]) is None  # falls back to encoding
            remembered.append(encoder(batches[2], present))
        assert encoder._memo is None
    for a, b in zip(alone, remembered):  # LSTM calls of other sizes: float32 rounding only
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-6)
    assert torch.equal(remembered[1][1, 4:], torch.zeros(2, 3))


def test_char_encoder_remembering_refuses_autograd() -> None:
    encoder = CharLSTM(N_CHARS, char_dim=4, hidden=5, n_out=3)
    with pytest.raises(RuntimeError, match="for prediction only"), encoder.remembering(
            torch.ones(2, 3, dtype=torch.long)):
        pass


def test_bad_input_names_the_tensor() -> None:
    model = small_model().eval()
    batch = random_batch([3, 2], seed=8)
    words = batch.words.clone()
    words[1, 2] = N_WORDS
    with pytest.raises(ValueError, match=r"batch\.words\[1, 2\] = 30"):
        model(Batch(words=words, chars=batch.chars, upos=batch.upos, lengths=batch.lengths))
    with pytest.raises(ValueError, match="batch.lengths"):
        model(
            Batch(
                words=batch.words, chars=batch.chars, upos=batch.upos, lengths=torch.tensor([4, 2])
            )
        )
    with pytest.raises(ValueError, match="batch.chars"):
        model(
            Batch(
                words=batch.words,
                chars=batch.chars[:, :, 0],
                upos=batch.upos,
                lengths=batch.lengths,
            )
        )
    with pytest.raises(ValueError, match="n_words"):
        BiaffineScorer(n_words=2, n_chars=5, n_upos=5, n_rels=1)


def packed_bilstm(lstm: torch.nn.LSTM, x: torch.Tensor, lengths: torch.Tensor):
    """The reference: ``nn.LSTM`` on a packed batch -> (states zero-padded, h_n of the last layer)."""
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h_n, _) = lstm(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return states, h_n[-2:].transpose(0, 1).reshape(x.shape[0], -1)


def packed_name(name: str) -> str:
    """``backward_layers.2.weight_ih_l0`` -> ``weight_ih_l2_reverse`` (nn.LSTM's name)."""
    if "." not in name:
        return name
    side, layer, weight = name.split(".")
    suffix = "_reverse" if side == "backward_layers" else ""
    return f"{weight[: -len('l0')]}l{layer}{suffix}"


@pytest.mark.parametrize("num_layers", [1, 3])
def test_bilstm_equals_packed_lstm_with_gradients(num_layers: int) -> None:
    torch.manual_seed(0)
    dropout = 0.3 if num_layers > 1 else 0.0
    reference = torch.nn.LSTM(
        5, 4, num_layers=num_layers, batch_first=True, bidirectional=True, dropout=dropout
    ).double()
    lstm = BiLSTM(5, 4, num_layers=num_layers, dropout=0.3).double()
    lstm.load_state_dict(reference.state_dict())  # the nn.LSTM layout is renamed on load
    reference.eval(), lstm.eval()
    lengths = torch.tensor([3, 7, 1, 5, 7, 2])
    x = torch.randn(6, 9, 5, dtype=torch.float64)  # random values in the padding too
    weights = torch.randn(6, 9, 8, dtype=torch.float64)
    results = []
    for module, run in ((reference, packed_bilstm), (lstm, lambda m, x, n: m(x, n))):
        leaf = x.clone().requires_grad_()
        states, final = run(module, leaf, lengths)
        ((states * weights).sum() + final.pow(2).sum()).backward()
        grads = {packed_name(k): p.grad for k, p in module.named_parameters()}
        results.append((states, final, leaf.grad, [grads[k] for k in sorted(grads)]))
    (states, final, dx, grads), (states2, final2, dx2, grads2) = results
    assert torch.equal(states2[torch.arange(9) >= lengths[:, None]], torch.zeros(29, 8))
    for a, b in [(states, states2), (final, final2), (dx, dx2), *zip(grads, grads2)]:
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)
    assert len(grads) == len(grads2) == 8 * num_layers


def test_bilstm_training_dropout_between_layers_only() -> None:
    torch.manual_seed(0)
    lstm = BiLSTM(3, 2, num_layers=2, dropout=0.5).train()
    x, lengths = torch.randn(2, 4, 3), torch.tensor([4, 2])
    assert not torch.equal(lstm(x, lengths)[0], lstm(x, lengths)[0])
    one = BiLSTM(3, 2, num_layers=1, dropout=0.5).train()
    torch.testing.assert_close(one(x, lengths)[0], one(x, lengths)[0], rtol=0, atol=0)


def test_reverse_within_reverses_each_prefix_and_is_an_involution() -> None:
    x = torch.arange(8.0).reshape(2, 4, 1)
    flipped = reverse_within(x, torch.tensor([3, 1]))
    assert flipped[..., 0].tolist() == [[2, 1, 0, 3], [4, 5, 6, 7]]
    assert torch.equal(reverse_within(flipped, torch.tensor([3, 1])), x)


class PackedCharLSTM(torch.nn.Module):
    """E's character encoder (one packed BiLSTM call over every present word), the reference."""

    def __init__(self, encoder: CharLSTM) -> None:
        super().__init__()
        self.encoder = encoder
        hidden = encoder.lstm.hidden_size
        self.lstm = torch.nn.LSTM(
            encoder.embed.embedding_dim, hidden, batch_first=True, bidirectional=True
        ).double()
        self.lstm.load_state_dict({packed_name(k): v for k, v in encoder.lstm.state_dict().items()})

    def forward(self, chars: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        n_chars = (chars != 0).sum(-1)
        take = present & (n_chars > 0)
        out = torch.zeros(*chars.shape[:2], self.encoder.project.out_features, dtype=torch.float64)
        rows = chars[take]
        packed = pack_padded_sequence(
            self.encoder.embed(rows), n_chars[take], batch_first=True, enforce_sorted=False
        )
        final = self.lstm(packed)[1][0].transpose(0, 1).reshape(rows.shape[0], -1)
        out[take] = self.encoder.project(final)
        return out


def test_char_encoder_equals_packed_reference_with_gradients() -> None:
    torch.manual_seed(0)
    encoder = CharLSTM(N_CHARS, char_dim=4, hidden=3, n_out=5).double()
    reference = PackedCharLSTM(encoder)
    gen = torch.Generator().manual_seed(1)
    # word lengths 0..22 (every bucket), repeated forms, an absent position with characters
    chars = torch.zeros(3, 8, 24, dtype=torch.long)
    for b in range(3):
        for i in range(8):
            n = int(torch.randint(0, 23, (1,), generator=gen))
            chars[b, i, :n] = torch.randint(1, N_CHARS, (n,), generator=gen)
    chars[2, 5] = chars[0, 1]
    chars[1, 2] = chars[0, 1]
    present = torch.ones(3, 8, dtype=torch.bool)
    present[1, 6:] = False
    weights = torch.randn(3, 8, 5, dtype=torch.float64, generator=gen)
    results = []
    for module in (reference, encoder):
        out = module(chars, present)
        (out * weights).sum().backward()
        grads = {k: p.grad.clone() for k, p in encoder.named_parameters() if p.grad is not None}
        if module is reference:
            lstm = {f"lstm.{k}": p.grad for k, p in reference.lstm.named_parameters()}
            grads = {k: v for k, v in grads.items() if not k.startswith("lstm.")} | lstm
        else:
            grads = {
                k.split(".")[0] + "." + packed_name(k.split(".", 1)[1]): v for k, v in grads.items()
            }
        grads = [grads[k] for k in sorted(grads)]
        encoder.zero_grad()
        reference.zero_grad()
        results.append((out, grads))
    (out, grads), (out2, grads2) = results
    assert torch.equal(out2[1, 6:], torch.zeros(2, 5))
    assert len(grads) == len(grads2) == 11
    for a, b in [(out, out2), *zip(grads, grads2)]:
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)


def test_scorer_loads_a_state_dict_in_the_nn_lstm_layout() -> None:
    model = small_model().eval()
    renamed = {}
    for key, value in model.state_dict().items():
        owner, _, name = key.rpartition("lstm.")
        renamed[f"{owner}lstm.{packed_name(name)}" if owner or key.startswith("lstm.") else key] = (
            value
        )
    assert "lstm.weight_hh_l1_reverse" in renamed and "char_encoder.lstm.bias_ih_l0" in renamed
    other = small_model(seed=1).eval()
    other.load_state_dict(renamed)
    batch = random_batch(LENGTHS, seed=9)
    with torch.no_grad():
        torch.testing.assert_close(other(batch).labels, model(batch).labels, rtol=0, atol=0)


def test_bilinear_without_autograd_gives_the_same_bits(monkeypatch):
    # Prediction computes the label grid a few sentences at a time: the same values, bit for bit.
    torch.manual_seed(0)
    layer = Bilinear(6, 5)
    for weight in (layer.dep_weight, layer.head_weight, layer.bias):
        torch.nn.init.normal_(weight)
    dep, head = torch.randn(5, 8, 6), torch.randn(5, 8, 6)
    want = layer(dep, head)
    assert want.requires_grad  # the autograd path
    monkeypatch.setattr(layers, "BLOCK_ELEMENTS", 2 * 8 * 5 * 6)  # 2 sentences a block
    with torch.no_grad():
        got = layer(dep, head)
    assert got.shape == (5, 8, 8, 5)
    assert torch.equal(got, want.detach())
