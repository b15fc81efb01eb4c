"""The tokenizer rows of ``experiments/results/raw_text_ewt.md``: UDPipe 1's tokenizer and ours,
scored alone (Tokens, Sentences, Words F1) by the official script.

The UDPipe 1 baseline of ``experiments/results/raw_text_ewt.md``: train UDPipe 1's tokenizer
(``ufal.udpipe`` on PyPI; tokenizer only, no tagger or parser) on a CoNLL-U file, then tokenise
a raw text file (one paragraph per line, blank lines between) into CoNLL-U for the official scorer.

    PYTHONPATH=. python experiments/udpipe_tokenizer.py train --train data/ud/en_ewt/en_ewt-ud-train.conllu \\
        --heldout data/ud/en_ewt/en_ewt-ud-dev.conllu --model $RUNS/udpipe_ewt.model \\
        --options "epochs=20;early_stopping=1"
    PYTHONPATH=. python experiments/udpipe_tokenizer.py tokenize --model $RUNS/udpipe_ewt.model \\
        --text test.txt --output udpipe.conllu --gold data/ud/en_ewt/en_ewt-ud-test.conllu

``ours`` runs a ``parser-train-tokenizer`` checkpoint on the same text:

    PYTHONPATH=. python experiments/udpipe_tokenizer.py ours --tokenizer <best.pt> \
        --text test.txt --output ours.conllu --gold data/ud/en_ewt/en_ewt-ud-test.conllu

``--options`` are UDPipe's tokenizer options (``dimension``, ``epochs``, ``batch_size``,
``learning_rate``, ``dropout``, ``early_stopping``, ``segment_size``...): the results file says which
were used.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from parser.data.conllu_io import format_sentence
from parser.eval.official import official_evaluation
from parser.pipeline import read_paragraph_stream
from parser.tokenize import iter_sentences, load_tokenizer


def _udpipe():
    import ufal.udpipe  # an optional baseline dependency (pip install ufal.udpipe)

    return ufal.udpipe


def train(train_path: Path, heldout: Path | None, model_path: Path, options: str) -> None:
    udpipe = _udpipe()
    error = udpipe.ProcessingError()
    text, held = read_sentences(udpipe, train_path, error), udpipe.Sentences()
    if heldout:
        held = read_sentences(udpipe, heldout, error)
    started = time.time()
    model = udpipe.Trainer.train("morphodita_parsito", text, held, options, "none", "none", error)
    if error.occurred():
        raise SystemExit(f"udpipe training failed: {error.message}")
    model_path.write_bytes(model.encode("latin-1") if isinstance(model, str) else model)
    print(f"trained in {time.time() - started:.0f}s -> {model_path}", flush=True)


def read_sentences(udpipe, path: Path, error):
    reader = udpipe.InputFormat.newConlluInputFormat()
    reader.setText(path.read_text(encoding="utf-8"))
    sentences, sentence = udpipe.Sentences(), udpipe.Sentence()
    while reader.nextSentence(sentence, error):
        sentences.push_back(sentence)
        sentence = udpipe.Sentence()
    if error.occurred():
        raise SystemExit(f"{path}: {error.message}")
    return sentences


def tokenize(model_path: Path, text_path: Path, output: Path) -> None:
    udpipe = _udpipe()
    model = udpipe.Model.load(str(model_path))
    if model is None:
        raise SystemExit(f"cannot load {model_path}")
    pipeline = udpipe.Pipeline(model, "tokenize", udpipe.Pipeline.NONE, udpipe.Pipeline.NONE,
                               "conllu")
    error = udpipe.ProcessingError()
    started = time.time()
    result = pipeline.process(text_path.read_text(encoding="utf-8"), error)
    if error.occurred():
        raise SystemExit(f"udpipe failed: {error.message}")
    output.write_text(chain_heads(result), encoding="utf-8")
    print(f"tokenised in {time.time() - started:.1f}s -> {output}", flush=True)


def ours(tokenizer_path: Path, text_path: Path, output: Path) -> None:
    tokenizer = load_tokenizer(tokenizer_path)
    started = time.time()
    with open(text_path, encoding="utf-8") as source:
        blocks = [format_sentence(s) for s in iter_sentences(
            tokenizer, read_paragraph_stream(source), path=str(text_path))]
    output.write_text(chain_heads("".join(blocks)), encoding="utf-8")
    print(f"tokenised in {time.time() - started:.1f}s -> {output}", flush=True)


def chain_heads(conllu: str) -> str:
    """HEAD/DEPREL filled with a left chain (word 1 -> ROOT, word i -> i-1), so that the official
    scorer loads a tokenizer-only file; only its Tokens, Sentences and Words rows mean anything."""
    lines = []
    for line in conllu.split("\n"):
        cols = line.split("\t")
        if len(cols) == 10 and cols[0].isdigit():
            cols[6], cols[7] = str(int(cols[0]) - 1), "root" if cols[0] == "1" else "dep"
        lines.append("\t".join(cols))
    return "\n".join(lines)


def score(gold: Path, pred: Path) -> dict[str, float]:
    """Official Tokens, Sentences and Words F1 (``udtools``' udeval, as parser-evaluate uses)."""
    scores = official_evaluation(gold, pred)
    return {row: round(scores[row].f1, 2) for row in ("Tokens", "Sentences", "Words")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--train", type=Path, required=True)
    t.add_argument("--heldout", type=Path)
    t.add_argument("--model", type=Path, required=True)
    t.add_argument("--options", default="")
    k = sub.add_parser("tokenize")
    k.add_argument("--model", type=Path, required=True)
    k.add_argument("--text", type=Path, required=True)
    k.add_argument("--output", type=Path, required=True)
    k.add_argument("--gold", type=Path, help="score the output against this CoNLL-U file")
    o = sub.add_parser("ours")
    o.add_argument("--tokenizer", type=Path, required=True)
    o.add_argument("--text", type=Path, required=True)
    o.add_argument("--output", type=Path, required=True)
    o.add_argument("--gold", type=Path, help="score the output against this CoNLL-U file")
    args = parser.parse_args(argv)
    if args.command == "train":
        train(args.train, args.heldout, args.model, args.options)
        return 0
    if args.command == "ours":
        ours(args.tokenizer, args.text, args.output)
    else:
        tokenize(args.model, args.text, args.output)
    if args.gold:
        print(json.dumps(score(args.gold, args.output)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
