"""The compiled maximum spanning tree decoder (``mst_native.c``), built on first use.

Every machine this project runs on has gcc and the C library, so the C twin of
:mod:`parser.structs.decoding.mst` is compiled the first time a process decodes (about a second)
into a cache folder (``$PARSER_NATIVE_CACHE``, else ``~/.cache/parser/native``, else the
temporary folder when that one cannot be written), keyed by the source's digest, and loaded with
ctypes. Where it cannot be built or loaded (no compiler, a
read-only cache), or with ``PARSER_NATIVE=0``, :func:`native_mst` returns None, said once in the
log, and the pure-torch decoder runs instead: the two give the same trees (tests compare them
tree for tree), the torch one stays the reference.
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

__all__ = ["native_library", "native_mst"]

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("mst_native.c")


def _cache_dir() -> Path:
    folder = os.environ.get("PARSER_NATIVE_CACHE")
    return Path(folder) if folder else Path.home() / ".cache" / "parser" / "native"


@cache
def native_library() -> ctypes.CDLL | None:
    """The compiled decoder, built if needed; None where it cannot be (said once)."""
    if os.environ.get("PARSER_NATIVE", "1") == "0":
        log.info("PARSER_NATIVE=0: decoding with the pure-torch maximum spanning tree")
        return None
    source = SOURCE.read_bytes()
    name = f"mst_native-{hashlib.sha256(source).hexdigest()[:16]}.so"
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
        log.warning("the compiled tree decoder could not be built or loaded (%s); decoding with "
                    "the pure-torch one", detail.splitlines()[-1] if detail else type(error).__name__)
        return None
    library.mst_batch.restype = ctypes.c_int
    library.mst_batch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_void_p]
    return library


def _built(target: Path) -> Path:
    """``target``, compiled from :data:`SOURCE` unless it exists: built beside its final name,
    then renamed, so that a concurrent process never loads half a file."""
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", partial, str(SOURCE), "-lm"],
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
    library = native_library()
    if library is None or scores.device.type != "cpu":
        return None
    batch, size = scores.shape[0], scores.shape[1]
    weights = np.ascontiguousarray(scores.detach().to(torch.float64).numpy())
    counts = np.ascontiguousarray(lengths.detach().cpu().numpy().astype(np.int64))
    heads = np.zeros((batch, size), dtype=np.int64)
    failed = library.mst_batch(weights.ctypes.data, counts.ctypes.data, batch, size,
                               int(single_root), heads.ctypes.data)
    return None if failed else torch.from_numpy(heads)
