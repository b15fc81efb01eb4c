"""A training split for a treebank distributed without one: hold out part of its dev file.

    python experiments/holdout_split.py --treebank de_gsd --held-out-fraction 0.2 --seed 1 \\
        --out <held-out data root>

writes ``<out>/<treebank>/<treebank>-ud-train.conllu`` (the dev file without the held-out
sentences, in file order), ``<treebank>-ud-dev.conllu`` (the held-out sentences, in file order)
and a copy of ``<treebank>-ud-test.conllu``; ``UD_ROOT=<out>`` (or ``data.root=<out>``) then
trains on the rest of dev, selects on the held-out part and scores on the untouched test file.
The source is read under ``--root``, else $UD_ROOT, else ``<repo>/data/ud``. Each sentence is
copied byte for byte (its comment lines included); the held-out sentences are a seeded uniform
sample of ``round(fraction * sentences)`` of them.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path

from parser.data.paths import resolve_ud_root, treebank_file


def sentence_blocks(path: Path) -> list[str]:
    """The raw sentences of a CoNLL-U file, each with its comment lines and its closing blank
    line, exactly as written (line endings kept). ValueError naming the file and line where the
    file does not end a sentence with a blank line."""
    blocks: list[str] = []
    current: list[str] = []
    with open(path, encoding="utf-8", newline="") as lines:
        for number, line in enumerate(lines, start=1):
            current.append(line)
            if not line.strip():
                if len(current) == 1:
                    raise ValueError(f"{path}:{number}: blank line outside a sentence")
                blocks.append("".join(current))
                current = []
    if current:
        raise ValueError(f"{path}:{number}: the last sentence is not closed by a blank line")
    return blocks


def held_out_indices(count: int, *, fraction: float, seed: int) -> set[int]:
    """Indices of the held-out sentences: a seeded sample of ``round(fraction * count)``.

    >>> sorted(held_out_indices(10, fraction=0.2, seed=1))
    [1, 2]
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"--held-out-fraction={fraction}: expected a value strictly between 0 and 1")
    size = round(fraction * count)
    if size == 0 or size == count:
        raise ValueError(f"--held-out-fraction={fraction} of {count} sentences leaves an empty split")
    return set(random.Random(seed).sample(range(count), size))


def write_split(*, root: Path, treebank: str, fraction: float, seed: int, out: Path) -> dict[str, int]:
    """Write the three files under ``out/treebank``; the sentences per split."""
    blocks = sentence_blocks(treebank_file(root, treebank, "dev"))
    held = held_out_indices(len(blocks), fraction=fraction, seed=seed)
    folder = out / treebank
    folder.mkdir(parents=True, exist_ok=True)
    parts = {"train": [b for i, b in enumerate(blocks) if i not in held],
             "dev": [b for i, b in enumerate(blocks) if i in held]}
    for split, chosen in parts.items():
        (folder / f"{treebank}-ud-{split}.conllu").write_bytes("".join(chosen).encode("utf-8"))
    shutil.copyfile(treebank_file(root, treebank, "test"), folder / f"{treebank}-ud-test.conllu")
    return {split: len(chosen) for split, chosen in parts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--treebank", required=True)
    parser.add_argument("--held-out-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--root", default=None, help="source UD root (default $UD_ROOT or data/ud)")
    parser.add_argument("--out", type=Path, required=True, help="the new data root")
    args = parser.parse_args(argv)
    root = resolve_ud_root(args.root)
    if args.out.resolve() == root.resolve():
        parser.error("--out must differ from the source data root")
    counts = write_split(root=root, treebank=args.treebank, fraction=args.held_out_fraction,
                         seed=args.seed, out=args.out)
    print(f"{args.treebank}: {counts['train']} training sentences, {counts['dev']} held out "
          f"(seed {args.seed}), test copied -> {args.out / args.treebank}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
