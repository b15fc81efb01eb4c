"""The layers' dictionary on a dev set (``TokenLayer.lexicon``): each layer's accuracy from gold
tokens with the head's argmax alone and with the dictionary of the training file, split by words
seen and unseen in training, for suffix lengths to choose ``SUFFIX_LENGTH`` from; and the UPOS
of the joint tag head decoded through a dictionary of seen forms only, or of forms and suffixes.

The parser of a pipeline file (or a parser checkpoint) reads the gold tokens and UPOS-free input
of the dev file; its layers' scores are decoded twice by :meth:`TokenLayer.decode`. Nothing is
retrained: the dictionary only constrains decoding.

    PYTHONPATH=. python experiments/layer_dictionary.py --model $RUNS/release45/ta_ttb/ta_ttb.pipeline \\
        --root data/ud-release --treebank ta_ttb --split dev --suffix-lengths 3 4 5 6 8
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

from parser.data.batching import encode_all
from parser.data.conllu_io import read_conllu
from parser.data.layers import TokenLayer, UposColumn, layer_of
from parser.data.layers.base import SUFFIX_LENGTH
from parser.data.paths import treebank_file
from parser.inference import load_parser
from parser.inference.parse import model_outputs
from parser.pipeline import Pipeline
from parser.runtime.checkpoint import load_checkpoint


def model_and_vocabs(path: Path):
    """(model, vocabs) of a pipeline file or a parser checkpoint."""
    if "parser" in load_checkpoint(path):
        pipeline = Pipeline.load(path)
        return pipeline.model, pipeline.vocabs
    model, vocabs, _ = load_parser(path)
    return model, vocabs


class UposWithSuffixes(UposColumn):
    suffix_length = SUFFIX_LENGTH


def count_upos(counts: Counter, scores, batch, sentences, vocabs, arms: dict) -> None:
    """UPOS right per arm (the head's argmax, then each dictionary), seen and unseen words."""
    for b, (index, n) in enumerate(zip(batch.index.tolist(), batch.lengths.tolist())):
        sentence, rows = sentences[index], scores[b, 1 : n + 1]
        seen = arms["forms only"]["forms"]
        guesses = {"argmax": UposColumn().decode([sentence.forms], rows[None], vocabs.upos)[0]}
        for arm, lexicon in arms.items():
            guesses[arm] = UposColumn().decode([sentence.forms], rows[None], vocabs.upos, lexicon)[0]
        for w, (form, gold) in enumerate(zip(sentence.forms, sentence.upos)):
            kind = "seen" if form in seen else "unseen"
            counts[("upos", kind, "words")] += 1
            for arm, guess in guesses.items():
                counts[("upos", kind, arm)] += guess[w] == gold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--treebank", required=True)
    parser.add_argument("--split", default="dev")
    parser.add_argument("--suffix-lengths", type=int, nargs="+", default=[4])
    args = parser.parse_args(argv)
    model, vocabs = model_and_vocabs(args.model)
    train = read_conllu(treebank_file(args.root, args.treebank, "train")).sentences
    trees = [s for s in train if any(h >= 0 for h in s.heads)]
    sentences = read_conllu(treebank_file(args.root, args.treebank, args.split)).sentences
    encoded = encode_all(sentences, vocabs, layer_targets=False)
    dictionaries = {}
    for length in args.suffix_lengths:
        TokenLayer.suffix_length = length  # the dictionary's suffixes are built up to it
        dictionaries[length] = {name: layer_of(name).lexicon(trees) for name in vocabs.layers}
    TokenLayer.suffix_length = SUFFIX_LENGTH
    # UPOS (the tag head; UposColumn keeps seen forms only): forms only against forms and suffixes
    tag_arms = {"forms only": UposColumn().lexicon(trees),
                f"suffixes up to {SUFFIX_LENGTH}": UposWithSuffixes().lexicon(trees)}
    counts: Counter = Counter()
    with torch.no_grad():
        for batch, out in model_outputs(model, encoded, tokens_per_batch=2000,
                                        cells_per_batch=None, device="cpu"):
            if getattr(out, "tag_scores", None) is not None:
                count_upos(counts, out.tag_scores, batch, sentences, vocabs, tag_arms)
            for name, scores in out.layer_scores.items():
                layer, classes = layer_of(name), vocabs.layers[name]
                for b, (index, n) in enumerate(zip(batch.index.tolist(), batch.lengths.tolist())):
                    sentence, rows = sentences[index], scores[b, 1 : n + 1]
                    gold = sentence.column(layer.column)
                    seen = dictionaries[args.suffix_lengths[0]][name]["forms"]
                    kinds = ["seen" if form in seen else "unseen" for form in sentence.forms]
                    arms = {"argmax": layer.decode([sentence.forms], rows[None], classes)[0]}
                    for length, dictionary in dictionaries.items():
                        arms[f"suffix {length}"] = layer.decode(
                            [sentence.forms], rows[None], classes, dictionary[name])[0]
                    for kind, truth, *guesses in zip(kinds, gold, *arms.values()):
                        counts[(name, kind, "words")] += 1
                        for arm, guess in zip(arms, guesses):
                            counts[(name, kind, arm)] += guess == truth
    table = {}
    arms_of = {name: ["argmax", *(f"suffix {length}" for length in args.suffix_lengths)]
               for name in vocabs.layers}
    if counts[("upos", "seen", "words")]:
        arms_of["upos"] = ["argmax", *tag_arms]
    for name, arms in arms_of.items():
        for kind in ("seen", "unseen", "all"):
            words = (counts[(name, kind, "words")] if kind != "all" else
                     counts[(name, "seen", "words")] + counts[(name, "unseen", "words")])
            right = {arm: (counts[(name, kind, arm)] if kind != "all" else
                           counts[(name, "seen", arm)] + counts[(name, "unseen", arm)])
                     for arm in arms}
            table[f"{name} {kind}"] = {"words": words, **{arm: round(100 * r / max(words, 1), 2)
                                                          for arm, r in right.items()}}
    print(json.dumps({"treebank": args.treebank, "split": args.split, "accuracy": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
