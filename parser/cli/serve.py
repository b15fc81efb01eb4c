"""``parser-serve`` (or ``python -m parser.cli.serve``): pipeline files behind UDPipe's REST
protocol (docs/service.md).

    parser-serve models=runs/en/en.pipeline                        # http://127.0.0.1:8001
    parser-serve models=en.pipeline,de.pipeline port=8080          # two models, en the default
    parser-serve models=runs/pipelines/ host=0.0.0.0 token=$SECRET workers=2

``models``: pipeline files separated by commas, or a folder of ``*.pipeline`` files; each is
served under its file's stem, the first is the default. ``host`` (default 127.0.0.1: this
machine only; ``0.0.0.0`` listens on every interface, an explicit choice that warns when no
token is set), ``port`` (8001), ``token`` (or ``$PARSER_SERVE_TOKEN``): clients then send
``Authorization: Bearer <token>`` (401 otherwise). ``workers``: processes, each with its own
models and worker thread (uvicorn's workers). Limits: ``max_body`` (bytes, 4194304), ``max_words``
(per sentence, 1000), ``queue_size`` (requests waiting per process, 64; 503 with Retry-After
past it), ``batch_words`` (words parsed together, 2000), ``deadline`` (seconds per request, 60),
``threads`` (torch threads of each worker, 1). ``access_log`` (false): a line per request on
standard error, as uvicorn writes it (off by default, as gunicorn's: it costs a few percent of the
throughput; a reverse proxy logs requests too). SIGTERM or Ctrl+C: no new connection is accepted,
the requests in flight are answered, then the process exits.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Sequence

import uvicorn

from parser.cli.shell import parse_bool, run_key_value_cli
from parser.serve.app import ENVIRONMENT, ServeSettings
from parser.serve.worker import model_paths

__all__ = ["LOOPBACK", "OPTIONS", "main", "settings_of"]

log = logging.getLogger("parser.serve")

LOOPBACK = ("127.0.0.1", "localhost", "::1")
OPTIONS = {
    "models": None,  # a.pipeline,b.pipeline or a folder of *.pipeline files; the first is the default
    "host": "127.0.0.1",  # 0.0.0.0: every interface (say so; set a token)
    "port": "8001",
    "token": None,  # clients send Authorization: Bearer <token> (default: $PARSER_SERVE_TOKEN)
    "workers": "1",  # processes, each loading the models once
    "max_body": str(4 * 1024 * 1024),  # bytes of a request body (413 past it)
    "max_words": "1000",  # words of one sentence (400 naming the sentence past it)
    "queue_size": "64",  # requests waiting per process (503 + Retry-After past it)
    "batch_words": "2000",  # words of the waiting requests parsed together
    "deadline": "60",  # seconds a request may take (503 past it)
    "threads": "1",  # torch threads of each process's worker
    "device": "cpu",
    "access_log": "false",  # true: uvicorn's line per request on standard error
}


def settings_of(args: dict) -> ServeSettings:
    """The :class:`ServeSettings` of ``key=value`` options (ValueError naming a bad one)."""
    numbers = {}
    for key in ("max_body", "max_words", "queue_size", "batch_words", "threads"):
        numbers[key] = _integer(args[key], option=key)
    try:
        deadline = float(args["deadline"])
    except ValueError:
        raise ValueError(f"deadline={args['deadline']}: expected seconds") from None
    token = args["token"] or os.environ.get("PARSER_SERVE_TOKEN") or None
    paths = {name: str(path) for name, path in model_paths(args["models"]).items()}
    return ServeSettings(paths, deadline=deadline, token=token, device=args["device"], **numbers)


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(list(sys.argv[1:] if argv is None else argv), prog="parser-serve",
                             doc=__doc__, defaults=OPTIONS, required=("models",), command=_serve)


def _serve(args: dict) -> str:
    settings = settings_of(args)
    host, port = args["host"], _integer(args["port"], option="port")
    workers = _integer(args["workers"], option="workers")
    if host not in LOOPBACK:
        if settings.token is None:
            log.warning("parser-serve: listening on %s, beyond this machine, with no token: "
                        "anyone who reaches the port can use the service (set token= or "
                        "$PARSER_SERVE_TOKEN, or put it behind a proxy that authenticates)", host)
        else:
            log.info("parser-serve: listening on %s; clients send Authorization: Bearer", host)
    os.environ[ENVIRONMENT] = settings.to_json()  # each worker process builds its app from it
    # uvicorn answers what is in flight on SIGTERM, then raises the signal again with the
    # handler it found: this one, so that the stop ends here and the status is 0, not -15
    previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        uvicorn.run("parser.serve.app:app_from_environment", factory=True, host=host, port=port,
                    workers=workers, timeout_graceful_shutdown=int(settings.deadline) + 5,
                    log_level="info", access_log=parse_bool(args["access_log"], option="access_log"))
    except _Stopped:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return f"parser-serve: stopped ({', '.join(settings.models)})"


class _Stopped(Exception):
    """SIGTERM reached ``parser-serve`` outside uvicorn's own handler."""


def _stopped(signum: int, frame: object) -> None:
    raise _Stopped


def _integer(value: str, *, option: str) -> int:
    """``"8"`` -> 8; not a positive integer: ValueError naming ``option``.

    >>> _integer("0", option="workers")
    Traceback (most recent call last):
    ...
    ValueError: workers=0: expected a positive integer
    """
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"{option}={value}: expected a positive integer")
    return number


if __name__ == "__main__":
    sys.exit(main())
