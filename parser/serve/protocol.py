"""UDPipe's REST protocol: the parameters of ``/process``, how its ``data`` is read, its JSON
answer and its error texts (UDPipe 2's ``udpipe2_server.py`` and UDPipe 1's REST server), plus
what only a tree CRF gives, as parameters of the same endpoint.

UDPipe's parameters: ``data`` (required), ``model`` (a name of ``/models``; the default model
otherwise), ``tokenizer`` (present: ``data`` is raw text, tokenised and split into sentences; its
value, UDPipe's tokenizer options, is accepted and ignored), ``input`` (without ``tokenizer``:
``conllu``, the default, ``horizontal``: a sentence per line, words separated by spaces, or
``vertical``: a word per line, sentences separated by blank lines), ``tagger`` and ``parser``
(present: that component runs; the value is ignored), ``output`` (``conllu``; pictures when
:data:`PICTURES` holds the format). Beyond UDPipe: ``confidence`` (true/false), ``kbest``,
``samples`` with ``seed``, ``keep_heads=given`` (the CoNLL-U input's heads are fixed arcs) and
``keep_columns=given`` (:class:`parser.inference.options.PredictOptions`).

Every refusal is a :class:`ProtocolError`: an HTTP status and a plain-text message whose first
line is UDPipe's where UDPipe has one (a second line says more).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from parser.data.conllu_io import Sentence, blocks, parse_sentences
from parser.inference.options import PredictOptions
from parser.tokenize import Token, iter_sentences, split_paragraphs
from parser.tokenize.segment import to_sentence

__all__ = [
    "EXTRA", "INPUTS", "PICTURES", "UDPIPE", "ProcessRequest", "ProtocolError", "process_request",
    "read_sentences", "result_text",
]

UDPIPE = ("data", "model", "tokenizer", "tagger", "parser", "input", "output")
EXTRA = ("confidence", "kbest", "samples", "seed", "keep_heads", "keep_columns")
INPUTS = ("conllu", "horizontal", "vertical")
# The hook of tree pictures: output format -> a function of the CoNLL-U result to a document
# (svg, html). Empty until parser.view's pictures are registered here; a format not here is
# answered "Unknown output format".
PICTURES: dict[str, Callable[[str], str]] = {}


class ProtocolError(Exception):
    """A request refused: ``status`` (400, 401, 404, 413, 503...), ``message`` (plain text) and
    extra response ``headers`` (``Retry-After``)."""

    def __init__(self, message: str, *, status: int = 400,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.headers = message, status, dict(headers or {})


@dataclass(frozen=True)
class ProcessRequest:
    """One ``/process`` request, checked: the model's name, ``data`` (NFC, as UDPipe), how to read
    it (``tokenize``, else ``input``), the components asked for (``tag``, ``parse``), ``output``
    and the prediction options."""

    model: str
    data: str
    tokenize: bool
    input: str
    tag: bool
    parse: bool
    output: str
    options: PredictOptions = field(default_factory=PredictOptions)

    @property
    def batchable(self) -> bool:
        """Whether its sentences may share a batch with other requests' (one block per
        sentence: no k-best, no samples, whose names and seeds count positions in the input)."""
        return not (self.options.kbest or self.options.samples)


def process_request(params: Mapping[str, str], *, models: Sequence[str], default_model: str,
                    max_words: int) -> ProcessRequest:
    """The :class:`ProcessRequest` of ``/process``'s parameters, or a :class:`ProtocolError`."""
    unknown = sorted(set(params) - set(UDPIPE) - set(EXTRA))
    if unknown:
        raise ProtocolError(f"Unknown parameter '{unknown[0]}'.\nThe parameters of /process are "
                            f"{', '.join(UDPIPE + EXTRA)} (see /api).")
    if "data" not in params:
        raise ProtocolError("The parameter 'data' is required.")
    model = params.get("model") or default_model
    if model not in models:
        raise ProtocolError(f"The requested model '{model}' does not exist.\nModels: "
                            f"{', '.join(models)} (GET /models).")
    tokenize = "tokenizer" in params
    input_format = params.get("input", "conllu")
    if not tokenize and input_format not in INPUTS:
        raise ProtocolError(f"Cannot parse the input in '{input_format}' format.\nInput formats: "
                            f"{', '.join(INPUTS)}, or raw text with the parameter tokenizer.")
    output = params.get("output", "conllu")
    if output != "conllu" and output not in PICTURES:
        raise ProtocolError(f"Unknown output format '{output}'.\nOutput formats: "
                            f"{', '.join(('conllu', *PICTURES))}.")
    try:
        options = PredictOptions.from_strings(
            {key: params[key] for key in EXTRA if key in params and params[key] != ""}
        ).replace(max_words=max_words)
    except ValueError as error:
        raise ProtocolError(f"Bad parameter: {error}") from None
    if options.keep_heads == "given" and (tokenize or input_format != "conllu"):
        raise ProtocolError("Bad parameter: keep_heads=given keeps the heads of a CoNLL-U input "
                            "(input=conllu, no tokenizer).")
    return ProcessRequest(model, unicodedata.normalize("NFC", params["data"]), tokenize,
                          input_format, "tagger" in params, "parser" in params, output, options)


def read_sentences(request: ProcessRequest, tokenizer, *, max_words: int) -> list[Sentence]:
    """The sentences of ``request.data`` (``tokenizer``: the model's, for raw text), each of at
    most ``max_words`` words; malformed input is a :class:`ProtocolError` naming the line of
    ``data``."""
    try:
        if request.tokenize:
            if tokenizer is None:
                raise ProtocolError(f"The model '{request.model}' has no tokenizer.\nSend "
                                    "tokenised input (input=conllu, horizontal or vertical).")
            sentences = list(iter_sentences(tokenizer, split_paragraphs(request.data),
                                            path="data"))
        elif request.input == "conllu":
            sentences = list(parse_sentences(
                blocks(enumerate(request.data.split("\n"), start=1)), "data", on_invalid="raise",
                require_trees=False, single_root=True, skipped=[],
                check_heads=request.options.keep_heads != "given"))
        else:
            sentences = _plain(request.data, vertical=request.input == "vertical")
    except ProtocolError:
        raise
    except ValueError as error:  # ConlluError: "data:<line>: problem"
        what = "An error occured during tokenization of the input." if request.tokenize else \
            f"Cannot parse the input in '{request.input}' format."
        raise ProtocolError(f"{what}\n{error}") from None
    for number, sentence in enumerate(sentences, start=1):
        if len(sentence) > max_words:
            first = ("During tokenization, sentence longer than" if request.tokenize
                     else "Sentence longer than")
            raise ProtocolError(
                f"{first} {max_words} words was found{'' if request.tokenize else ' on input'}, "
                f"aborting.\nPlease make sure the input sentences have at most {max_words} "
                f"words.\nSentence {number} (line {sentence.line} of data) has {len(sentence)} "
                "words.")
    return sentences


def _plain(data: str, *, vertical: bool) -> list[Sentence]:
    """``horizontal`` (a sentence per line) or ``vertical`` (a word per line) text."""
    groups: list[tuple[int, list[str]]] = []
    if vertical:
        for first, lines in blocks(enumerate(data.split("\n"), start=1)):
            words = [line.strip() for line in lines if line.strip()]
            if any(" " in w or "\t" in w for w in words):
                raise ValueError(f"data:{first}: a line of vertical input holds one word")
            if words:
                groups.append((first, words))
    else:
        groups = [(n, line.split()) for n, line in enumerate(data.split("\n"), start=1)
                  if line.split()]
    return [to_sentence([Token(w, True, (w,)) for w in words], sent_id=str(number), path="data",
                        line=line) for number, (line, words) in enumerate(groups, start=1)]


def result_text(request: ProcessRequest, sentences: Sequence[Sentence],
                parsed_blocks: Sequence[str] | None) -> str:
    """The CoNLL-U ``result`` of a request: a generator comment as UDPipe writes one, then the
    parsed blocks (None: no component ran, the sentences as read), HEAD, DEPREL and DEPS
    emptied when only the tagger was asked for."""
    if parsed_blocks is None:
        parsed_blocks = ["\n".join(s.lines) + "\n\n" for s in sentences]
    elif request.tag and not request.parse:
        parsed_blocks = [_untreed(block) for block in parsed_blocks]
    header = f"# generator = parser-serve\n# parser_model = {request.model}\n"
    return header + "".join(parsed_blocks)


def _untreed(block: str) -> str:
    lines = []
    for line in block.split("\n"):
        columns = line.split("\t")
        if len(columns) == 10 and not line.startswith("#"):
            columns[6:9] = ["_", "_", "_"]
            line = "\t".join(columns)
        lines.append(line)
    return "\n".join(lines)
