"""The screenshots of docs/pictures.md: three pages drawn by ``parser.view`` from the shared UD
test files, rendered by headless Chromium.

    python experiments/pictures.py --out docs/img --model $RUNS/en/en_ewt.pipeline \\
        [--root /path/to/ud] [--chromium chromium]

- ``tree_confidence.png`` (only with ``--model``: a pipeline file or a parser ``best.pt``): a
  real prediction. The model parses the whole EWT test file as ``parser-predict
  confidence=true`` does (the gold tokens of the CoNLL-U file, every tag its own:
  :meth:`parser.Pipeline.parse_file`), which writes ``HeadProb``/``DeprelProb`` in MISC; each
  word's runner-up head (``AltHead``/``AltHeadProb``: its most probable head other than the one
  written) comes from the same tree CRF's head marginals, as the service's page takes it
  (:func:`parser.serve.trees.head_marginals`). The sentence drawn, against its gold tree, is the
  first in file order with 8 to 20 words, a non-projective gold tree, a non-projective arc in the
  prediction too (the picture dashes the drawn tree's), at least one head or relation wrong
  against gold, and a runner-up head of probability at least ``parser.view.svg.ALT_SHOWN`` (the
  dotted arc); its id and its words' marginals are printed. No such sentence: exit status 1,
  naming the conditions;
- ``tree_arabic.png``: an Arabic PADT test sentence (right to left, a multiword token);
- ``tree_french.png``: a French GSD test sentence with the multiword tokens ``du`` and ``au``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

from parser.data.conllu_io import Sentence, format_sentence, read_conllu
from parser.data.misc import ALT_HEAD, ALT_HEAD_PROB, DEPREL_PROB, HEAD_PROB, misc_entries
from parser.data.paths import resolve_ud_root
from parser.inference import load_parser, reads_upos
from parser.pipeline import Pipeline
from parser.serve.trees import head_marginals, with_runner_up
from parser.view import page_html
from parser.view.layout import nonprojective
from parser.view.svg import ALT_SHOWN

ARABIC_LINE = 438  # first line of the PADT test sentence drawn
FRENCH_WORDS = ("du", "au")
# the page above and below its SVG: title, sentence id, padding (95 px to the figure's bottom
# edge, measured) and a margin; a taller SVG than --height leaves room for gets a taller window
PAGE_CHROME = 115
WORDS = (8, 20)  # the English sentence's length, in syntactic words
WANTED = (f"{WORDS[0]} to {WORDS[1]} words, a non-projective gold tree, a non-projective "
          "predicted arc, a wrong head or relation against gold and a runner-up head of "
          f"probability >= {ALT_SHOWN}")


def main() -> None:
    args = _args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = resolve_ud_root(args.root)
    pages = {}
    if args.model:
        pages["tree_confidence"] = _english(root, args.model)
    else:
        print("no --model: tree_confidence.png not made (it draws a model's prediction)")
    pages["tree_arabic"] = ([_arabic(root)], None)
    pages["tree_french"] = ([_french(root)], None)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (sentences, gold) in pages.items():
            page = Path(tmp) / f"{name}.html"
            page.write_text(page_html(sentences, gold=gold, title=name), encoding="utf-8")
            svg = re.search(r'<svg [^>]*width="(\d+)" height="(\d+)"', page.read_text())
            width = int(svg.group(1)) + 80
            height = max(args.height, int(svg.group(2)) + PAGE_CHROME)
            subprocess.run([args.chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", f"--window-size={width},{height}",
                            f"--screenshot={out / (name + '.png')}", page.as_uri()],
                           check=True, capture_output=True)
            print(out / f"{name}.png")


def _english(root: Path, model: str) -> tuple[list[str], list[Sentence]]:
    """The predicted sentence drawn (CoNLL-U with the confidence MISC and ``AltHead``) and its
    gold sentence; see the module docstring."""
    gold_path = root / "en_ewt" / "en_ewt-ud-test.conllu"
    pipeline = _load(model)
    with tempfile.TemporaryDirectory() as tmp:
        predicted_path = Path(tmp) / "predicted.conllu"
        options = pipeline.request(format="conllu", confidence=True,
                                   retag=reads_upos(pipeline.config))  # never the gold UPOS
        pipeline.parse_file(gold_path, predicted_path, options)
        predicted = read_conllu(predicted_path, require_trees=False, single_root=False,
                                check_heads=False)
    gold = read_conllu(gold_path)
    if len(predicted) != len(gold):
        raise SystemExit(f"{model}: {len(predicted)} sentences predicted for the "
                         f"{len(gold)} of {gold_path}")
    pairs = [(p, g) for p, g in zip(predicted, gold) if _candidate(p, g)]
    marginals = head_marginals(pipeline, [p for p, _ in pairs], None) if pairs else []
    for (sentence, truth), matrix in zip(pairs, marginals):
        drawn = with_runner_up(format_sentence(sentence), matrix)
        words = [line.split("\t") for line in drawn.split("\n") if line.split("\t")[0].isdigit()]
        runner_up = [{key: entries[key] for key in (ALT_HEAD, ALT_HEAD_PROB) if key in entries}
                     for entries in (misc_entries(columns[9]) for columns in words)]
        if any(entry and float(entry[ALT_HEAD_PROB]) >= ALT_SHOWN for entry in runner_up):
            _report(sentence, truth, runner_up, model)
            return [drawn], [truth]
    raise SystemExit(f"{model}: no sentence of {gold_path} has {WANTED} ({len(pairs)} had all "
                     "but the runner-up head)")


def _load(model: str) -> Pipeline:
    """A pipeline file, or a parser checkpoint as a pipeline without tokenizer or tagger."""
    path = Path(model)
    if not path.is_file():
        raise SystemExit(f"--model {model}: no such file")
    if path.suffix == ".pipeline":
        return Pipeline.load(path, confidence=True)
    parser = load_parser(path)
    if reads_upos(parser[2]):
        raise SystemExit(f"--model {model}: this parser reads UPOS from its input and has no "
                         "tagger: give the pipeline file that holds it and its tagger")
    return Pipeline(parser=parser, confidence=True)


def _candidate(predicted: Sentence, gold: Sentence) -> bool:
    """Every condition but the runner-up head (which needs the marginals)."""
    return (WORDS[0] <= len(gold) <= WORDS[1] and predicted.is_annotated
            and predicted.forms == gold.forms
            and bool(nonprojective(gold.heads)) and bool(nonprojective(predicted.heads))
            and (predicted.heads != gold.heads or predicted.deprels != gold.deprels))


def _report(sentence: Sentence, gold: Sentence, runner_up: list[dict[str, str]],
            model: str) -> None:
    print(f"tree_confidence: {gold.sent_id} ({len(gold)} words), predicted by {model}")
    print(f"  {gold.text}")
    print("  id form            head gold HeadProb  deprel       gold         DeprelProb "
          "AltHead AltHeadProb")
    nonproj_gold, nonproj_pred = nonprojective(gold.heads), nonprojective(sentence.heads)
    rows = zip(sentence.forms, sentence.heads, gold.heads, sentence.deprels, gold.deprels,
               sentence.column("MISC"), runner_up)
    for i, (form, head, gold_head, deprel, gold_deprel, misc, alt) in enumerate(rows, start=1):
        entries = misc_entries(misc)
        marks = ("H" if head != gold_head else " ") + ("L" if deprel != gold_deprel else " ")
        marks += ("n" if i in nonproj_pred else " ") + ("g" if i in nonproj_gold else " ")
        print(f"  {i:2d} {form[:15]:15s} {head:4d} {gold_head:4d} "
              f"{entries.get(HEAD_PROB, '-'):>8s}  {deprel or '_':12s} {gold_deprel or '_':12s} "
              f"{entries.get(DEPREL_PROB, '-'):>10s} {alt.get(ALT_HEAD, '-'):>7s} "
              f"{alt.get(ALT_HEAD_PROB, '-'):>11s} {marks}")
    print("  (H: wrong head, L: wrong relation, n: non-projective predicted arc, "
          "g: non-projective gold arc)")


def _arabic(root: Path):
    return next(s for s in read_conllu(root / "ar_padt" / "ar_padt-ud-test.conllu")
                if s.line == ARABIC_LINE)


def _french(root: Path):
    for sentence in read_conllu(root / "fr_gsd" / "fr_gsd-ud-test.conllu"):
        tokens = {raw.split("\t")[1] for raw in sentence.lines
                  if not raw.startswith("#") and "-" in raw.split("\t")[0]}
        if all(word in tokens for word in FRENCH_WORDS) and len(sentence) <= 16:
            return sentence
    raise SystemExit("no French GSD test sentence with du and au of at most 16 words")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--root", default=None, help="UD data root (default: $UD_ROOT, data/ud)")
    parser.add_argument("--model", default=None,
                        help="a pipeline file or parser best.pt: predicts tree_confidence.png")
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--height", type=int, default=470,
                        help="window height, at least (a taller picture gets more)")
    return parser.parse_args()


if __name__ == "__main__":
    main()
