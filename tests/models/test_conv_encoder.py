"""The convolutional encoder (``model/encoder=cnn``): padding invariance, the scorer built on it,
and a tiny parser that trains with it and writes and reads its checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from parser.data.conllu_io import read_conllu
from parser.inference import load_parser, parse
from parser.models.layers import ConvEncoder
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("dilation", [1, 2])
def test_a_sentence_encodes_the_same_alone_and_padded_in_a_batch(dilation):
    torch.manual_seed(0)
    encoder = ConvEncoder(6, 8, depth=3, kernel=3, dropout=0.0, dilation=dilation).eval()
    x = torch.randn(3, 9, 6)
    lengths = torch.tensor([9, 4, 1])
    states, _ = encoder(x, lengths)
    for b, n in enumerate(lengths.tolist()):
        alone, _ = encoder(x[b : b + 1, :n], lengths[b : b + 1])
        torch.testing.assert_close(states[b, :n], alone[0])
        assert states[b, n:].eq(0).all()
    x[1, 4:] = 100.0  # what lies beyond a length changes nothing
    torch.testing.assert_close(encoder(x, lengths)[0], states)


def test_dilated_blocks_see_further():
    # three blocks of 3-word windows: 7 words undilated, 1 + 2 * (1 + 2 + 4) = 15 dilated by 2
    torch.manual_seed(0)
    for dilation, seen in ((1, 7), (2, 15)):
        encoder = ConvEncoder(4, 8, depth=3, kernel=3, dropout=0.0, dilation=dilation).eval()
        x = torch.randn(1, 20, 4, requires_grad=True)
        # a weighted sum: a LayerNorm's outputs sum to a constant
        (encoder(x, torch.tensor([20]))[0][0, 10] * torch.randn(8)).sum().backward()
        reached = x.grad[0].abs().sum(-1).ne(0).nonzero().flatten().tolist()
        assert reached == list(range(10 - seen // 2, 10 + seen // 2 + 1))


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="odd kernel"):
        ConvEncoder(4, 8, depth=2, kernel=2, dropout=0.1)


def test_a_tiny_parser_trains_with_the_convolutional_encoder(tmp_path):
    run = tmp_path / "run"
    train = FIXTURES / "tiny-train.conllu"
    overrides = ["model/encoder=cnn", "model.encoder.conv_width=16", "model.encoder.conv_depth=2",
                 "trainer.max_steps=150", "trainer.eval_every=150", f"data.dev_file={train}"]
    trainer = Trainer(tiny_config(*overrides), run_dir=run)
    assert trainer.model.scorer.lstm is None and trainer.model.scorer.conv is not None
    sentences = read_conllu(train).sentences
    before = parse(trainer.model, sentences, trainer.task.vocabs, tokens_per_batch=500).scores["uas"]
    assert trainer.fit().step == 150
    model, vocabs, _ = load_parser(run / "checkpoints" / "best.pt")
    assert model.scorer.conv.hidden_size == 16
    after = parse(model, sentences, vocabs, tokens_per_batch=500).scores["uas"]
    assert after > before + 20  # it learns the training trees (43.8 after 150 steps when written)
