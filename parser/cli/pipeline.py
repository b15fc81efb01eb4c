"""``parser-pipeline build`` (or ``python -m parser.cli.pipeline build``): put a tokenizer, a parser
and (when the parser reads UPOS) a tagger into one pipeline file, with their vocabularies, configs
and scores, and write its model card (markdown) beside it.

    parser-pipeline build tokenizer=outputs/tokenizer/en_ewt/<time>/checkpoints/best.pt \\
        parser=outputs/quickstart/en_ewt/<time>/checkpoints/best.pt \\
        tagger=outputs/tagger/en_ewt/<time>/checkpoints/best.pt output=ewt.pipeline

Options: ``tokenizer=`` (``parser-train-tokenizer``'s ``best.pt``), ``parser=`` (``parser-train``'s),
``tagger=`` (``parser-train-tagger``'s; needed when the parser reads UPOS), ``output=``,
``scores=`` (a JSON file of further scores to record, e.g. a raw-text evaluation),
``card=`` (the model card's path; default: the output with ``.md``).
Use it from Python: ``from parser import Pipeline; Pipeline.load("ewt.pipeline").parse("...")``.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from parser import __version__
from parser.cli.shell import UsageError, run_key_value_cli
from parser.inference import reads_upos
from parser.pipeline import KIND, Pipeline, parser_from_state, tagger_from_state
from parser.runtime.checkpoint import load_checkpoint, save_checkpoint
from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import input_file
from parser.tokenize import tokenizer_from_state

__all__ = ["OPTIONS", "build_pipeline", "main", "model_card"]

OPTIONS = {"tokenizer": None, "parser": None, "tagger": None, "output": None, "scores": None,
           "card": None}


def _summary(value: object) -> object:
    """Numbers and short dicts of numbers, for the card and the file's meta."""
    if isinstance(value, dict):
        kept = {k: _summary(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None}
    if isinstance(value, (int, float, str, bool)):
        return value
    return None


def build_pipeline(*, tokenizer: str | Path | None, parser: str | Path,
                   tagger: str | Path | None, output: str | Path,
                   scores: dict | None = None, card: str | Path | None = None) -> Path:
    """Write the pipeline file ``output`` and its model card; returns the card's path."""
    parser_state = load_checkpoint(input_file(parser, option="parser"))
    parser_part = {k: parser_state[k] for k in ("model", "vocabs", "config") if k in parser_state}
    _, _, config = parser_from_state(parser_part, where=str(parser))  # refuses a non-parser file
    tok_state = load_checkpoint(input_file(tokenizer, option="tokenizer")) if tokenizer else None
    tag_state = load_checkpoint(input_file(tagger, option="tagger")) if tagger else None
    if tok_state is not None:
        tokenizer_from_state(tok_state, where=str(tokenizer))
    if tag_state is not None:
        tagger_from_state(tag_state, where=str(tagger))
    elif reads_upos(config):
        raise ValueError(f"parser={parser}: reads UPOS tags: give tagger=<tagger best.pt> "
                         "(parser-train-tagger trains one)")
    meta = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "version": __version__,
        "sources": {"tokenizer": str(tokenizer) if tokenizer else None, "parser": str(parser),
                    "tagger": str(tagger) if tagger else None},
        "scores": {
            "tokenizer": _summary({"dev": (tok_state or {}).get("dev"),
                                   "step": (tok_state or {}).get("step")}),
            # the trainer's dev selection score (LAS unless configured otherwise)
            "parser": _summary({"best_dev_score": (parser_state.get("trainer") or {}).get(
                "best_score"), "best_step": (parser_state.get("trainer") or {}).get("best_step")}),
            "tagger": _summary({"dev": (tag_state or {}).get("dev"),
                                "step": (tag_state or {}).get("step")}),
            **({"evaluation": _summary(scores)} if scores else {}),
        },
    }
    output = Path(output)
    save_checkpoint({"kind": KIND, "meta": meta, "parser": parser_part, "tokenizer": tok_state,
                     "tagger": tag_state}, output)
    Pipeline.load(output)  # what was written loads
    card_path = Path(card) if card else output.with_suffix(".md")
    with atomic_write(card_path) as handle:
        handle.write(model_card(meta, parser_config=config, tokenizer_config=(tok_state or {}).get(
            "config"), tagger_config=(tag_state or {}).get("config"), name=output.name))
    return card_path


def _treebank(config: dict | None) -> str:
    data = (config or {}).get("data") or {}
    name = data.get("treebank", "?")
    return f"{name} ({data['train_file']})" if data.get("train_file") else str(name)


def model_card(meta: dict, *, parser_config: dict, tokenizer_config: dict | None,
               tagger_config: dict | None, name: str) -> str:
    """The markdown model card of a pipeline."""
    model = parser_config.get("model") or {}
    lines = [
        f"# Model card: {name}", "",
        f"Built {meta['created']} by `parser-pipeline build` (parser {meta['version']}).", "",
        "## Components", "",
        "| part | trained on | what it is |", "| --- | --- | --- |",
    ]
    if tokenizer_config is not None:
        lines.append(f"| tokenizer + sentence splitter | {_treebank(tokenizer_config)} | "
                     "character BiLSTM + linear-chain CRF over B/I/E/S/O tags; multiword tokens "
                     "split by a lookup table of the training treebank's most frequent splits "
                     "(no split for unseen forms) |")
    if tagger_config is not None:
        lines.append(f"| UPOS tagger | {_treebank(tagger_config)} | BiLSTM-CRF (parser-train-tagger) |")
    lines.append(f"| parser | {_treebank(parser_config)} | {model.get('kind', 'biaffine')} edge "
                 f"scorer, tree CRF; decoder {'projective' if model.get('projective') else 'MST'} |")
    lines += ["", "## Scores it reached", "", "```json",
              json.dumps(meta["scores"], indent=2, sort_keys=True), "```", "",
              "## Use", "", "```python", "from parser import Pipeline",
              f"nlp = Pipeline.load({name!r})",
              'trees = nlp.parse("Raw text. Two sentences!")   # list of conllu.TokenList',
              'nlp.parse_file("in.txt", "out.conllu")           # streaming, bounded memory',
              "```", "",
              "## Limits", "",
              "- Trained on one treebank's genre and spelling; expect lower scores elsewhere.",
              "- Multiword tokens: only forms seen as such in training are split.",
              "- Not thread-safe: one Pipeline per thread, or a lock around a shared one.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "build":
        argv = argv[1:]
    elif not any(a in ("-h", "--help") for a in argv):
        print("parser-pipeline: error: the command is `parser-pipeline build key=value ...`",
              file=sys.stderr)
        return 2
    return run_key_value_cli(argv, prog="parser-pipeline", doc=__doc__, defaults=OPTIONS,
                             required=("parser", "output"), command=_run)


def _run(args: dict) -> str:
    scores = None
    if args["scores"]:
        path = input_file(args["scores"], option="scores")
        try:
            scores = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise UsageError(f"scores={path}: not JSON: {error}") from error
    card = build_pipeline(tokenizer=args["tokenizer"], parser=args["parser"],
                          tagger=args["tagger"], output=args["output"], scores=scores,
                          card=args["card"])
    return f"pipeline -> {args['output']} (model card {card})"


if __name__ == "__main__":
    sys.exit(main())
