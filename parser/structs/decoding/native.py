"""The compiled decoders, built on first use: the maximum spanning tree (``mst_native.c``),
Eisner's best projective tree (``eisner_native.c``), the projective attachment of punctuation
(``punct_native.c``) and a linear chain's best tags (``viterbi_native.c``).

The C twins of :mod:`parser.structs.decoding.mst`, :mod:`parser.structs.projective.eisner`,
:mod:`parser.structs.decoding.punct_attachment` and ``LinearChainCRF.argmax`` are compiled (gcc,
else cc) into one library the first time a process decodes (about a second), named by the
sources' digest so that a stale build is never reused, and loaded with ctypes. The library lives
in a folder of the current user that no one else can write (``$PARSER_NATIVE_CACHE``, else
``$XDG_CACHE_HOME/parser/native`` or ``~/.cache/parser/native``, else ``parser-native-<uid>`` in
the temporary folder when that one cannot be used); a folder or library owned by another user or
writable by others is refused, and so is a folder under one that someone else could rename (owned
by another user than this one or root, or writable by others without the sticky bit), so that no
one can plant code there. Where the library cannot be
built or loaded (no sources, no compiler, a failed build, an unsafe folder), or with
``PARSER_NATIVE=0``, :func:`native_mst`, :func:`native_eisner`, :func:`native_punct` and
:func:`native_viterbi` return None, said once in the log, and the pure-torch decoders (numpy for
the chain) run instead: each pair gives the same trees or tags (tests compare them one for one),
the torch and numpy ones stay the reference.

Every wrapper checks the shapes, types and lengths it hands to C (ValueError naming the tensor and
the value), and every C function checks its lengths again and its allocations: its error codes
become ValueError and MemoryError.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["check_punct_inputs", "native_eisner", "native_library", "native_mst", "native_punct",
           "native_viterbi"]

log = logging.getLogger(__name__)

SOURCES = tuple(Path(__file__).with_name(name) for name in ("mst_native.c", "eisner_native.c",
                                                                    "punct_native.c", "viterbi_native.c"))
NO_MEMORY, BAD_INPUT = -1, -2  # the C functions' error codes (an enum in each source)


class _Unusable(Exception):
    """A folder, library or compiler that cannot be used (the reason)."""


class _Unsafe(_Unusable):
    """A folder or library that someone else could have written (the reason)."""


@cache
def native_library() -> ctypes.CDLL | None:
    """The compiled decoders, built if needed; None where they cannot be (said once)."""
    if os.environ.get("PARSER_NATIVE", "1") == "0":
        log.info("PARSER_NATIVE=0: decoding with the pure-torch decoders")
        return None
    try:
        digest = hashlib.sha256(b"".join(source.read_bytes() for source in SOURCES)).hexdigest()
        folders = _folders()
    except OSError as failure:  # no sources (a wheel without them)
        _unavailable(f"{type(failure).__name__}: {failure}")
        return None
    name = f"decoders_native-{digest[:16]}.so"
    reasons, unsafe = [], False
    for folder in folders:
        try:
            library = ctypes.CDLL(str(_built(folder / name)))
            _declare(library)
        except (OSError, subprocess.SubprocessError, AttributeError, _Unusable) as failure:
            reasons.append(f"{folder}: {_reason(failure)}")
            unsafe |= isinstance(failure, _Unsafe)
            continue
        if reasons:  # a refused folder is worth a look, a read-only home is not
            log.log(logging.WARNING if unsafe else logging.INFO, "the compiled decoders are "
                    "loaded from %s (%s)", folder, "; ".join(reasons))
        return library
    _unavailable("; ".join(reasons))
    return None


def _unavailable(reason: str) -> None:
    """The one warning of a process without the compiled decoders."""
    log.warning("the compiled tree decoders could not be built or loaded (%s); decoding with the "
                "pure-torch ones", reason)


def _reason(failure: Exception) -> str:
    """The last line of a compiler's complaint, else the failure itself."""
    detail = str(getattr(failure, "stderr", None) or failure).strip()
    return detail.splitlines()[-1] if detail else type(failure).__name__


def _folders() -> list[Path]:
    """Where the library may live: the cache folder, else the temporary one (a read-only home)."""
    own, xdg = os.environ.get("PARSER_NATIVE_CACHE"), os.environ.get("XDG_CACHE_HOME")
    try:
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
        folders = [Path(own) if own else base / "parser" / "native"]
    except RuntimeError:  # no home folder
        folders = [Path(own)] if own else []
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return [*folders, Path(tempfile.gettempdir()) / f"parser-native-{user}"]


def _built(target: Path) -> Path:
    """``target``, compiled from :data:`SOURCES` unless it exists, in a checked private folder:
    built beside its final name, then renamed, so that a concurrent process never loads half a
    file."""
    folder = target.parent
    _check_ancestors(folder)  # before anything is made under a folder someone else could rename
    for missing in reversed([f for f in (folder, *folder.parents) if not f.exists()]):
        missing.mkdir(mode=0o700, exist_ok=True)  # private at every level, whatever the umask
    _check_ancestors(folder)
    _check_private(folder, is_folder=True)
    if not os.path.lexists(target):
        compiler = _compiler()
        fd, partial = tempfile.mkstemp(prefix=".building-", suffix=".so", dir=folder)
        os.close(fd)
        try:
            subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", partial, *map(str, SOURCES),
                            "-lm"], check=True, capture_output=True, text=True, timeout=120)
            os.chmod(partial, 0o700)
            os.replace(partial, target)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    _check_private(target, is_folder=False)
    return target


def _compiler() -> str:
    """gcc, else cc, from ``PATH``."""
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        raise _Unusable("no C compiler (gcc or cc) on PATH")
    return found


def _check_private(path: Path, *, is_folder: bool) -> None:
    """Refuse ``path`` unless it is a folder (a regular file, not a link) owned by the current
    user that no one else can write to. Windows has no owner ids: its folders' ACLs are trusted."""
    if not hasattr(os, "getuid"):
        return
    info = os.stat(path) if is_folder else os.lstat(path)
    kind = "folder" if is_folder else "regular file"
    if not (stat.S_ISDIR(info.st_mode) if is_folder else stat.S_ISREG(info.st_mode)):
        raise _Unsafe(f"{path} is not a {kind}: refused")
    if info.st_uid != os.getuid():
        raise _Unsafe(f"the {kind} {path} is owned by uid {info.st_uid}, not by this user "
                        f"(uid {os.getuid()}): refused")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _Unsafe(f"the {kind} {path} can be written by others (mode "
                        f"{stat.S_IMODE(info.st_mode):o}): refused (chmod go-w)")


def _check_ancestors(folder: Path) -> None:
    """Refuse ``folder`` when a folder above it (on its path as given and as resolved) could let
    someone else swap it: owned by a user other than this one or root, or writable by others
    without the sticky bit (which keeps them from renaming what is not theirs, as in /tmp)."""
    if not hasattr(os, "getuid"):
        return
    given = Path(os.path.abspath(folder))
    for parent in dict.fromkeys([*given.parents, *given.resolve().parents]):
        if not parent.exists():  # made private by the caller
            continue
        info = os.stat(parent)
        if info.st_uid not in (0, os.getuid()):
            raise _Unsafe(f"the folder {parent} above {folder} is owned by uid {info.st_uid}, "
                          f"not by this user (uid {os.getuid()}) or root: refused")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
            raise _Unsafe(f"the folder {parent} above {folder} can be written by others (mode "
                          f"{stat.S_IMODE(info.st_mode):o}, no sticky bit): refused")


def _declare(library: ctypes.CDLL) -> None:
    """The C signatures, so that ctypes passes each argument at its width."""
    for function in (library.mst_batch, library.eisner_batch):
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_void_p]
    library.punct_batch.restype = ctypes.c_int
    library.punct_batch.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 2 + [ctypes.c_void_p] * 2
    for function in (library.viterbi_float, library.viterbi_double):
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 3 + [ctypes.c_void_p]


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
    if not isinstance(scores, Tensor) or scores.device.type != "cpu":
        return None
    batch, size = _check_square(scores)
    counts = _c_lengths(lengths, batch, 0, size - 1)
    library = native_library()
    if library is None:
        return None
    weights = _c_array(scores, torch.float64, (batch, size, size), "scores")
    heads = np.zeros((batch, size), dtype=np.int64)
    status = getattr(library, function)(weights.ctypes.data, counts.ctypes.data, batch, size,
                                        int(single_root), heads.ctypes.data)
    _raise_for(status, function)
    return None if status else torch.from_numpy(heads)


def check_punct_inputs(heads: Tensor, lengths: Tensor, marked: Tensor, scores: Tensor) -> None:
    """ValueError unless ``heads [B, N+1]`` integer, ``lengths [B]`` in ``0..N``, ``marked
    [B, N+1]`` bool and ``scores [B, N+1, N+1]`` float fit together, each word's head in ``0..N``."""
    batch, size = _check_square(scores)
    for name, tensor in (("heads", heads), ("marked", marked)):
        if not isinstance(tensor, Tensor) or tuple(tensor.shape) != (batch, size):
            raise ValueError(f"{name}: expected shape [B, N+1] = [{batch}, {size}] (as scores), got "
                             f"{tuple(getattr(tensor, 'shape', ()))}")
    if heads.is_floating_point() or heads.is_complex() or heads.dtype == torch.bool:
        raise ValueError(f"heads: expected an integer tensor, got {heads.dtype}")
    if marked.dtype != torch.bool:
        raise ValueError(f"marked: expected a bool tensor, got {marked.dtype}")
    counts = torch.from_numpy(_c_lengths(lengths, batch, 0, size - 1)).to(heads.device)
    positions = torch.arange(size, device=heads.device)
    words = (positions >= 1) & (positions <= counts[:, None])
    bad = words & ((heads < 0) | (heads > size - 1))
    if bool(bad.any()):
        b, x = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"heads[{b}, {x}] = {int(heads[b, x])} outside 0..N = 0..{size - 1}")


def native_punct(heads: Tensor, lengths: Tensor, marked: Tensor, scores: Tensor) -> tuple[Tensor, Tensor] | None:
    """``(heads, stuck)`` of :func:`parser.structs.attach_punct_projectively` for CPU tensors by
    the compiled twin; None when it is not available."""
    if not isinstance(scores, Tensor) or scores.device.type != "cpu":
        return None
    check_punct_inputs(heads, lengths, marked, scores)
    library = native_library()
    if library is None:
        return None
    batch, size = heads.shape
    trees = _c_array(heads, torch.int64, (batch, size), "heads")
    counts = _c_lengths(lengths, batch, 0, size - 1)
    marks = _c_array(marked, torch.uint8, (batch, size), "marked")
    weights = _c_array(scores, torch.float64, (batch, size, size), "scores")
    out = np.zeros((batch, size), dtype=np.int64)
    stuck = np.zeros(batch, dtype=np.uint8)
    _raise_for(library.punct_batch(trees.ctypes.data, counts.ctypes.data, marks.ctypes.data,
                                   weights.ctypes.data, batch, size, out.ctypes.data,
                                   stuck.ctypes.data), "punct_batch")
    return torch.from_numpy(out), torch.from_numpy(stuck.astype(bool))


def native_viterbi(scores: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """``tags [B, pos]`` int64 of ``LinearChainCRF.argmax`` for float32 or float64 ``scores [B,
    pos, S, S]`` (padding cleaned) and ``lengths [B]`` in ``1..pos`` by the compiled twin, in the
    scores' own precision; None when it is not available."""
    scores = np.asarray(scores)
    if scores.ndim != 4 or scores.shape[2] != scores.shape[3] or scores.shape[2] < 1:
        raise ValueError(f"scores: expected shape [B, pos, S, S] with S >= 1, got {scores.shape}")
    batch, positions, states = scores.shape[:3]
    counts = _c_lengths(lengths, batch, 1, positions)
    function = {np.dtype(np.float32): "viterbi_float", np.dtype(np.float64): "viterbi_double"}.get(scores.dtype)
    library = native_library()
    if library is None or function is None:
        return None
    weights = np.ascontiguousarray(scores)
    tags = np.zeros((batch, positions), dtype=np.int64)
    _raise_for(getattr(library, function)(weights.ctypes.data, counts.ctypes.data, batch,
                                          positions, states, tags.ctypes.data), function)
    return tags


def _check_square(scores: Tensor) -> tuple[int, int]:
    """``(B, N+1)`` of a float ``scores [B, N+1, N+1]``; ValueError otherwise."""
    if not isinstance(scores, Tensor) or not scores.is_floating_point():
        raise ValueError(f"scores: expected a float tensor, got {getattr(scores, 'dtype', type(scores))}")
    if scores.dim() != 3 or scores.shape[1] != scores.shape[2] or scores.shape[1] < 1:
        raise ValueError(f"scores: expected shape [B, N+1, N+1], got {tuple(scores.shape)}")
    return scores.shape[0], scores.shape[1]


def _c_lengths(lengths: Tensor | np.ndarray, batch: int, low: int, high: int) -> np.ndarray:
    """``lengths`` as a C-contiguous int64 ``[B]`` array; ValueError unless each is in
    ``low..high``."""
    values = lengths.detach().cpu().numpy() if isinstance(lengths, Tensor) else np.asarray(lengths)
    if values.dtype.kind not in "iu" or values.shape != (batch,):
        raise ValueError(f"lengths: expected an integer [B] = [{batch}] array, got {values.dtype} "
                         f"of shape {values.shape}")
    bad = (values < low) | (values > high)
    if bad.any():
        b = int(bad.nonzero()[0][0])
        raise ValueError(f"lengths[{b}] = {int(values[b])} outside {low}..{high} (the scores' size)")
    return np.ascontiguousarray(values, dtype=np.int64)


def _c_array(tensor: Tensor, dtype: torch.dtype, shape: tuple[int, ...], name: str) -> np.ndarray:
    """``tensor`` as a C-contiguous numpy array of ``dtype`` and ``shape``, the layout the
    compiled functions read (a copy only where the type or layout differs)."""
    array = np.ascontiguousarray(tensor.detach().to("cpu", dtype).numpy())
    if array.shape != shape or not array.flags.c_contiguous:
        raise ValueError(f"{name}: expected a contiguous {list(shape)} array, got {array.shape}")
    return array


def _raise_for(status: int, function: str) -> None:
    """The C functions' error codes as Python exceptions."""
    if status == NO_MEMORY:
        raise MemoryError(f"{function}: out of memory in the compiled decoder")
    if status == BAD_INPUT:
        raise ValueError(f"{function}: the compiled decoder refused its input (a length or a head "
                         f"outside 0..N of the scores)")
