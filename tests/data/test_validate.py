"""Each malformed case gives its named error (file, line, problem); skip mode counts; tree checks
agree with brute-force enumeration."""

from __future__ import annotations

import itertools
import pickle

import pytest

from parser.data.conllu_io import read_conllu
from parser.data.validate import ConlluError, find_cycle, parse_rows
from tests.structs.brute import all_trees, is_tree

# (fixture, line, problem substring)
MALFORMED = [
    ("bad-columns", 12, "expected 10 tab-separated columns, found 9"),
    ("bad-head-nonint", 12, "HEAD 'x' is not a non-negative integer"),
    ("bad-head-range", 12, "HEAD 12 out of range (sentence has 5 words)"),
    ("bad-self-loop", 13, "HEAD 4 is a self-loop (word 4 is its own head)"),
    ("bad-cycle", 12, "cycle in HEAD: 3 -> 4 -> 3"),
    ("bad-several-roots", 13, "several roots: words 2, 4 have HEAD 0"),
    ("bad-no-root", 8, "no root: no word has HEAD 0"),
    ("bad-empty-sentence", 8, "empty sentence: no word lines"),
    ("bad-no-final-blank", 14, "missing blank line after the last sentence (line 14)"),
    ("bad-crlf", 1, "CRLF line ending"),
    ("bad-bom", 1, "byte-order mark (BOM)"),
    ("bad-word-ids", 12, "word id '4' where 3 expected"),
    ("unannotated-heads", 10, "HEAD is '_' (unannotated) but every head of this file must be annotated"),
]


@pytest.mark.parametrize("name, line, problem", MALFORMED)
def test_malformed_file_names_file_line_problem(fixtures, name, line, problem):
    path = fixtures / f"{name}.conllu"
    with pytest.raises(ConlluError) as caught:
        read_conllu(path)
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.path, error.line) == (str(path), line)
    assert problem in error.problem
    assert str(error).startswith(f"{path}:{line}: ")


SENTENCE_LEVEL = [name for name, _, _ in MALFORMED
                  if name not in ("bad-no-final-blank", "bad-crlf", "bad-bom")]


@pytest.mark.parametrize("name", SENTENCE_LEVEL)
def test_skip_mode_skips_the_bad_sentence_only(fixtures, name):
    treebank = read_conllu(fixtures / f"{name}.conllu", on_invalid="skip")
    assert treebank.n_skipped == 1
    expected = ["ok-1", "ok-2"] if name == "bad-empty-sentence" else ["ok-1"]
    assert [s.sent_id for s in treebank] == expected
    assert treebank[0].forms == ["The", "dog", "barked", "."]


@pytest.mark.parametrize("name", ["bad-no-final-blank", "bad-crlf", "bad-bom"])
def test_file_level_problems_raise_even_when_skipping(fixtures, name):
    with pytest.raises(ConlluError):
        read_conllu(fixtures / f"{name}.conllu", on_invalid="skip")


def test_skip_mode_counts_and_keeps_reasons(fixtures, caplog):
    path = fixtures / "bad-mixed.conllu"
    with pytest.raises(ConlluError, match=r"bad-mixed.conllu:12: HEAD 3 is a self-loop"):
        read_conllu(path)
    with caplog.at_level("WARNING"):
        treebank = read_conllu(path, on_invalid="skip")
    assert [s.sent_id for s in treebank] == ["ok-1", "ok-2"]
    assert treebank.n_skipped == 2
    assert [(e.line, e.problem[:8]) for e in treebank.skipped] == [(12, "HEAD 3 i"),
                                                                  (27, "expected")]
    assert "skipped 2 malformed sentence(s) of 4" in caplog.text


def test_unannotated_heads_allowed_without_require_trees(fixtures):
    treebank = read_conllu(fixtures / "unannotated-heads.conllu", require_trees=False)
    assert treebank[1].heads == [-1] * 5
    assert treebank[1].deprels == ["dep"] * 5  # DEPREL kept as written
    assert not treebank[1].is_annotated and treebank[0].is_annotated


def test_bad_on_invalid_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="on_invalid"):
        read_conllu(tmp_path / "x.conllu", on_invalid="ignore")
    with pytest.raises(FileNotFoundError, match="x.conllu"):
        read_conllu(tmp_path / "x.conllu")


@pytest.mark.parametrize("text, line, problem", [
    ("", 1, "no sentences: the file is empty"),
    ("\n\n", 1, "no sentences"),
    ("# only a comment\n\n", 1, "empty sentence"),
    ("1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n \n", 2, "only whitespace"),
    ("1\ta\ta\tX\t_\t_\t0\troot\t_\t_", 1, "missing blank line"),
    ("1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n# late\n\n", 2, "comment line after"),
    ("1\ta\t\tX\t_\t_\t0\troot\t_\t_\n\n", 1, "empty LEMMA column"),
    ("1-3\tab\t_\t_\t_\t_\t_\t_\t_\t_\n1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n\n", 1,
     "multiword token ends at word 3"),
    ("1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n2-1\tb\t_\t_\t_\t_\t_\t_\t_\t_\n\n", 2, "out of place"),
    ("1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n1.2\tb\t_\t_\t_\t_\t_\t_\t_\t_\n\n", 2,
     "empty node id '1.2' out of place (expected 1.1)"),
    ("x\ta\ta\tX\t_\t_\t0\troot\t_\t_\n\n", 1, "invalid ID 'x'"),
    ("1\ta\ta\tX\t_\t_\t-1\troot\t_\t_\n\n", 1, "HEAD '-1' is not"),
])
def test_small_malformed_texts(tmp_path, text, line, problem):
    path = tmp_path / "t.conllu"
    path.write_text(text, encoding="utf-8", newline="")
    with pytest.raises(ConlluError) as caught:
        read_conllu(path)
    assert caught.value.line == line and problem in caught.value.problem


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.conllu"
    path.write_bytes(b"1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n\n1\t\xff\ta\tX\t_\t_\t0\troot\t_\t_\n\n")
    with pytest.raises(ConlluError, match=r"t.conllu:3: not valid UTF-8"):
        read_conllu(path)


def test_empty_nodes_and_multiword_tokens_are_not_words():
    lines = ["# text = I don't", "1\tI\tI\tPRON\t_\t_\t3\tnsubj\t_\t_",
             "1.1\tx\tx\tX\t_\t_\t_\t_\t1:dep\t_", "1.2\ty\ty\tX\t_\t_\t_\t_\t1:dep\t_",
             "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_", "2\tdo\tdo\tAUX\t_\t_\t3\taux\t_\t_",
             "3\tn't\tnot\tPART\t_\t_\t0\troot\t_\t_"]
    rows = parse_rows(lines, path="p", first_line=5)
    assert rows.forms == ["I", "do", "n't"]
    assert rows.heads == [3, 3, 0]
    assert rows.word_rows == [1, 5, 6] and rows.word_lines == [6, 10, 11]


def test_error_survives_pickling():
    error = pickle.loads(pickle.dumps(ConlluError("a.conllu", 3, "bad")))
    assert (error.path, error.line, error.problem, str(error)) == ("a.conllu", 3, "bad",
                                                                  "a.conllu:3: bad")


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("single_root", [True, False])
def test_tree_checks_accept_exactly_the_brute_force_trees(n, single_root):
    trees = set(all_trees(n, single_root=single_root))
    for heads in itertools.product(range(n + 1), repeat=n):
        lines = [f"{d}\tw\tw\tX\t_\t_\t{h}\tdep\t_\t_" for d, h in enumerate(heads, 1)]
        try:
            parse_rows(lines, path="p", first_line=1, single_root=single_root)
            accepted = True
        except ConlluError:
            accepted = False
        assert accepted == (heads in trees), heads


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_find_cycle_matches_brute_force(n):
    for heads in itertools.product(range(-1, n + 1), repeat=n):
        if any(h == d for d, h in enumerate(heads, 1)):
            continue
        cycle = find_cycle(list(heads))
        complete = [0 if h == -1 else h for h in heads]
        assert (cycle == []) == is_tree(tuple(complete)), heads
        for node in cycle:  # the cycle is closed under heads
            assert heads[node - 1] in cycle
