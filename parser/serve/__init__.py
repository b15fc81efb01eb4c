"""``parser-serve``: pipeline files behind UDPipe's REST protocol (docs/service.md).

- :mod:`parser.serve.protocol`: UDPipe's parameters (``/models``, ``/process``: ``data``,
  ``model``, ``tokenizer``, ``tagger``, ``parser``, ``input``, ``output``), its answers and its
  error texts, and what only a tree CRF adds (``confidence``, ``kbest``, ``samples``,
  ``keep_heads``, ``keep_columns``) as a :class:`parser.inference.options.PredictOptions`;
- :mod:`parser.serve.body`: a request's parameters from its query, form or multipart body,
  bounded and checked as UTF-8;
- :mod:`parser.serve.worker`: the models, loaded once, and the one thread that owns them: it
  parses the requests waiting together (a word budget per batch) from a bounded queue;
- :mod:`parser.serve.app`: the ASGI application (FastAPI) and its settings.
"""

from __future__ import annotations

from parser.serve.app import ServeSettings, create_app
from parser.serve.protocol import PICTURES, ProtocolError
from parser.serve.worker import Batcher, load_models

__all__ = ["PICTURES", "Batcher", "ProtocolError", "ServeSettings", "create_app", "load_models"]
