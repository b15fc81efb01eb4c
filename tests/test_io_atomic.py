"""The one atomic writer: exact bytes, usual permissions, old file intact after a failed write."""

from __future__ import annotations

import os

import pytest

from parser.runtime.io_atomic import atomic_write


def test_text_and_binary_bytes_as_given(tmp_path):
    text, binary = tmp_path / "a.txt", tmp_path / "b.bin"
    with atomic_write(text) as handle:
        handle.write("é\r\nx\n")
    with atomic_write(binary, binary=True) as handle:
        handle.write(b"\x00\xff")
    assert text.read_bytes() == "é\r\nx\n".encode()
    assert binary.read_bytes() == b"\x00\xff"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin"]  # no temp left


def test_permissions_follow_the_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "f") as handle:
            handle.write("x")
    finally:
        os.umask(previous)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o640


def test_failure_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    target = tmp_path / "f.json"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="boom"), atomic_write(target) as handle:
        handle.write("half of the new")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_replaces_an_existing_file(tmp_path):
    target = tmp_path / "f"
    target.write_text("old")
    with atomic_write(target) as handle:
        handle.write("new")
    assert target.read_text() == "new"


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError), atomic_write(tmp_path / "nope" / "f") as handle:
        handle.write("x")
