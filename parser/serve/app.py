"""The ASGI application of ``parser-serve`` (FastAPI): UDPipe's ``/models`` and ``/process``
(GET and POST), a page describing them (``/api``) and FastAPI's OpenAPI (``/openapi.json``).

The event loop reads requests, checks them (:mod:`parser.serve.protocol`) and waits; the
:class:`~parser.serve.worker.Batcher` thread parses. Refusals are plain text with their HTTP
status: 400 (bad parameters or input), 401 (no or a wrong token, when one is set), 404 (an
unknown URL), 413 (a body over ``max_body``), 503 with ``Retry-After`` (the queue is full, the
deadline passed, the service is stopping). A client that leaves is dropped, unparsed.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException

from parser.serve.body import ClientDisconnect, parameters
from parser.serve.page import add_page
from parser.serve.protocol import EXTRA, INPUTS, PICTURES, UDPIPE, ProtocolError, process_request
from parser.serve.worker import Batcher, QueueFull, load_models

__all__ = ["ENVIRONMENT", "ServeSettings", "app_from_environment", "create_app"]

log = logging.getLogger("parser.serve")

ENVIRONMENT = "PARSER_SERVE_SETTINGS"  # the settings of each worker process (workers=N), JSON
ACKNOWLEDGEMENT = "parser: dependency parsing on an exact non-projective tree CRF"


@dataclass(frozen=True)
class ServeSettings:
    """What a service runs: ``models`` (name -> pipeline file; the first is the default), the
    limits (``max_body`` bytes, ``max_words`` per sentence, ``queue_size`` requests waiting,
    ``batch_words`` words per batch, ``deadline`` seconds per request), ``token`` (None: none
    asked), ``retry_after`` (seconds, in 503 answers) and ``device``."""

    models: dict[str, str]
    max_body: int = 4 * 1024 * 1024  # UDPipe 2's default max_request_size
    max_words: int = 1000  # UDPipe refuses sentences of more than 1000 words too
    queue_size: int = 64
    batch_words: int = 2000
    deadline: float = 60.0
    token: str | None = None
    retry_after: int = 1
    device: str = "cpu"
    threads: int = 1  # torch threads of the worker
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("models=: give at least one pipeline file")
        for name in ("max_body", "max_words", "queue_size", "batch_words", "retry_after",
                     "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value}: expected a positive integer")
        if not self.deadline > 0:
            raise ValueError(f"deadline={self.deadline}: expected a positive number of seconds")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        return cls(**json.loads(text))


def app_from_environment() -> FastAPI:
    """The application of the settings in ``$PARSER_SERVE_SETTINGS`` (uvicorn's factory for
    each worker process)."""
    return create_app(ServeSettings.from_json(os.environ[ENVIRONMENT]))


def create_app(settings: ServeSettings, *, models: dict | None = None) -> FastAPI:
    """The service of ``settings``; ``models``: pipelines already loaded (tests), else each file
    of ``settings.models`` is loaded once when the application starts."""
    names = list(settings.models)
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        torch.set_num_threads(settings.threads)
        loaded = models if models is not None else load_models(
            {n: Path(p) for n, p in settings.models.items()}, device=settings.device,
            batch_words=settings.batch_words)
        batcher = Batcher(loaded, queue_size=settings.queue_size,
                          batch_words=settings.batch_words, max_words=settings.max_words)
        batcher.start()
        state["batcher"] = batcher
        log.info("parser-serve: models %s loaded (default %s)", ", ".join(names), names[0])
        try:
            yield
        finally:  # uvicorn has answered what was in flight; the queue is empty or finished here
            await asyncio.to_thread(batcher.stop)

    app = FastAPI(title="parser-serve", version="1", lifespan=lifespan, docs_url=None,
                  redoc_url=None, description=__doc__)

    @app.exception_handler(ProtocolError)
    async def refused(request: Request, error: ProtocolError) -> Response:
        return PlainTextResponse(error.message, status_code=error.status, headers=error.headers)

    @app.exception_handler(HTTPException)
    async def not_found(request: Request, error: HTTPException) -> Response:
        if error.status_code == 404:
            return PlainTextResponse(f"No handler for the given URL '{request.url.path}'",
                                     status_code=404)
        return PlainTextResponse(str(error.detail), status_code=error.status_code)

    def check_token(request: Request) -> None:
        if settings.token is None:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {settings.token}".encode()):
            raise ProtocolError("Unauthorized: send the header 'Authorization: Bearer <token>'.",
                                status=401, headers={"WWW-Authenticate": "Bearer"})

    async def list_models(request: Request) -> Response:
        check_token(request)
        components = {name: ["tokenizer", "tagger", "parser"]
                      if state["batcher"].models[name].tokenizer is not None
                      else ["tagger", "parser"] for name in names}
        return JSONResponse({"models": components, "default_model": names[0]})

    async def process(request: Request) -> Response:
        check_token(request)
        started = time.monotonic()
        try:
            params = await parameters(request, max_body=settings.max_body)
        except ClientDisconnect:
            return Response(status_code=400)  # nobody reads it
        job_request = process_request(params, models=names, default_model=names[0],
                                      max_words=settings.max_words)
        busy = {"Retry-After": str(settings.retry_after)}
        try:
            job = state["batcher"].submit(job_request, deadline=started + settings.deadline)
        except QueueFull as full:
            raise ProtocolError(f"The service is busy ({full}); retry later.", status=503,
                                headers=busy) from None
        answer = asyncio.wrap_future(job.future)
        while not answer.done():
            left = started + settings.deadline - time.monotonic()
            if left <= 0:
                job.abandoned = True
                raise ProtocolError(f"The request was not processed within its deadline of "
                                    f"{settings.deadline:g} s; retry later.", status=503,
                                    headers=busy)
            await asyncio.wait({answer}, timeout=min(left, 0.5))
            if not answer.done() and await request.is_disconnected():
                job.abandoned = True
                return Response(status_code=400)  # the client left: nobody reads it
        result = answer.result()  # a ProtocolError raised in the worker is answered as such
        if job_request.output in PICTURES:
            kind = "text/html" if job_request.output == "html" else "image/svg+xml"
            return Response(result, media_type=kind)
        return JSONResponse({"model": job_request.model,
                             "acknowledgements": [
                                 ACKNOWLEDGEMENT,
                                 f"{job_request.model}: {Path(settings.models[job_request.model]).name}"],
                             "result": result})

    for method in ("GET", "POST"):  # one operation each (OpenAPI ids are unique)
        app.add_api_route("/models", list_models, methods=[method], response_class=JSONResponse,
                          operation_id=f"models_{method.lower()}",
                          summary="The models served and the default one (UDPipe's /models)")
        app.add_api_route("/process", process, methods=[method], response_class=JSONResponse,
                          operation_id=f"process_{method.lower()}",
                          summary="Tokenise, tag and parse data (UDPipe's /process)",
                          openapi_extra=_process_openapi())

    @app.get("/api", response_class=HTMLResponse, summary="This API, for people")
    async def api_page() -> Response:
        return HTMLResponse(_api_page(names))

    add_page(app, settings=settings, state=state, check_token=check_token)  # /, /trees
    return app


PARAMETERS = {
    "data": "the input text (required); a file upload in multipart/form-data",
    "model": "a model name of /models (default: the default model)",
    "tokenizer": "present (any value): data is raw text, tokenised and split into sentences",
    "input": f"without tokenizer: {', '.join(INPUTS)} (default conllu)",
    "tagger": "present (any value): tag (UPOS, XPOS, FEATS, LEMMA)",
    "parser": "present (any value): parse (HEAD, DEPREL)",
    "output": "conllu (default)",
    "confidence": "true: HeadProb/DeprelProb in MISC, tree_logprob/tree_entropy comments",
    "kbest": "K: the K most probable trees of each sentence, best first",
    "samples": "K: K trees drawn from the model's distribution (with seed)",
    "seed": "the samples' seed",
    "keep_heads": "given: the CoNLL-U input's heads are fixed arcs; the other words are parsed",
    "keep_columns": "given: the input's LEMMA/UPOS/XPOS/FEATS kept where given",
}
assert set(PARAMETERS) == set(UDPIPE + EXTRA)


def _process_openapi() -> dict:
    properties = {name: {"type": "string", "description": text}
                  for name, text in PARAMETERS.items()}
    return {
        "parameters": [{"name": name, "in": "query", "required": False,
                        "schema": {"type": "string"}, "description": text}
                       for name, text in PARAMETERS.items()],
        "requestBody": {"required": False, "content": {
            kind: {"schema": {"type": "object", "properties": properties}}
            for kind in ("application/x-www-form-urlencoded", "multipart/form-data")}},
        "responses": {
            "200": {"description": 'JSON {"model", "acknowledgements", "result"}'},
            "400": {"description": "bad parameters or input (plain text, UDPipe's messages)"},
            "401": {"description": "a token is set and the request lacks it"},
            "413": {"description": "the body is over the size limit"},
            "503": {"description": "busy or past the deadline: retry after Retry-After seconds"},
        },
    }


def _api_page(names: list[str]) -> str:
    rows = "".join(f"<tr><td><code>{name}</code></td><td>{text}</td></tr>"
                   for name, text in PARAMETERS.items())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>parser-serve API</title>"
        "</head><body><h1>parser-serve</h1><p>UDPipe's REST protocol: <code>GET|POST "
        "/models</code> lists the models (<code>{\"models\": {name: components}, "
        "\"default_model\": name}</code>); <code>GET|POST /process</code> answers "
        "<code>{\"model\", \"acknowledgements\", \"result\"}</code> with CoNLL-U in "
        "<code>result</code>. Parameters come from the query, a form or a multipart body. "
        "Errors are plain text with their status. Machine-readable: "
        "<a href='/openapi.json'>/openapi.json</a>.</p>"
        f"<p>Models: {', '.join(names)} (default {names[0]}).</p>"
        f"<table><tr><th>parameter</th><th>meaning</th></tr>{rows}</table>"
        "<pre>curl -F data=@input.txt -F model=" + names[0] + " -F tokenizer= -F tagger= "
        "-F parser= http://127.0.0.1:8001/process</pre></body></html>")
