"""The models of a service and the one thread that owns them.

A :class:`parser.Pipeline` is not thread-safe, so one worker thread per process reads, tokenises
and parses every request; the event loop only waits for its answers. Requests wait in a bounded
queue (:class:`QueueFull` past ``queue_size``: the service answers 503). The worker takes every
waiting request up to ``batch_words`` words (at least one request), parses the sentences of the
requests that ask the same of the same model as one input (one batch through the annotator), and
answers each request with exactly its own sentences, in order. A request whose deadline passed
before the worker reached it, or whose client left, is dropped unparsed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from parser.inference.options import PredictOptions
from parser.pipeline import Pipeline
from parser.serve.protocol import (
    PICTURES,
    ProcessRequest,
    ProtocolError,
    read_sentences,
    result_text,
)

__all__ = ["Batcher", "Job", "QueueFull", "load_models", "model_paths"]

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The queue holds ``queue_size`` requests already."""


def model_paths(spec: str | Sequence[str]) -> dict[str, Path]:
    """Name -> pipeline file of ``models=``: files separated by commas, or folders (their
    ``*.pipeline`` files, sorted); names are the files' stems, the first is the default."""
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    paths: dict[str, Path] = {}
    for item in filter(None, items):
        path = Path(item).expanduser()
        found = sorted(path.glob("*.pipeline")) if path.is_dir() else [path]
        if path.is_dir() and not found:
            raise ValueError(f"models={item}: a folder without *.pipeline files")
        for file in found:
            if not file.is_file():
                raise ValueError(f"models={item}: no such file")
            if file.stem in paths:
                raise ValueError(f"models={item}: the name {file.stem!r} is taken by "
                                 f"{paths[file.stem]}")
            paths[file.stem] = file
    if not paths:
        raise ValueError("models=: give pipeline files (a.pipeline,b.pipeline) or a folder")
    return paths


def load_models(paths: dict[str, Path], *, device: str = "cpu",
                batch_words: int = 5000) -> dict[str, Pipeline]:
    """Each pipeline file loaded once (name -> :class:`Pipeline`)."""
    return {name: Pipeline.load(path, device=device, batch_size=batch_words)
            for name, path in paths.items()}


@dataclass
class Job:
    """One request waiting: ``words`` estimates its size (whitespace tokens of ``data``)."""

    request: ProcessRequest
    deadline: float  # time.monotonic()
    future: Future = field(default_factory=Future)
    abandoned: bool = False  # the client left or its deadline passed: not parsed
    # instead of the annotation of ``request``: run alone in the worker with the request's model
    # (the page's /trees, parser.serve.page); its result or ProtocolError is the answer
    call: Callable[[Pipeline], object] | None = None

    @property
    def words(self) -> int:
        return max(1, len(self.request.data.split()))


class Batcher:
    """The worker thread and its queue (see the module docstring)."""

    def __init__(self, models: dict[str, Pipeline], *, queue_size: int = 64,
                 batch_words: int = 5000, max_words: int = 1000) -> None:
        if queue_size < 1 or batch_words < 1 or max_words < 1:
            raise ValueError(f"queue_size={queue_size}, batch_words={batch_words}, max_words="
                             f"{max_words}: expected positive integers")
        self.models, self.queue_size = models, queue_size
        self.batch_words, self.max_words = batch_words, max_words
        self._waiting: deque[Job] = deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="parser-serve-worker", daemon=True)
        self.batches = 0  # batches parsed (tests and the benchmark read it)

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, timeout: float | None = None) -> None:
        """Finish every request queued, then end the thread."""
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def submit(self, request: ProcessRequest, *, deadline: float,
               call: Callable[[Pipeline], object] | None = None) -> Job:
        """Queue ``request`` (``call``: run instead of its annotation, see :class:`Job`);
        :class:`QueueFull` when ``queue_size`` wait already."""
        job = Job(request, deadline, call=call)
        with self._ready:
            if self._stopping:
                raise QueueFull("the service is stopping")
            if len(self._waiting) >= self.queue_size:
                raise QueueFull(f"{len(self._waiting)} requests are waiting")
            self._waiting.append(job)
            self._ready.notify()
        return job

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _take(self) -> list[Job] | None:
        """The next batch: every waiting job up to ``batch_words`` (at least one); None: stop."""
        with self._ready:
            while not self._waiting:
                if self._stopping:
                    return None
                self._ready.wait()
            jobs, words = [self._waiting.popleft()], 0
            words = jobs[0].words
            while self._waiting and words + self._waiting[0].words <= self.batch_words:
                job = self._waiting.popleft()
                jobs.append(job)
                words += job.words
            return jobs

    def _run(self) -> None:
        while (jobs := self._take()) is not None:
            try:
                self._answer(jobs)
            except Exception as error:  # never lose a request: each gets an answer
                log.exception("parser-serve: a batch failed")
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(ProtocolError(
                            f"An internal error occurred during processing.\n{error}",
                            status=500))
            self.batches += 1

    def _answer(self, jobs: Iterable[Job]) -> None:
        """Read every live job, parse the ones that ask alike together, answer each."""
        groups: dict[tuple, list[tuple[Job, list, PredictOptions]]] = {}
        now = time.monotonic()
        for job in jobs:
            if job.abandoned or now > job.deadline or job.future.done():
                job.abandoned = True
                continue
            model = self.models[job.request.model]
            if job.call is not None:
                try:
                    job.future.set_result(job.call(model))
                except ProtocolError as error:
                    job.future.set_exception(error)
                continue
            try:
                sentences = read_sentences(job.request, model.tokenizer, max_words=self.max_words)
            except ProtocolError as error:
                job.future.set_exception(error)
                continue
            if not (job.request.tag or job.request.parse) or not sentences:
                job.future.set_result(self._finish(job, sentences, None))
                continue
            options = job.request.options
            if not job.request.parse:  # the tagger alone: the input's tree columns stay
                options = options.replace(keep_heads="none")
            elif not job.request.tag:  # the parser alone: the input's tags are kept
                options = options.replace(keep_columns="given")
            key = (job.request.model, options) if job.request.batchable else (id(job),)
            groups.setdefault(key, []).append((job, sentences, options))
        for members in groups.values():
            job0, _, options = members[0]
            model = self.models[job0.request.model]
            every = [s for _, sentences, _ in members for s in sentences]
            annotated = model.annotator(options, name="data").annotate(every)
            if len(members) > 1 and len(annotated.blocks) != len(every):
                raise RuntimeError("a batch of several requests gave more than one block per "
                                   "sentence")  # batchable requests give one each
            start = 0
            for job, sentences, _ in members:
                end = start + len(sentences) if len(members) > 1 else len(annotated.blocks)
                job.future.set_result(self._finish(job, sentences, annotated.blocks[start:end]))
                start = end

    @staticmethod
    def _finish(job: Job, sentences: list, blocks: list[str] | None) -> str:
        text = result_text(job.request, sentences, blocks)
        picture = PICTURES.get(job.request.output)
        return picture(text) if picture is not None else text
