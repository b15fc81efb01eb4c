"""parser.data.vectors: every format read on vectors written here, only the usable rows kept,
and bad files refused with the file and the line."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import numpy as np
import pytest

from parser.data.vectors import VectorsError, read_vectors

WORDS = ["the", "of", "cat", "Paris", "paris", "dog", "été"]


def rows(dim: int = 4) -> np.ndarray:
    return np.arange(len(WORDS) * dim, dtype=np.float32).reshape(len(WORDS), dim) / 10


def text(*, header: bool = True, dim: int = 4, trailing: str = "") -> str:
    lines = [f"{len(WORDS)} {dim}"] if header else []
    lines += [f"{word} " + " ".join(f"{v:g}" for v in row) + trailing for word, row in zip(WORDS, rows(dim))]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("suffix", [".vec", ".txt", ".vec.gz", ".vec.bz2", ".vec.xz"])
def test_text_files_are_read_with_or_without_header_compressed_or_not(tmp_path, header, suffix):
    path = tmp_path / f"v{suffix}"
    data = text(header=header, trailing=" " if suffix == ".txt" else "").encode()
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(path.suffix)
    if opener is None:
        path.write_bytes(data)
    else:
        with opener(path, "wb") as handle:
            handle.write(data)
    vectors = read_vectors(path, max_rows=100)
    assert vectors.words == WORDS and vectors.rows_read == len(WORDS) and vectors.fmt == "text"
    np.testing.assert_allclose(vectors.matrix, rows())


def test_only_the_first_rows_and_the_wanted_words_and_their_lowercased_forms_are_kept(tmp_path):
    path = tmp_path / "v.vec"
    path.write_text(text())
    vectors = read_vectors(path, wanted=["PARIS", "Dog", "unknown"], max_rows=2, reserved=3)
    # the first two rows, then "paris" (PARIS lowercased) and "dog" (Dog lowercased), file order
    assert vectors.words == ["the", "of", "paris", "dog"]
    assert vectors.matrix.shape == (3 + 4, 4)
    assert not vectors.matrix[:3].any()
    np.testing.assert_allclose(vectors.matrix[3:], rows()[[0, 1, 4, 5]])
    assert read_vectors(path, wanted=["Paris"], max_rows=0).words == ["Paris", "paris"]
    assert read_vectors(path, max_rows=3, skip=["of"]).words == ["the", "cat"]


def test_a_row_of_another_dimension_fails_with_file_and_line(tmp_path):
    path = tmp_path / "v.vec"
    lines = text().splitlines()
    lines[3] += " 9"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(VectorsError, match=rf"{path}:4: 5 values where the header gives 4"):
        read_vectors(path, max_rows=0)
    lines = text(header=False).splitlines()
    lines[2] = "cat 1 2"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(VectorsError, match=rf"{path}:3: 2 values where the first row has 4"):
        read_vectors(path)


def test_a_truncated_file_fails_with_file_and_line(tmp_path):
    path = tmp_path / "v.vec"
    whole = text()
    path.write_text("\n".join(whole.splitlines()[:5]) + "\n")  # header promises 7 rows, 4 given
    with pytest.raises(VectorsError, match=rf"{path}:5: the header promises 7 rows, the file holds 4"):
        read_vectors(path)
    path.write_text(whole[: whole.index("dog") + 6])  # cut inside the 'dog' row
    with pytest.raises(VectorsError, match=rf"{path}:7: the last row is cut: 1 values where"):
        read_vectors(path)
    with gzip.open(tmp_path / "v.vec.gz", "wb") as handle:
        handle.write(text(header=False)[:-9].encode())
    with pytest.raises(VectorsError, match=r"v.vec.gz:7: the last row is cut"):
        read_vectors(tmp_path / "v.vec.gz")


def test_files_that_are_not_word_vectors_are_refused(tmp_path, fixtures):
    with pytest.raises(VectorsError, match=r"tiny-train.conllu:1: not a word-vectors file \(a CoNLL-U file\)"):
        read_vectors(fixtures / "tiny-train.conllu")
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"the": [1, 2]}))
    with pytest.raises(VectorsError, match=r"v.json:1: not a word-vectors file \(JSON\)"):
        read_vectors(path)
    path = tmp_path / "words.txt"
    path.write_text("the cat sat\non the mat\n")
    with pytest.raises(VectorsError, match=r"words.txt:1: not a word-vectors file"):
        read_vectors(path)
    path.write_text("")
    with pytest.raises(VectorsError, match=r"words.txt:1: empty file"):
        read_vectors(path)
    path.write_text("2 3\nthe 1 2 x\ncat 1 2 3\n")
    with pytest.raises(VectorsError, match=r"words.txt:2: value 'x' is not a number"):
        read_vectors(path)
    with pytest.raises(FileNotFoundError, match="no such vectors file"):
        read_vectors(tmp_path / "missing.vec")


def test_undecodable_text_fails_with_file_and_line(tmp_path):
    path = tmp_path / "v.vec"
    path.write_bytes(b"2 2\nthe 1 2\nca\xfft 3 4\n")
    with pytest.raises(VectorsError, match=rf"{path}:3: not valid UTF-8 \(byte 0xff at column 3\)"):
        read_vectors(path)


def test_a_word_given_twice_keeps_its_first_row(tmp_path):
    path = tmp_path / "v.vec"
    path.write_text("the 1 2\ncat 3 4\nthe 5 6\n")
    vectors = read_vectors(path)
    assert vectors.words == ["the", "cat"] and vectors.matrix.tolist() == [[1, 2], [3, 4]]
