"""``parser-calibrate`` (or ``python -m parser.cli.calibrate``): fit the temperatures of a
trained parser's tree CRF on gold trees (dev) and write a calibrated copy of its checkpoint.

    parser-calibrate checkpoint=outputs/<run>/checkpoints/best.pt treebank=en_ewt \\
        output=calibrated.pt
    parser-calibrate checkpoint=outputs/<run>/checkpoints/best.pt gold=my-dev.conllu \\
        output=calibrated.pt

The gold file is ``treebank=`` with ``split=`` (default ``dev``; ``root=`` or ``$UD_ROOT``
locate it) or ``gold=<file>``. Its UPOS column is read as the parser reads tags (a parser with
its own UPOS head ignores it). The arc temperature minimises the negative log-likelihood of
the gold trees under the tree CRF, the label temperature that of the gold relations on the gold
arcs (:mod:`parser.inference.calibration`). The output is the input checkpoint plus a
``calibration`` entry (the temperatures and the NLLs before and after), written atomically with
its digest; ``parser-predict`` and ``parser-evaluate`` read it and divide the scores by the
temperatures. The decoded trees are unchanged; ``HeadProb`` / ``DeprelProb`` and the tree
log-probabilities become calibrated. The input checkpoint is never written (``output=`` naming
it is refused); a checkpoint already calibrated is calibrated anew from its raw scores.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from parser.cli.shell import UsageError, run_key_value_cli
from parser.data.conllu_io import read_conllu
from parser.data.paths import resolve_ud_root, treebank_file
from parser.inference.calibration import TemperatureFit, collect_gold_scores, fit_temperatures
from parser.inference.loading import parser_from_state
from parser.runtime.checkpoint import load_checkpoint, save_checkpoint
from parser.runtime.device import resolve_device
from parser.runtime.user_files import input_file, output_file

__all__ = ["OPTIONS", "calibrate", "gold_file", "main"]

OPTIONS = {
    "checkpoint": None,
    "output": None,  # the calibrated checkpoint to write (never the input)
    "treebank": None,  # e.g. en_ewt: fit on <root>/<treebank>/<treebank>-ud-<split>.conllu
    "split": "dev",
    "root": None,
    "gold": None,  # or a gold CoNLL-U file
    "device": "auto",
    "tokens_per_batch": "5000",
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(argv, prog="parser-calibrate", doc=__doc__, defaults=OPTIONS,
                             required=("checkpoint", "output"), command=_run)


def _run(args: dict) -> str:
    gold = gold_file(treebank=args["treebank"], split=args["split"], root=args["root"],
                     gold=args["gold"])
    fit = calibrate(args["checkpoint"], gold, args["output"], device=args["device"],
                    tokens_per_batch=int(args["tokens_per_batch"]))
    return format_fit(fit, gold=gold, output=args["output"])


def gold_file(*, treebank: str | None, split: str, root: str | None, gold: str | None) -> Path:
    """``gold=`` or the ``treebank=``/``split=`` file (exactly one of them)."""
    if (gold is None) == (treebank is None):
        raise UsageError("parser-calibrate: give the gold trees to fit on: treebank=<name> "
                         "(with split=, default dev) or gold=<file>, not both")
    if gold is not None:
        return input_file(gold, option="gold")
    return treebank_file(resolve_ud_root(root), treebank, split)


def calibrate(checkpoint: str | Path, gold: str | Path, output: str | Path, *,
              device: str = "auto", tokens_per_batch: int = 5000) -> TemperatureFit:
    """Fit the temperatures of ``checkpoint``'s parser on the trees of ``gold`` and write
    ``output``: the checkpoint with a ``calibration`` entry. ``checkpoint`` is only read."""
    checkpoint = input_file(checkpoint, option="checkpoint")
    gold = input_file(gold, option="gold")
    output = output_file(output, option="output", inputs=(checkpoint, gold))
    if output.resolve() == checkpoint.resolve():  # output_file compares existing files only
        raise ValueError(f"output={output}: is the input checkpoint; write to another path")
    state = load_checkpoint(checkpoint, map_location="cpu")
    model, vocabs, _ = parser_from_state(state, where=f"checkpoint {checkpoint}")
    torch_device = resolve_device(device)
    sentences = read_conllu(gold).sentences
    scores = collect_gold_scores(model.to(torch_device), sentences, vocabs,
                                 tokens_per_batch=tokens_per_batch, device=torch_device)
    fit = fit_temperatures(scores)
    state = {key: value for key, value in state.items() if key != "format"}  # save_checkpoint's own
    state["calibration"] = {**fit.calibration_entry(), "fitted_on": gold.name}
    save_checkpoint(state, output)
    return fit


def format_fit(fit: TemperatureFit, *, gold: Path, output: str | Path) -> str:
    """The temperatures and dev NLLs, for the terminal."""
    lines = [
        (f"fitted on {gold.name}: {fit.sentences} sentences ({fit.sentences_left_out} left out: "
        "gold tree ruled out by the model)"),
        (f"arc temperature   {fit.arc_temperature:.4f}  gold tree NLL/sentence "
        f"{fit.tree_nll_before:.4f} -> {fit.tree_nll_after:.4f}"),
    ]
    if fit.label_words:
        lines.append(f"label temperature {fit.label_temperature:.4f}  gold relation NLL/word "
                     f"{fit.label_nll_before:.4f} -> {fit.label_nll_after:.4f} "
                     f"({fit.label_words} words, {fit.label_words_left_out} left out)")
    else:
        lines.append(f"label temperature {fit.label_temperature:.4f} (the arc temperature: one "
                     "labeled CRF)" if fit.label_temperature == fit.arc_temperature else
                     "no relations: label temperature 1")
    lines.append(f"calibrated checkpoint -> {output}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
