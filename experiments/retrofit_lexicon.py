"""A pipeline file trained before the layers' dictionaries (``TokenLayer.lexicon``), with the
dictionaries today's code builds from the same training file put in its parser's vocabularies.

Training does not read the dictionaries (they are built from the training trees beside the
classes and used only when the layers' columns are decoded), so the file written is the one
today's code would have trained from the same run: the LEMMA, XPOS, FEATS and (for a parser that
tags its own words) UPOS columns change, and the trees where the decoder's UD punct rule reads the
new UPOS. This is how ``experiments/results/ud_release_layers.md``
scores the sweep's models with the dictionaries without training them again.

    PYTHONPATH=. python experiments/retrofit_lexicon.py --pipeline $RUNS/release45/ta_ttb/ta_ttb.pipeline \\
        --root data/ud-release --treebank ta_ttb --output $RUNS/lexicon/ta_ttb.pipeline
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from parser.data.conllu_io import read_conllu
from parser.data.layers import UposColumn, layer_of
from parser.data.paths import treebank_file
from parser.data.vocab import Vocabularies
from parser.models.parser_model import reads_own_tags
from parser.pipeline import Pipeline
from parser.runtime.checkpoint import load_checkpoint, save_checkpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", type=Path, required=True)
    parser.add_argument("--root", type=Path, required=True, help="the data root of the treebank")
    parser.add_argument("--treebank", required=True)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    state = load_checkpoint(args.pipeline)
    vocabs = Vocabularies.from_state_dict(state["parser"]["vocabs"])
    trees = read_conllu(treebank_file(args.root, args.treebank, "train")).sentences
    lexicons = {name: layer_of(name).lexicon(trees) for name in vocabs.layers}
    if reads_own_tags(state["parser"]["config"]["model"]):  # its tag head's UPOS dictionary
        lexicons["upos"] = UposColumn().lexicon(trees)
    lexicons = {name: lexicon for name, lexicon in lexicons.items() if lexicon}
    state["parser"]["vocabs"] = dataclasses.replace(vocabs, lexicons=lexicons).state_dict()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(state, args.output)
    Pipeline.load(args.output)  # what was written loads
    sizes = ", ".join(f"{name} ({len(lexicon['forms'])} forms)" for name, lexicon in lexicons.items())
    print(f"{args.output}: dictionaries {sizes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
