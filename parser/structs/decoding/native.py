"""The compiled decoders, built on first use: the maximum spanning tree (``mst_native.c``),
Eisner's best projective tree (``eisner_native.c``), the projective attachment of punctuation
(``punct_native.c``) and a linear chain's best tags (``viterbi_native.c``).

Every machine this project runs on has gcc and the C library, so the C twins of
:mod:`parser.structs.decoding.mst`, :mod:`parser.structs.projective.eisner`,
:mod:`parser.structs.decoding.punct_attachment` and ``LinearChainCRF.argmax`` are compiled into
one library the first time a process decodes (about a second) into a cache folder
(``$PARSER_NATIVE_CACHE``, else ``~/.cache/parser/native``, else the temporary folder when that
one cannot be written), keyed by the sources' digest, and loaded with ctypes. Where it cannot be
built or loaded (no compiler), or with ``PARSER_NATIVE=0``, :func:`native_mst`,
:func:`native_eisner`, :func:`native_punct` and :func:`native_viterbi` return None, said once in
the log, and the pure-torch decoders (numpy for the chain) run instead: each pair gives the same
trees or tags (tests compare them one for one), the torch and numpy ones stay the reference.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["native_eisner", "native_library", "native_mst", "native_punct", "native_viterbi"]

log = logging.getLogger(__name__)

SOURCES = tuple(Path(__file__).with_name(name) for name in ("mst_native.c", "eisner_native.c",
                                                                    "punct_native.c", "viterbi_native.c"))


def _cache_dir() -> Path:
    folder = os.environ.get("PARSER_NATIVE_CACHE")
    return Path(folder) if folder else Path.home() / ".cache" / "parser" / "native"


@cache
def native_library() -> ctypes.CDLL | None:
    """The compiled decoders, built if needed; None where they cannot be (said once)."""
    if os.environ.get("PARSER_NATIVE", "1") == "0":
        log.info("PARSER_NATIVE=0: decoding with the pure-torch decoders")
        return None
    digest = hashlib.sha256(b"".join(source.read_bytes() for source in SOURCES)).hexdigest()
    name = f"decoders_native-{digest[:16]}.so"
    error: Exception | None = None
    # the cache folder, else the temporary one (a read-only home)
    for folder in (_cache_dir(), Path(tempfile.gettempdir()) / f"parser-native-{os.getuid()}"):
        try:
            library = ctypes.CDLL(str(_built(folder / name)))
            break
        except (OSError, subprocess.SubprocessError) as failure:
            error = failure
    else:
        detail = str(getattr(error, "stderr", None) or error).strip()
        log.warning("the compiled tree decoders could not be built or loaded (%s); decoding with "
                    "the pure-torch ones", detail.splitlines()[-1] if detail else type(error).__name__)
        return None
    for function in (library.mst_batch, library.eisner_batch):
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_void_p]
    library.punct_batch.restype = ctypes.c_int
    library.punct_batch.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 2 + [ctypes.c_void_p] * 2
    for function in (library.viterbi_float, library.viterbi_double):
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    return library


def _built(target: Path) -> Path:
    """``target``, compiled from :data:`SOURCES` unless it exists: built beside its final name,
    then renamed, so that a concurrent process never loads half a file."""
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", partial, *map(str, SOURCES), "-lm"],
                           check=True, capture_output=True, text=True, timeout=120)
            os.replace(partial, target)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    return target


def native_mst(scores: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor | None:
    """``heads [B, N+1]`` of the best trees of CPU ``scores [B, N+1, N+1]`` by the compiled
    decoder; None when it is not available or a sentence has no finite tree (the torch decoder
    then runs, and raises the error it names)."""
    return _decode("mst_batch", scores, lengths, single_root=single_root)


def native_eisner(scores: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor | None:
    """``heads [B, N+1]`` of the best projective trees of CPU ``scores [B, N+1, N+1]`` by the
    compiled Eisner; None as :func:`native_mst`."""
    return _decode("eisner_batch", scores, lengths, single_root=single_root)


def _decode(function: str, scores: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor | None:
    library = native_library()
    if library is None or scores.device.type != "cpu":
        return None
    batch, size = scores.shape[0], scores.shape[1]
    weights, counts = _c_array(scores, np.float64), _c_array(lengths, np.int64)
    heads = np.zeros((batch, size), dtype=np.int64)
    failed = getattr(library, function)(weights.ctypes.data, counts.ctypes.data, batch, size,
                                        int(single_root), heads.ctypes.data)
    return None if failed else torch.from_numpy(heads)


def native_punct(heads: Tensor, lengths: Tensor, marked: Tensor, scores: Tensor) -> tuple[Tensor, Tensor] | None:
    """``(heads, stuck)`` of :func:`parser.structs.attach_punct_projectively` for CPU tensors by
    the compiled twin; None when it is not available."""
    library = native_library()
    if library is None or scores.device.type != "cpu":
        return None
    batch, size = heads.shape
    trees, counts = _c_array(heads, np.int64), _c_array(lengths, np.int64)
    marks, weights = _c_array(marked, np.uint8), _c_array(scores, np.float64)
    out = np.zeros((batch, size), dtype=np.int64)
    stuck = np.zeros(batch, dtype=np.uint8)
    if library.punct_batch(trees.ctypes.data, counts.ctypes.data, marks.ctypes.data,
                           weights.ctypes.data, batch, size, out.ctypes.data, stuck.ctypes.data):
        return None
    return torch.from_numpy(out), torch.from_numpy(stuck.astype(bool))


def native_viterbi(scores: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """``tags [B, pos]`` int64 of ``LinearChainCRF.argmax`` for float32 or float64 ``scores [B,
    pos, S, S]`` (padding cleaned) and ``lengths [B]`` by the compiled twin, in the scores' own
    precision; None when it is not available."""
    library = native_library()
    function = {np.dtype(np.float32): "viterbi_float", np.dtype(np.float64): "viterbi_double"}.get(scores.dtype)
    if library is None or function is None:
        return None
    batch, positions, states = scores.shape[:3]
    weights = np.ascontiguousarray(scores)
    counts = np.ascontiguousarray(lengths, dtype=np.int64)
    tags = np.zeros((batch, positions), dtype=np.int64)
    if getattr(library, function)(weights.ctypes.data, counts.ctypes.data, batch, positions, states,
                                  tags.ctypes.data):
        return None
    return tags


def _c_array(tensor: Tensor, dtype: type) -> np.ndarray:
    """``tensor`` as a C-contiguous numpy array of ``dtype``, the layout the compiled functions
    read (a copy only where the type or layout differs)."""
    return np.ascontiguousarray(tensor.detach().cpu().numpy().astype(dtype, copy=False))
