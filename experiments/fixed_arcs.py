"""Fixed arcs on EWT test: keep 10%, 30% and 50% of each sentence's gold heads (words chosen at
random, seeded), parse the other words with ``keep_heads=given`` (the tree CRF restricted to trees
with the kept arcs, :mod:`parser.inference.fixed_arcs`), and score the words left to parse against
the same words parsed with nothing kept. Both are the most probable tree of the model's CRF
(restricted or not; rank 1 of ``kbest=1``), so no decoding rule applied after the CRF (the UD
punct attachment) differs between them.

    python experiments/fixed_arcs.py --checkpoint <best.pt> --out experiments/results/fixed_arcs.md

Kept words keep their gold HEAD and DEPREL, as ``parser-predict keep_heads=given`` does with a
partially annotated file. UAS / LAS count every word left to parse (punctuation included); LAS
compares the whole DEPREL (subtypes included). Run from the repository root; ``UD_ROOT`` (default
``data/ud``) holds the treebanks.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from parser.data.conllu_io import Sentence, read_conllu
from parser.inference import load_decoder
from parser.inference.alternatives import parse_alternatives
from parser.inference.fixed_arcs import given_heads

REPO = Path(__file__).resolve().parents[1]


def ewt_test() -> Path:
    root = Path(os.environ.get("UD_ROOT", REPO / "data" / "ud"))
    found = sorted((root / "en_ewt").glob("*-ud-test.conllu"))
    if not found:
        sys.exit(f"no en_ewt test file under {root} (set UD_ROOT)")
    return found[0]


def kept_words(sentences: list[Sentence], fraction: float, *, seed: int) -> list[set[int]]:
    """Per sentence, the words (1-based) whose gold head is kept: round(fraction * n) of them."""
    rng = random.Random(seed)
    return [set(rng.sample(range(1, len(s) + 1), round(fraction * len(s)))) for s in sentences]


def with_kept_heads(sentence: Sentence, kept: set[int]) -> Sentence:
    """``sentence`` with HEAD and DEPREL only on the ``kept`` words (the input keep_heads reads)."""
    heads = [h if dep in kept else -1 for dep, h in enumerate(sentence.heads, start=1)]
    rels = [r if dep in kept else None for dep, r in enumerate(sentence.deprels, start=1)]
    return replace(sentence, heads=heads, deprels=rels)


def parse_all(model, vocabs, sentences, *, kept, tokens_per_batch: int):
    partial = [with_kept_heads(s, k) for s, k in zip(sentences, kept)]
    # kbest=1: the most probable tree of the (restricted) CRF in every case, so that the 0% line
    # is not decoded differently (the decoder's UD punct attachment is not applied under
    # constraints).
    entries = parse_alternatives(model, partial, vocabs, tokens_per_batch=tokens_per_batch,
                                 constraints=[given_heads(s) for s in partial], kbest=1)
    refused = [e.error for e in entries if e.error is not None]
    if refused:  # gold heads always admit the gold tree
        raise RuntimeError(f"{len(refused)} sentences refused; first: {refused[0]}")
    return [e.trees[0] for e in entries]


def score(sentences, trees, kept) -> tuple[int, int, int]:
    """``(words left to parse, correct heads, correct heads and relations)``."""
    words = heads = labeled = 0
    for sentence, tree, fixed in zip(sentences, trees, kept):
        for dep in range(1, len(sentence) + 1):
            if dep in fixed:
                continue
            words += 1
            if tree.heads[dep - 1] == sentence.heads[dep - 1]:
                heads += 1
                labeled += tree.deprels[dep - 1] == sentence.deprels[dep - 1]
    return words, heads, labeled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a parser-train best.pt")
    parser.add_argument("--data", default=None, help="CoNLL-U to use (default: EWT test)")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokens-per-batch", type=int, default=5000)
    parser.add_argument("--out", default=None, help="write the markdown table here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = Path(args.data) if args.data else ewt_test()
    sentences = list(read_conllu(data).sentences)
    model, vocabs, _ = load_decoder(args.checkpoint, device="cpu")
    start = time.perf_counter()
    nothing = [set() for _ in sentences]
    baseline = parse_all(model, vocabs, sentences, kept=nothing, tokens_per_batch=args.tokens_per_batch)
    rows = []
    for fraction in args.fractions:
        kept = kept_words(sentences, fraction, seed=args.seed)
        trees = parse_all(model, vocabs, sentences, kept=kept, tokens_per_batch=args.tokens_per_batch)
        words, uas, las = score(sentences, trees, kept)
        _, uas0, las0 = score(sentences, baseline, kept)
        rows.append(f"| {100 * fraction:.0f}% | {words} | {100 * uas0 / words:.2f} | "
                    f"{100 * uas / words:.2f} | {100 * las0 / words:.2f} | {100 * las / words:.2f} |")
    words, uas0, las0 = score(sentences, baseline, nothing)
    seconds = time.perf_counter() - start
    text = "\n".join([
        "# Fixed arcs on EWT test (keep_heads=given)",
        "",
        ("Command: `python experiments/fixed_arcs.py --checkpoint <best.pt> --out "
        "experiments/results/fixed_arcs.md`"),
        "",
        (f"Checkpoint: `{Path(args.checkpoint).name}`; data: `{data.name}` ({len(sentences)} "
        f"sentences, {words} words); seed {args.seed}; machine: {platform.machine()}, "
        f"torch {torch.__version__}, 1 thread, {seconds:.0f} s in all."),
        "",
        ("Each sentence keeps the gold HEAD and DEPREL of round(fraction x n) random words; the other "
        "words are parsed with the tree CRF restricted to trees containing the kept arcs (its most "
        "probable tree; the 0% line is the unrestricted CRF's most probable tree). Scores "
        "are over the words left to parse (punctuation included), with nothing kept (0%) and with "
        "the arcs kept."),
        "",
        f"Nothing kept, all words: UAS {100 * uas0 / words:.2f}, LAS {100 * las0 / words:.2f}.",
        "",
        "| kept | words left | UAS 0% | UAS kept | LAS 0% | LAS kept |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
