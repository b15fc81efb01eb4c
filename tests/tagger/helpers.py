"""Small tagging batches and brute-force chain quantities for the tagger tests, and a tiny
trained tagger checkpoint for the pipeline tests (tagger + parser)."""

from __future__ import annotations

from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from parser.cli.train_tagger import train
from parser.data.batching import collate, encode_all
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.structs import LinearChainCRF
from parser.tagger.config import register_tagger_configs, tagger_config_dir
from parser.tagger.model import TaggerOutput
from tests.structs.brute_chain import enumerate_chain

TAGS = ["DET", "NOUN", "VERB"]


def sentence(forms: list[str], tags: list[str | None]) -> Sentence:
    n = len(forms)
    return Sentence([], forms, ["_"] * n, list(tags), [-1] * n, [None] * n, "<test>", 1, [1] * n, [])


def corpus() -> list[Sentence]:
    """Three short sentences over three tags (first tag order fixes the tag ids by frequency)."""
    return [
        sentence(["The", "dog", "barks"], ["DET", "NOUN", "VERB"]),
        sentence(["the", "Cats", "walked", "slowly"], ["DET", "NOUN", "VERB", "VERB"]),
        sentence(["Dogs", "bark"], ["NOUN", "VERB"]),
    ]


def vocabs_of(sentences: list[Sentence]) -> Vocabularies:
    return Vocabularies.build(sentences, min_freq=1)


def batch_of(sentences: list[Sentence], vocabs: Vocabularies):
    return collate(encode_all(sentences, vocabs), labeled=False)


def random_output(batch, n_tags: int, *, seed: int) -> tuple[TaggerOutput, torch.Tensor]:
    """A TaggerOutput over random float64 scores ``[B, T, S, S]`` (leaf tensor returned too)."""
    generator = torch.Generator().manual_seed(seed)
    positions = batch.words.shape[1] - 1
    scores = torch.randn(batch.size, positions, n_tags, n_tags, generator=generator,
                         dtype=torch.float64, requires_grad=True)
    emissions = torch.zeros(batch.size, positions, n_tags, dtype=torch.float64)
    return TaggerOutput(LinearChainCRF(scores, batch.lengths), emissions), scores


def brute_unary(scores: torch.Tensor, n: int) -> torch.Tensor:
    """``[n, S]`` p(y_i = s) of one sentence by enumeration (differentiable in ``scores``)."""
    seqs, _, log_weights, log_z = enumerate_chain(scores, n)
    probs = (log_weights - log_z).exp()
    states = scores.shape[-1]
    onehot = torch.zeros(len(seqs), n, states, dtype=torch.float64)
    for k, seq in enumerate(seqs):
        for i, tag in enumerate(seq):
            onehot[k, i, tag] = 1.0
    return torch.einsum("k,kis->is", probs, onehot)


TINY_TAGGER = ["tagger.word_dim=16", "tagger.char_dim=8", "tagger.char_hidden=8", "tagger.char_out=8",
               "tagger.lstm_hidden=16", "tagger.lstm_layers=1", "tagger.dropout=0.0",
               "tagger.word_dropout=0.0", "optim.warmup_steps=0", "optim.lr=1e-2",
               "trainer.progress=false", "logger.tensorboard=false"]


def tagger_config(*overrides: str) -> DictConfig:
    """``parser-train-tagger``'s config on the fixtures (``data=tiny``) with a tiny model."""
    register_tagger_configs()
    with initialize_config_dir(config_dir=str(tagger_config_dir()), version_base="1.3"):
        return compose(config_name="tagger", overrides=["data=tiny", *TINY_TAGGER, *overrides])


def train_tiny_tagger(run_dir: Path, *, epochs: int = 6) -> Path:
    """Train a tiny tagger on the fixtures (``data=tiny``) for ``epochs`` epochs through the real
    training function; its ``best.pt``. A second or so on one thread."""
    previous = torch.get_num_threads()
    try:
        train(tagger_config(f"trainer.max_epochs={epochs}"), run_dir=run_dir)  # trainer.num_threads=1
    finally:
        torch.set_num_threads(previous)
    return Path(run_dir) / "checkpoints" / "best.pt"
