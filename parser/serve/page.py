"""The page of ``parser-serve`` (``GET /``) and the one endpoint it adds (``POST /trees``).

The page (``static/``: plain HTML, JS and CSS shipped in the package; no CDN, no build step)
parses pasted text or an uploaded CoNLL-U file with a model of ``/models``, shows each tree as
:func:`parser.view.sentence_svg` draws it (the same picture as a file or a notebook), re-decodes
a sentence when an arc is fixed by a click, and walks an annotation file of ``parser-select``
word by word (docs/service.md, "The page").

``POST /trees`` (a JSON body, the same token as ``/process``)::

    {"model": "en", "data": "...", "input": "raw" | "conllu" | "horizontal" | "vertical",
     "parse": true, "keep_heads": "given" | "none"}

answers ``{"model": ..., "sentences": [{"conllu": block, "svg": picture, "heads": {word id:
[[head, marginal], ...]}}]}``: every sentence parsed with confidence; with ``input=conllu`` and
``keep_heads=given`` the heads the input gives are fixed arcs (the others ``_``) and the tree is
the best one that keeps them, its marginals conditioned on them; fixed arcs that admit no tree
are a 400 naming the words. ``"parse": false`` draws CoNLL-U as it is (an annotation file,
HEAD ``_`` allowed), without a model. The parameters are checked as ``/process``'s
(:func:`parser.serve.protocol.process_request`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from parser.serve.body import ClientDisconnect
from parser.serve.protocol import ProtocolError, process_request
from parser.serve.trees import drawn, parsed_trees
from parser.serve.worker import QueueFull

__all__ = ["STATIC", "add_page"]

STATIC = Path(__file__).with_name("static")
FILES = {"page.js": "text/javascript", "page.css": "text/css", "index.html": "text/html"}
INPUTS = {"raw": {"tokenizer": ""}, "conllu": {"input": "conllu"},
          "horizontal": {"input": "horizontal"}, "vertical": {"input": "vertical"}}


def add_page(app: FastAPI, *, settings, state: dict, check_token: Callable[[Request], None]) -> None:
    """Add ``/``, ``/static/<file>`` and ``POST /trees`` to ``app`` (:func:`create_app`'s)."""
    names = list(settings.models)

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html",
                            headers={"Cache-Control": "no-cache"})

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        if name not in FILES:
            return Response(f"No handler for the given URL '/static/{name}'", status_code=404,
                            media_type="text/plain")
        return FileResponse(STATIC / name, media_type=FILES[name],
                            headers={"Cache-Control": "no-cache"})

    @app.post("/trees", summary="The page's trees: parsed with confidence, fixed arcs kept, "
                                "drawn (JSON)")
    async def trees(request: Request) -> Response:
        check_token(request)
        started = time.monotonic()
        try:
            body = await request.body()
        except ClientDisconnect:
            return Response(status_code=400)
        if len(body) > settings.max_body:
            raise ProtocolError(f"The payload size is too large.\nThe limit is "
                                f"{settings.max_body} bytes.", status=413)
        asked = _json(body)
        data = asked.get("data")
        if not isinstance(data, str):
            raise ProtocolError("The parameter 'data' is required.")
        if asked.get("parse", True) is False:
            return JSONResponse(await asyncio.to_thread(drawn, data))
        input_format = asked.get("input", "conllu")
        if input_format not in INPUTS:
            raise ProtocolError(f"Cannot parse the input in '{input_format}' format.\nInput "
                                f"formats: {', '.join(INPUTS)}.")
        params = {"data": data, "tagger": "", "parser": "", **INPUTS[input_format]}
        if asked.get("model"):
            params["model"] = str(asked["model"])
        if asked.get("keep_heads"):
            params["keep_heads"] = str(asked["keep_heads"])
        job_request = process_request(params, models=names, default_model=names[0],
                                      max_words=settings.max_words)
        busy = {"Retry-After": str(settings.retry_after)}
        try:
            job = state["batcher"].submit(
                job_request, deadline=started + settings.deadline,
                call=lambda model: parsed_trees(model, job_request,
                                                max_words=settings.max_words))
        except QueueFull as full:
            raise ProtocolError(f"The service is busy ({full}); retry later.", status=503,
                                headers=busy) from None
        answer = asyncio.wrap_future(job.future)
        done, _ = await asyncio.wait({answer}, timeout=max(
            0.0, started + settings.deadline - time.monotonic()))
        if not done:
            job.abandoned = True
            raise ProtocolError(f"The request was not processed within its deadline of "
                                f"{settings.deadline:g} s; retry later.", status=503,
                                headers=busy)
        return JSONResponse({"model": job_request.model, **answer.result()})


def _json(body: bytes) -> dict:
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ProtocolError(f"Cannot parse the application/json payload.\n{error}") from None
    if not isinstance(value, dict):
        raise ProtocolError("Cannot parse the application/json payload.\nExpected an object.")
    return value
