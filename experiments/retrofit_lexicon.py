"""A pipeline file trained before the LEMMA lexicon (``TokenLayer.lexicon``, commit 791e09b), with
the lexicon today's code builds from the same training file added to its parser's vocabularies.

Training does not read the lexicon (it is built from the training trees beside the classes and
used only when the lemma column is decoded), so the file written is the one today's code would
have trained from the same run: its trees, tags and features are unchanged, only the lemmas of
forms seen in training change. This is how ``experiments/results/ud_release_layers.md`` scores
the sweep's models with the lexicon without training them again.

    PYTHONPATH=. python experiments/retrofit_lexicon.py --pipeline $RUNS/release45/ta_ttb/ta_ttb.pipeline \\
        --root data/ud-release --treebank ta_ttb --output $RUNS/lexicon/ta_ttb.pipeline
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from parser.data.conllu_io import read_conllu
from parser.data.layers import layer_of
from parser.data.paths import treebank_file
from parser.data.vocab import Vocabularies
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
    lexicons = {name: lexicon for name, lexicon in lexicons.items() if lexicon}
    state["parser"]["vocabs"] = {**state["parser"]["vocabs"], "lexicons": lexicons}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(state, args.output)
    Pipeline.load(args.output)  # what was written loads
    print(f"{args.output}: lexicons {', '.join(f'{k} ({len(v)} forms)' for k, v in lexicons.items())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
