"""The compiled decoders are safe to load and to call: bad lengths and heads are refused in Python
before C sees them, and by the C functions themselves; a library folder or file someone else
could write is refused; missing sources, a missing compiler or an unsafe folder fall back to the
pure-torch decoders with a warning and the same trees."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile

import numpy as np
import pytest
import torch

from parser.structs import attach_punct_projectively, eisner, maximum_spanning_tree
from parser.structs.chain.crf import LinearChainCRF
from parser.structs.decoding import native

as_root = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                             reason="chown to another user needs root")


def _inputs(seed=0):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(3, 7, 7, generator=generator)
    lengths = torch.tensor([6, 3, 1])
    marked = torch.rand(3, 7, generator=generator) < 0.3
    chain = torch.randn(3, 9, 4, 4, generator=generator)
    return scores, lengths, marked, chain, torch.tensor([9, 4, 1])


def _decode_all():
    """The trees and tags of every entry point, through the public decoders."""
    scores, lengths, marked, chain, chain_lengths = _inputs()
    mst = maximum_spanning_tree(scores, lengths, single_root=True)
    projective = eisner(scores, lengths, single_root=True)
    punct = attach_punct_projectively(mst, lengths, marked, scores)
    tags = LinearChainCRF(chain, chain_lengths).argmax()
    return mst, projective, punct[0], punct[1], tags


class _NoC:
    """A library whose every function fails the test when called."""

    def __getattr__(self, name):
        def called(*args):
            raise AssertionError(f"{name} was called with bad input")
        return called


@pytest.fixture
def no_c(monkeypatch):
    monkeypatch.setattr(native, "native_library", lambda: _NoC())


@pytest.mark.parametrize("bad", [7, 8, -1, 2**40])
def test_a_length_outside_the_scores_is_refused_before_c(no_c, bad):
    scores, lengths, marked, chain, chain_lengths = _inputs()
    lengths = lengths.clone()
    lengths[1] = bad
    heads = torch.zeros(3, 7, dtype=torch.long)
    message = rf"lengths\[1\] = {bad} outside"
    with pytest.raises(ValueError, match=message):
        native.native_mst(scores, lengths, single_root=True)
    with pytest.raises(ValueError, match=message):
        native.native_eisner(scores, lengths, single_root=False)
    with pytest.raises(ValueError, match=message):
        native.native_punct(heads, lengths, marked, scores)
    with pytest.raises(ValueError, match=message):
        attach_punct_projectively(heads, lengths, marked, scores, native=False)
    chain_lengths = chain_lengths.clone()
    chain_lengths[1] = bad + 3 if bad > 0 else 0  # 1..9 allowed
    with pytest.raises(ValueError, match=r"lengths\[1\] = .* outside 1\.\.9"):
        native.native_viterbi(chain.numpy(), chain_lengths.numpy())
    for decoder in (maximum_spanning_tree, eisner):  # their own checks say it first
        with pytest.raises(ValueError, match=r"lengths\[1\]"):
            decoder(scores, lengths, single_root=True)


def test_bad_shapes_types_and_heads_are_refused_before_c(no_c):
    scores, lengths, marked, chain, chain_lengths = _inputs()
    heads = torch.zeros(3, 7, dtype=torch.long)
    with pytest.raises(ValueError, match="lengths: expected an integer"):
        native.native_mst(scores, lengths.float(), single_root=True)
    with pytest.raises(ValueError, match="lengths: expected an integer"):
        native.native_eisner(scores, lengths[:2], single_root=True)
    with pytest.raises(ValueError, match="scores: expected shape"):
        native.native_mst(scores[:, :, :6], lengths, single_root=True)
    with pytest.raises(ValueError, match="marked: expected shape"):
        native.native_punct(heads, lengths, marked[:, :5], scores)
    with pytest.raises(ValueError, match="marked: expected a bool"):
        native.native_punct(heads, lengths, marked.long(), scores)
    with pytest.raises(ValueError, match="heads: expected an integer"):
        native.native_punct(heads.float(), lengths, marked, scores)
    for bad in (7, -1):
        wrong = heads.clone()
        wrong[0, 4] = bad
        with pytest.raises(ValueError, match=rf"heads\[0, 4\] = {bad} outside 0..N = 0..6"):
            native.native_punct(wrong, lengths, marked, scores)
    padding = heads.clone()
    padding[2, 5] = -1  # padding is ignored
    attach_punct_projectively(padding, lengths, marked, scores, native=False)
    with pytest.raises(ValueError, match="scores: expected shape"):
        native.native_viterbi(chain.numpy()[:, :, :3], chain_lengths.numpy())


def test_the_c_functions_refuse_bad_lengths_themselves():
    library = native.native_library()
    assert library is not None
    batch, size = 2, 5
    scores = np.zeros((batch, size, size))
    for bad in (size, -1, 2**40):
        lengths = np.array([2, bad], dtype=np.int64)
        for function in (library.mst_batch, library.eisner_batch):
            heads = np.full((batch, size), 99, dtype=np.int64)
            assert function(scores.ctypes.data, lengths.ctypes.data, batch, size, 1,
                            heads.ctypes.data) == native.BAD_INPUT
            assert (heads == 99).all()  # refused before anything is written
        trees, marks = np.zeros((batch, size), dtype=np.int64), np.zeros((batch, size), dtype=np.uint8)
        out, stuck = np.full((batch, size), 99, dtype=np.int64), np.zeros(batch, dtype=np.uint8)
        assert library.punct_batch(trees.ctypes.data, lengths.ctypes.data, marks.ctypes.data,
                                   scores.ctypes.data, batch, size, out.ctypes.data,
                                   stuck.ctypes.data) == native.BAD_INPUT
        assert (out == 99).all()
    trees[1, 3] = size  # a word's head outside the scores
    lengths = np.array([2, 4], dtype=np.int64)
    assert library.punct_batch(trees.ctypes.data, lengths.ctypes.data, marks.ctypes.data,
                               scores.ctypes.data, batch, size, out.ctypes.data,
                               stuck.ctypes.data) == native.BAD_INPUT
    positions, states = 6, 3
    for dtype, function in ((np.float32, library.viterbi_float), (np.float64, library.viterbi_double)):
        chain = np.zeros((batch, positions, states, states), dtype=dtype)
        for bad in (positions + 1, 0, -3):
            lengths = np.array([2, bad], dtype=np.int64)
            tags = np.full((batch, positions), 99, dtype=np.int64)
            assert function(chain.ctypes.data, lengths.ctypes.data, batch, positions, states,
                            tags.ctypes.data) == native.BAD_INPUT
            assert (tags == 99).all()


def test_a_c_error_code_becomes_a_python_exception():
    with pytest.raises(MemoryError, match="mst_batch"):
        native._raise_for(native.NO_MEMORY, "mst_batch")
    with pytest.raises(ValueError, match="punct_batch"):
        native._raise_for(native.BAD_INPUT, "punct_batch")
    native._raise_for(0, "mst_batch")
    native._raise_for(2, "mst_batch")  # sentences without a tree: the caller's None


@pytest.fixture
def places(monkeypatch, tmp_path):
    """A fresh cache folder and temporary folder for the library; the compiled results first."""
    native.native_library.cache_clear()
    expected = _decode_all()
    library = native.native_library()
    assert library is not None
    built = library._name
    cache, temporary = tmp_path / "cache", tmp_path / "tmp"
    temporary.mkdir(mode=0o700)
    monkeypatch.setenv("PARSER_NATIVE_CACHE", str(cache))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    native.native_library.cache_clear()
    yield cache, temporary / f"parser-native-{os.getuid()}", expected, built
    native.native_library.cache_clear()


def _falls_back(expected, caplog, reason):
    with caplog.at_level(logging.WARNING, logger=native.__name__):
        assert native.native_library() is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "could not be built or loaded" in warned[0], warned
    assert reason in warned[0], warned[0]
    for got, want in zip(_decode_all(), expected):
        assert torch.equal(got, want)


def test_a_fresh_build_is_private(places):
    cache, _, expected, _ = places
    assert native.native_library() is not None
    built = list(cache.iterdir())
    assert len(built) == 1 and built[0].name.startswith("decoders_native-")  # no partial file left
    assert os.stat(cache).st_mode & 0o777 == 0o700
    assert os.stat(built[0]).st_mode & 0o077 == 0
    for got, want in zip(_decode_all(), expected):
        assert torch.equal(got, want)


@as_root
def test_folders_owned_by_another_user_are_refused(places, caplog):
    cache, temporary, expected, _ = places
    for folder in (cache, temporary):
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534)
    _falls_back(expected, caplog, "owned by uid 65534")


def test_folders_writable_by_others_are_refused(places, caplog):
    cache, temporary, expected, _ = places
    for folder, mode in ((cache, 0o770), (temporary, 0o777)):
        folder.mkdir()
        os.chmod(folder, mode)
    _falls_back(expected, caplog, "can be written by others (mode 770)")


def test_a_folder_under_one_others_can_write_is_refused(places, caplog, monkeypatch):
    cache, temporary, expected, _ = places
    shared = cache.parent / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone could rename the folders below it and put theirs instead
    monkeypatch.setenv("PARSER_NATIVE_CACHE", str(shared / "native"))
    os.chmod(temporary.parent, 0o777)
    try:
        _falls_back(expected, caplog, "above")
        assert f"the folder {shared} above {shared / 'native'} can be written by others (mode 777, no sticky bit)" in caplog.text
        assert not (shared / "native").exists() or not list((shared / "native").iterdir())
        os.chmod(shared, 0o1777)  # sticky, as /tmp: others cannot rename what is not theirs
        os.chmod(temporary.parent, 0o700)
        native.native_library.cache_clear()
        assert native.native_library() is not None
        assert [p.name[:16] for p in (shared / "native").iterdir()] == ["decoders_native-"]
    finally:
        os.chmod(temporary.parent, 0o700)


@as_root
def test_a_folder_under_another_users_folder_is_refused(places, caplog, monkeypatch):
    cache, temporary, expected, _ = places
    theirs = cache.parent / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    monkeypatch.setenv("PARSER_NATIVE_CACHE", str(theirs / "native"))
    os.chown(temporary.parent, 65534, 65534)
    try:
        _falls_back(expected, caplog, "owned by uid 65534, not by this user")
    finally:
        os.chown(temporary.parent, os.getuid(), os.getgid())


def test_missing_folders_are_made_private_whatever_the_umask(places, monkeypatch):
    cache, _, _, _ = places
    deep = cache / "parser" / "native"
    monkeypatch.setenv("PARSER_NATIVE_CACHE", str(deep))
    old = os.umask(0o002)  # a group-writable default, as with user private groups
    try:
        assert native.native_library() is not None
    finally:
        os.umask(old)
    assert [p.name[:16] for p in deep.iterdir()] == ["decoders_native-"]  # no fallback
    for folder in (cache, cache / "parser", deep):
        assert os.stat(folder).st_mode & 0o777 == 0o700, folder


def test_a_refused_cache_folder_leaves_the_temporary_one(places, caplog):
    cache, temporary, _, _ = places
    cache.mkdir()
    os.chmod(cache, 0o775)
    with caplog.at_level(logging.WARNING, logger=native.__name__):
        assert native.native_library() is not None
    assert any("refused" in r.getMessage() for r in caplog.records)
    assert [path.name[:16] for path in temporary.iterdir()] == ["decoders_native-"]
    assert not list(cache.iterdir())  # nothing was built in the refused folder


@pytest.mark.parametrize("how", ["owner", "mode", "link"])
def test_a_library_file_someone_else_could_write_is_refused(places, caplog, how):
    cache, temporary, expected, built = places
    if how == "owner" and os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    digest = hashlib.sha256(b"".join(source.read_bytes() for source in native.SOURCES)).hexdigest()
    for folder in (cache, temporary):  # a library where each folder expects one
        folder.mkdir(mode=0o700)
        target = folder / f"decoders_native-{digest[:16]}.so"
        shutil.copy(built, target)
        os.chmod(target, 0o700)
        if how == "owner":
            os.chown(target, 65534, 65534)
        elif how == "mode":
            os.chmod(target, 0o722)
        else:
            target.rename(folder / "real.so")
            target.symlink_to(folder / "real.so")
    reason = {"owner": "owned by uid 65534", "mode": "written by others (mode 722)",
              "link": "not a regular file"}[how]
    _falls_back(expected, caplog, reason)


def test_missing_sources_fall_back(places, monkeypatch, caplog, tmp_path):
    _, _, expected, _ = places
    monkeypatch.setattr(native, "SOURCES", (tmp_path / "mst_native.c",))
    _falls_back(expected, caplog, "FileNotFoundError")


def test_a_missing_compiler_falls_back(places, monkeypatch, caplog, tmp_path):
    _, _, expected, _ = places
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    _falls_back(expected, caplog, "no C compiler (gcc or cc) on PATH")
