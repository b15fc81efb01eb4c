"""Every reader of user text refuses bytes that are not UTF-8 with ``<file>:<line>: not valid
UTF-8 (byte 0x.. at column ..)``: here the bad byte is on line 3 of each input."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from parser.cli.local_files import local_input
from parser.cli.select import _RawPool
from parser.constraints.spec import ConstraintSpecError, read_spec
from parser.data.conllu_io import read_conllu, read_tokenized
from parser.data.conllu_stream import stream_conllu
from parser.data.corpus import UnlabeledCorpus
from parser.data.corpus_files import corpus_files, detect_format
from parser.data.text_files import copy_checked, open_text, read_text
from parser.data.treebanks import forms_hold_text
from parser.eval.official import official_scores
from parser.eval.report import read_trees
from parser.inference.options import PredictOptions
from parser.pipeline import Pipeline
from parser.tokenize.check import first_untokenised_line
from parser.tokenize.text import read_paragraphs

WORD = "1\tdog\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n"
RAW = b"The dog barked.\nIt ran\naway \xe2\x80\x94 fast \xff here\n\nMore text.\n"  # 0xff: line 3
CONLLU = (b"# sent_id = 1\n# text = dog\n1\td\xffg\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
          + WORD.encode() + b"\n")


def _expect(path, *, line: int = 3, column: int):
    """pytest.raises for the error naming ``path``, ``line`` and ``column`` (ConlluError is a
    ValueError)."""
    return pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:{line}: not valid UTF-8 "
                                           rf"\(byte 0xff at column {column}\)$")


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(path.suffix)
    if opener is None:
        path.write_bytes(data)
    else:
        with opener(path, "wb") as out:
            out.write(data)
    return path


def test_the_column_counts_characters_from_one(tmp_path):
    path = _write(tmp_path, "raw.txt", RAW)
    with _expect(path, column=13), open_text(path) as lines:
        list(lines)
    with _expect(path, column=13):
        read_text(path)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compressed_text_names_the_file_and_line(tmp_path, suffix):
    path = _write(tmp_path, "raw.txt" + suffix, RAW)
    with _expect(path, column=13), open_text(path) as lines:
        list(lines)
    with _expect(path, column=13):
        read_text(path)


def test_conllu_readers(tmp_path):
    path = _write(tmp_path, "t.conllu", CONLLU)
    with _expect(path, column=4):
        read_conllu(path)
    with _expect(path, column=4):
        list(stream_conllu(path))
    with _expect(path, column=4):
        forms_hold_text(path)
    with _expect(path, column=4):
        read_trees(path)
    with _expect(path, column=4):
        list(read_paragraphs(path))


def test_official_evaluation_names_the_file_and_line(tmp_path):
    good = _write(tmp_path, "gold.conllu", WORD.encode() + b"\n")
    bad = _write(tmp_path, "pred.conllu", WORD.encode() + b"\n" + b"1\td\xffg" + WORD[5:].encode())
    with _expect(bad, column=4):
        official_scores(good, bad)


def test_tokenised_text_readers(tmp_path):
    path = _write(tmp_path, "t.txt", b"a b\nc d\ne \xff f\n")
    with _expect(path, column=3):
        read_tokenized(path)
    with _expect(path, column=3):
        first_untokenised_line(path)


def test_unlabeled_corpus_names_the_shard_and_line(tmp_path):
    path = _write(tmp_path, "corpus.txt.gz", b"a b\nc d\ne \xff f\n")
    files = corpus_files(path, option="data.unlabeled_corpus")
    corpus = UnlabeledCorpus(files, fmt=detect_format(files, given="auto", has_segmenter=False,
                                                      option="format"),
                             segment=None, max_words=100, max_bad_share=1.0, num_replicas=1, rank=0)
    while corpus.read() is not None:
        pass
    assert corpus.first_bad == [f"{path}:3: not valid UTF-8 (byte 0xff at column 3)"]


def test_the_pipeline_raw_text_reader(tmp_path):
    """``Pipeline.parse_file`` (``parser-predict pipeline=...``): line 3 is read before the first
    paragraph reaches the tokenizer, so neither model runs."""
    path = _write(tmp_path, "raw.txt", RAW)
    pipeline = object.__new__(Pipeline)
    pipeline.tokenizer, pipeline.options = object(), PredictOptions(chunk_size=10)
    pipeline.annotator = lambda *_, **__: SimpleNamespace(
        stream=lambda sentences, chunk_size: iter(list(sentences)))
    with _expect(path, column=13):
        pipeline.parse_file(path, tmp_path / "out.conllu", format="raw")
    with _expect(path, column=13):
        pipeline.parse_file(path, tmp_path / "out.conllu", format="text")
    assert not (tmp_path / "out.conllu").exists()


def test_the_selection_pool_of_raw_text(tmp_path):
    """``parser-select``'s raw pool (the tokenizer is not reached before line 3 is read)."""
    path = _write(tmp_path, "pool.txt", RAW)
    with _expect(path, column=13):
        list(_RawPool(path, tokenizer=object())())


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compressed_predict_input_names_the_users_file(tmp_path, suffix):
    """``parser-predict input=raw.txt.gz``: the error names the given file, not its copy."""
    path = _write(tmp_path, "raw.txt" + suffix, RAW)
    with _expect(path, column=13), local_input(str(path), format="raw"):
        pass


def test_standard_input_names_stdin():
    stdin = io.TextIOWrapper(io.BytesIO(RAW), encoding="utf-8")
    with _expect("<stdin>", column=13), local_input("-", format="raw", stdin=stdin):
        pass


def test_copy_checked_keeps_the_line_count_across_chunks(monkeypatch):
    monkeypatch.setattr("parser.data.text_files._CHUNK", 5)
    out = io.BytesIO()
    copy_checked(io.BytesIO(b"ab\ncdefgh\xe2\x80\x94ij\n" * 3), out, "x")
    assert out.getvalue() == b"ab\ncdefgh\xe2\x80\x94ij\n" * 3
    with _expect("x", line=7, column=2):
        copy_checked(io.BytesIO(b"ab\ncdefgh\xe2\x80\x94ij\n" * 3 + b"k\xff\n"), io.BytesIO(), "x")


def test_a_constraint_spec(tmp_path):
    path = _write(tmp_path, "c.yaml", b"# spec\n- name: x\n  upos: N\xffOUN\n")
    with pytest.raises(ConstraintSpecError, match=rf"^{re.escape(str(path))}:3: not valid UTF-8 "
                                                  r"\(byte 0xff at column 10\)$"):
        read_spec(path)
