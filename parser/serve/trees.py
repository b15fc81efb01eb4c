"""What the page (``/``) asks of a model: the sentences of one request parsed with confidence,
under fixed arcs where the CoNLL-U input gives heads (``keep_heads=given``, exact: the best tree
that keeps them, the marginals conditioned on them), each with its picture
(:func:`parser.view.sentence_svg`) and, per word, its most probable heads.

Everything here runs in the worker thread that owns the model
(:meth:`parser.serve.worker.Batcher.submit` with ``call``); drawing a file as it is needs no model
(:func:`drawn`). Fixed arcs that admit no tree (a cycle, two roots) are refused with a
:class:`~parser.serve.protocol.ProtocolError` (400) naming the sentence and the words: on the
page a fixed arc is one click, and its answer is a message, not a tree written unparsed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from parser.data.batching import encode_all
from parser.data.conllu_io import Sentence, blocks, parse_sentences
from parser.data.misc import ALT_HEAD, ALT_HEAD_PROB, merged_misc
from parser.inference.columns import dictionary_tags
from parser.inference.fixed_arcs import ArcConstraints, constrain_output, given_heads
from parser.inference.parse import model_outputs
from parser.pipeline import Pipeline
from parser.serve.protocol import ProcessRequest, ProtocolError, read_sentences
from parser.view import sentence_svg

__all__ = ["TOP_HEADS", "drawn", "head_marginals", "parsed_trees", "with_runner_up"]

TOP_HEADS = 4  # heads listed per word (the page's "alternatives")
DECIMALS = 4


def parsed_trees(pipeline: Pipeline, request: ProcessRequest, *, max_words: int) -> dict:
    """``{"sentences": [...]}`` for ``request`` (read as ``/process`` reads ``data``): each
    sentence's parsed CoNLL-U block (with ``HeadProb``/``DeprelProb``), its SVG (the runner-up
    head of each word in MISC as ``AltHead``/``AltHeadProb``, which the picture draws) and
    ``heads``: per word id, its :data:`TOP_HEADS` most probable heads ``[head, marginal]``."""
    sentences = read_sentences(request, pipeline.tokenizer, max_words=max_words)
    if not sentences:
        return {"sentences": []}
    options = request.options.replace(confidence=True, kbest=0, samples=0)
    if request.tokenize or request.input != "conllu":
        options = options.replace(keep_heads="none")
    else:
        options = options.replace(keep_columns="given")
    annotated = pipeline.annotator(options, name="data").annotate(sentences)
    parsed = _read_blocks(annotated.blocks)
    for number, (sentence, block) in enumerate(zip(parsed, annotated.blocks), start=1):
        reason = _comment(block, "parse_error")
        if reason is not None:
            raise ProtocolError(f"Sentence {number} cannot be parsed with its fixed arcs: "
                                f"{reason}.\nUndo the last fixed arc or choose another head.")
    constraints = ([given_heads(s) for s in sentences] if options.keep_heads == "given"
                   else None)
    marginals = head_marginals(pipeline, parsed, constraints)
    out = []
    for sentence, block, matrix in zip(parsed, annotated.blocks, marginals):
        heads = _top_heads(matrix)
        out.append({"conllu": block, "svg": sentence_svg(_runner_up_written(block, heads)),
                    "heads": heads})
    return {"sentences": out}


def drawn(data: str) -> dict:
    """The sentences of a CoNLL-U ``data`` as they are (HEAD ``_`` allowed: an annotation file),
    each with its picture; no model."""
    try:
        sentences = list(parse_sentences(
            blocks(enumerate(data.split("\n"), start=1)), "data", on_invalid="raise",
            require_trees=False, single_root=True, skipped=[], check_heads=False))
    except ValueError as error:
        raise ProtocolError(f"Cannot parse the input in 'conllu' format.\n{error}") from None
    return {"sentences": [{"conllu": "\n".join(s.lines) + "\n\n",
                           "svg": sentence_svg(s, where=f"sentence {i}"), "heads": {}}
                          for i, s in enumerate(sentences, start=1)]}


@torch.no_grad()
def head_marginals(pipeline: Pipeline, sentences: Sequence[Sentence],
                   constraints: Sequence[ArcConstraints | None] | None) -> list[torch.Tensor]:
    """Per sentence of ``n`` words, ``[dep, head]`` (``[n, n + 1]``, head 0 = ROOT): the tree
    CRF's head marginals of the pipeline's parser on the words and tags of ``sentences``,
    conditioned on ``constraints`` (one per sentence, or None). The written head's entry is the
    ``HeadProb`` the annotator writes for the same input."""
    encoded = encode_all(sentences, pipeline.vocabs, layer_targets=False, trees=False)
    result: list[torch.Tensor | None] = [None] * len(sentences)
    for batch, out in model_outputs(pipeline.model, encoded,
                                    tokens_per_batch=pipeline.options.tokens_per_batch,
                                    cells_per_batch=None, device=pipeline.device):
        index = batch.index.tolist()
        out = dictionary_tags(out, batch, pipeline.vocabs, sentences)
        if constraints is not None:
            out, _ = constrain_output(out, [constraints[i] for i in index], pipeline.vocabs)
        marginals = out.dist.arc_marginals.float().cpu()  # [B, dep, head]
        for b, (i, n) in enumerate(zip(index, batch.lengths.tolist())):
            result[i] = marginals[b, 1 : n + 1, : n + 1].clone()
    return result


def _top_heads(matrix: torch.Tensor) -> dict[str, list[list]]:
    """Word id -> its most probable heads, ``[[head, marginal], ...]``, most probable first."""
    top = {}
    k = min(TOP_HEADS, matrix.shape[1])
    values, heads = matrix.topk(k, dim=1)
    for dep, (row_values, row_heads) in enumerate(zip(values.tolist(), heads.tolist()), start=1):
        top[str(dep)] = [[h, round(v, DECIMALS)] for h, v in zip(row_heads, row_values)
                         if v >= 0.5 * 10 ** -DECIMALS]
    return top


def with_runner_up(block: str, matrix: torch.Tensor) -> str:
    """``block`` (one sentence's CoNLL-U) with each word's most probable head other than the one
    written in MISC (``AltHead``, ``AltHeadProb``), from ``matrix`` (``[dep, head]`` head
    marginals, :func:`head_marginals`): what :mod:`parser.view` draws as the runner-up."""
    return _runner_up_written(block, _top_heads(matrix))


def _runner_up_written(block: str, heads: dict[str, list[list]]) -> str:
    """:func:`with_runner_up` from the words' most probable heads (:func:`_top_heads`)."""
    lines = []
    for line in block.split("\n"):
        columns = line.split("\t")
        if len(columns) == 10 and columns[0].isdigit() and columns[6].isdigit():
            other = [(h, p) for h, p in heads.get(columns[0], []) if h != int(columns[6])]
            if other:
                columns[9] = merged_misc(columns[9], {ALT_HEAD: str(other[0][0]),
                                                      ALT_HEAD_PROB: f"{other[0][1]:.4f}"})
            line = "\t".join(columns)
        lines.append(line)
    return "\n".join(lines)


def _read_blocks(parsed: Sequence[str]) -> list[Sentence]:
    text = "".join(parsed)
    return list(parse_sentences(blocks(enumerate(text.split("\n"), start=1)), "result",
                                on_invalid="raise", require_trees=False, single_root=True,
                                skipped=[], check_heads=False))


def _comment(block: str, key: str) -> str | None:
    for line in block.split("\n"):
        if line.startswith(f"# {key} = "):
            return line.split(" = ", 1)[1]
    return None
