"""The dense arithmetic a biaffine BiLSTM parser cannot avoid when it parses a file, and how long
it takes at one core's best matrix-multiply rate: a floor under ``parser-predict``'s time that no
engineering of the prediction path removes (issue 23's speed target, predict_speed.md).

Counted as multiply-adds, lower bounds all: no padding, each distinct form of the whole file
through the character BiLSTM once, ROOT and labels counted as the model computes them. Per part:

- word BiLSTM: per word, layer and direction ``4 H (n_in + H)``;
- character BiLSTM: per character of each distinct form and direction ``4 h (c + h)``, plus the
  projection of each form;
- MLPs and the tag head: per position (words and ROOT) ``n_in x n_out`` of every ``nn.Linear``;
- arc biaffine: per position ``d^2``, per (dependent, head) cell ``d``;
- label bilinear: per position ``L d^2``, per cell ``L d`` (every arc's label distribution is needed
  before decoding when UD rules are on: parser/models/ud_rules.py).

The rate is the best of five timings of a 1024 x 1024 x 1024 float32 matmul in this process, one
thread: what the machine's BLAS reaches on a large, cache-friendly product, which the LSTM's
per-step products (a few dozen rows) do not.

    python experiments/predict_arithmetic.py --checkpoint CHECKPOINT [--input FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

from parser.data.conllu_stream import stream_conllu
from parser.inference.loading import load_decoder
from parser.models.char_encoder import CharLSTM
from parser.models.layers import Biaffine, Bilinear, BiLSTM

DEFAULT_INPUT = "data/ud/en_ewt/en_ewt-ud-test.conllu"


def lstm_cost(lstm: BiLSTM) -> int:
    """Multiply-adds of one step of every layer and direction of ``lstm``."""
    return sum(4 * layer.hidden_size * (layer.input_size + layer.hidden_size)
               for layers in (lstm.forward_layers, lstm.backward_layers) for layer in layers)


def multiply_adds(model: nn.Module, forms: list[list[str]]) -> dict[str, int]:
    """Lower bounds of the multiply-adds of ``model``'s scorer on sentences of ``forms``, by part."""
    scorer = model.scorer
    if not isinstance(getattr(scorer, "lstm", None), BiLSTM):
        raise TypeError("predict_arithmetic: counts the BiLSTM biaffine scorer only "
                        f"(this checkpoint's scorer: {type(scorer).__name__})")
    words = sum(len(sentence) for sentence in forms)
    positions = words + len(forms)  # ROOT is scored as a head and carried through the MLPs
    cells = sum((len(sentence) + 1) ** 2 for sentence in forms)
    parts = {"word BiLSTM": words * lstm_cost(scorer.lstm)}
    char = next((m for m in scorer.modules() if isinstance(m, CharLSTM)), None)
    linear_skip = set()
    if char is not None:
        distinct = {form for sentence in forms for form in sentence}
        characters = sum(len(form) for form in distinct)
        project = char.project
        linear_skip.add(project)
        parts["character BiLSTM"] = (characters * lstm_cost(char.lstm)
                                     + len(distinct) * project.in_features * project.out_features)
    parts["MLPs and tag head"] = positions * sum(
        m.in_features * m.out_features for m in scorer.modules()
        if isinstance(m, nn.Linear) and m not in linear_skip)
    for name, kind in (("arc biaffine", Biaffine), ("label bilinear", Bilinear)):
        for module in scorer.modules():
            if isinstance(module, kind):
                weight = module.weight
                labels = weight.shape[0] if weight.dim() == 3 else 1
                size = weight.shape[-1]
                parts[name] = positions * labels * size * size + cells * labels * size
    return parts


def matmul_rate(size: int = 1024, repeats: int = 10) -> float:
    """Multiply-adds per second of a ``size``-cubed float32 matmul: the best of five timings."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeats):
            a @ b
        best = max(best, repeats * size**3 / max(time.process_time() - start, 1e-9))
    return best


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--checkpoint", required=True)
    arguments.add_argument("--input", default=DEFAULT_INPUT)
    arguments.add_argument("--out", default=None, help="markdown file (default: stdout only)")
    args = arguments.parse_args()
    torch.set_num_threads(1)
    model, _, _ = load_decoder(args.checkpoint, device="cpu")
    forms = [sentence.forms for sentence in stream_conllu(
        args.input, on_invalid="raise", require_trees=False, report=False)]
    parts = multiply_adds(model, forms)
    rate = matmul_rate()
    words = sum(len(sentence) for sentence in forms)
    lines = [
        (f"Input: {args.input} ({words:,} words, {len(forms):,} sentences); one thread; "
         f"best float32 matmul rate (1024^3): {rate / 1e9:.1f} G multiply-adds/s"),
        "",
        "| part | multiply-adds per word | G multiply-adds | seconds at that rate |",
        "|---|---:|---:|---:|",
    ]
    for name, count in [*parts.items(), ("total", sum(parts.values()))]:
        lines.append(f"| {name} | {count / words:,.0f} | {count / 1e9:.1f} | {count / rate:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
