"""The encoders of the biaffine scorer on one core: the default model's scorer forward (word and
character embeddings, encoder, MLPs, arc and label scores, tag and layer heads) over EWT test in
the prediction path's batches, with the BiLSTM (the default) or the convolutional encoder of
``model/encoder=cnn``, untrained (the arithmetic does not depend on the weights), and the encoder
stage alone. The cnn rows keep the default model's other sizes. The first measurement towards
issue 47's lean student; its accuracy needs training, not done here.

    PYTHONPATH=. taskset -c 1 python experiments/bench_encoders.py   # writes experiments/results/encoders.md
"""

from __future__ import annotations

import argparse

import torch
from common import interleaved_cpu_times, markdown_table, timing_note, write_result
from hydra import compose, initialize_config_dir

from parser.config import config_dir, register_configs
from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import read_conllu
from parser.data.paths import resolve_ud_root, treebank_file
from parser.data.vocab import Vocabularies
from parser.models.parser_model import build_parser, layers_of

ENCODERS = {"BiLSTM 3 x 400 (default)": [],
            "BiLSTM 2 x 200 (experiment=release_cpu)": ["experiment=release_cpu"],
            "cnn 256 x 4": ["model/encoder=cnn"],
            "cnn 128 x 4": ["model/encoder=cnn", "model.encoder.conv_width=128"]}
BASE = "BiLSTM 3 x 400 (default)"


def model_of(overrides: list[str], vocabs: Vocabularies):
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=["data.treebank=en_ewt", *overrides])
    model = build_parser(cfg.model, vocabs.sizes(), upos=vocabs.upos, chars=vocabs.chars,
                         rels=vocabs.rels, layer_sizes=vocabs.layer_sizes()).eval()
    return model, cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    root = resolve_ud_root(None)
    train = read_conllu(treebank_file(root, "en_ewt", "train")).sentences
    test = read_conllu(treebank_file(root, "en_ewt", "test")).sentences
    _, cfg = model_of([], Vocabularies.build([], min_freq=1))
    vocabs = Vocabularies.build(train, min_freq=2, layers=layers_of(cfg.model))
    batches = list(BucketBatcher(encode_all(test, vocabs, layer_targets=False), tokens_per_batch=5000,
                                 shuffle=False, max_length=None, labeled=False, length_spread=0.1))
    words = sum(len(s) for s in test)
    runs, encoders = {}, {}
    for name, overrides in ENCODERS.items():
        model, _ = model_of(overrides, vocabs)
        scorer = model.scorer
        stage = scorer.lstm if scorer.lstm is not None else scorer.conv
        inputs = []
        with torch.no_grad():
            for batch in batches:
                x = scorer.word_embed(batch.words) + scorer.char_encoder(
                    batch.chars, torch.arange(batch.words.shape[1]) <= batch.lengths[:, None])
                inputs.append((x, batch.lengths + 1))

        def forward(scorer=scorer) -> None:
            with torch.no_grad():
                for batch in batches:
                    scorer(batch)

        def encode(stage=stage, inputs=inputs) -> None:
            with torch.no_grad():
                for x, lengths in inputs:
                    stage(x, lengths)

        runs[name], encoders[name] = forward, encode
    times = interleaved_cpu_times({**{f"scorer {k}": v for k, v in runs.items()},
                                   **{f"encoder {k}": v for k, v in encoders.items()}},
                                  repeats=args.repeats)
    base_scorer, base_encoder = times[f"scorer {BASE}"], times[f"encoder {BASE}"]
    rows = [[name, times[f"scorer {name}"], round(words / times[f"scorer {name}"]),
             base_scorer / times[f"scorer {name}"], times[f"encoder {name}"],
             base_encoder / times[f"encoder {name}"]] for name in ENCODERS]
    body = markdown_table(["encoder", "scorer forward s (EWT test)", "words/s", "speed-up",
                           "encoder stage s", "speed-up"], rows)
    note = (f"{len(test)} sentences, {words} words, {len(batches)} batches of at most 5,000 "
            f"tokens (prediction's); the default model of `parser-train data.treebank=en_ewt` "
            f"(layers {', '.join(vocabs.layers)}).")
    write_result("encoders.md", "The scorer's encoders on one core (issue 47)",
                 "PYTHONPATH=. taskset -c 1 python experiments/bench_encoders.py",
                 f"{__doc__.split(chr(10) + chr(10))[0]}\n\n{note}\n\n{body}\n\n{timing_note()}")
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
