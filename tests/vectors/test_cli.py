"""parser-vectors: fastText vectors learned from a tiny corpus (CoNLL-U, tokenised text,
compressed), written as .vec text that parser.data.vectors reads back."""

from __future__ import annotations

import gzip

import pytest

from parser.cli.vectors import main
from parser.data.vectors import read_vectors

pytest.importorskip("gensim.models", reason="parser-vectors needs the 'vectors' extra (gensim)")


def test_vectors_learned_from_a_conllu_corpus_read_back(tmp_path, fixtures, capsys):
    output = tmp_path / "out" / "tiny.vec"
    status = main([f"corpus={fixtures / 'tiny-train.conllu'}", f"output={output}", "dim=12",
                   "epochs=2", "min_count=2", "model=cbow", "threads=1"])
    assert status == 0, capsys.readouterr().err
    rows, dim = map(int, output.read_text().splitlines()[0].split())
    vectors = read_vectors(output, max_rows=rows)
    assert dim == 12 and vectors.dim == 12 and len(vectors.words) == rows > 10
    assert "the" in vectors.words and f"-> {output}" in capsys.readouterr().out


def test_a_tokenised_compressed_corpus_of_several_files_and_the_same_vectors_twice(tmp_path):
    corpus = []
    for k in range(2):
        path = tmp_path / f"part{k}.txt.gz"
        with gzip.open(path, "wt") as handle:
            handle.write("the cat sat on the mat\nthe dog ate the cat food\n" * 20)
        corpus.append(str(path))
    outputs = [tmp_path / f"v{k}.vec.gz" for k in range(2)]
    for output in outputs:
        assert main([f"corpus=[{','.join(corpus)}]", f"output={output}", "dim=5", "epochs=1",
                     "seed=3"]) == 0
    first, second = (read_vectors(output, max_rows=100) for output in outputs)
    assert set(first.words) == {"the", "cat", "sat", "on", "mat", "dog", "ate", "food"}
    assert first.words == second.words and (first.matrix == second.matrix).all()


def test_bad_options_are_refused(tmp_path, fixtures, capsys):
    corpus = f"corpus={fixtures / 'tiny-train.conllu'}"
    assert main([corpus, f"output={tmp_path / 'v.vec'}", "model=sg"]) == 2
    assert "model=sg: expected skipgram or cbow" in capsys.readouterr().err
    assert main([corpus, f"output={tmp_path / 'v.vec'}", "dim=zero"]) == 2
    assert main([corpus, f"output={tmp_path / 'v.vec'}", "min_count=1000"]) == 2
    assert "no word occurs min_count=1000 times" in capsys.readouterr().err
    assert main([f"output={tmp_path / 'v.vec'}"]) == 2
