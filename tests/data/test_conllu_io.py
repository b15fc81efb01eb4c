"""Reading fixtures and real treebanks, writing, and round trips."""

from __future__ import annotations

import io
import os

import conllu
import pytest
import torch

from parser.data.conllu_io import format_sentence, read_conllu, read_tokenized, write_conllu
from parser.data.validate import ConlluError


def test_tiny_fixtures_read_with_words_multiword_tokens_and_empty_nodes(fixtures):
    train = read_conllu(fixtures / "tiny-train.conllu")
    dev = read_conllu(fixtures / "tiny-dev.conllu")
    assert (len(train), len(dev)) == (32, 12)
    second = train[1]
    assert second.forms == ["I", "do", "n't", "like", "cold", "coffee", "."]
    assert second.lemmas[2] == "not" and second.upos[2] == "PART"
    assert second.heads == [4, 4, 4, 0, 6, 4, 4]
    assert second.deprels == ["nsubj", "aux", "advmod", "root", "amod", "obj", "punct"]
    assert second.line == 10 and second.word_lines[0] == 12 and second.word_lines[1] == 14
    assert second.sent_id == "tiny-train-02" and second.text == "I don't like cold coffee."
    gapping = train[11]  # "I like tea and you coffee." has empty node 5.1
    assert len(gapping) == 7 and "5.1\tlike" in "\n".join(gapping.lines)
    assert all(s.is_annotated for s in train)


def test_tokenlist_is_the_conllu_parse_of_all_lines(fixtures):
    sentence = read_conllu(fixtures / "tiny-train.conllu")[11]
    tokens = sentence.tokenlist
    assert tokens.metadata["sent_id"] == "tiny-train-12"
    assert [t["id"] for t in tokens] == [1, 2, 3, 4, 5, (5, ".", 1), 6, 7]
    words = [t for t in tokens if isinstance(t["id"], int)]
    assert [t["form"] for t in words] == sentence.forms
    assert [t["head"] for t in words] == sentence.heads


def test_fast_columns_agree_with_conllu_on_ewt_dev(ud_root):
    path = ud_root / "en_ewt" / "en_ewt-ud-dev.conllu"
    ours = read_conllu(path)
    with open(path, encoding="utf-8") as f:
        theirs = list(conllu.parse_incr(f))
    assert len(ours) == len(theirs)
    for sentence, tokens in zip(ours, theirs):
        words = [t for t in tokens if isinstance(t["id"], int)]
        assert sentence.forms == [t["form"] for t in words]
        assert sentence.lemmas == [t["lemma"] for t in words]
        assert sentence.upos == [None if t["upos"] == "_" else t["upos"] for t in words]
        assert sentence.heads == [t["head"] for t in words]
        assert sentence.deprels == [t["deprel"] for t in words]


@pytest.mark.parametrize("split, sentences, words", [
    ("dev", 2001, 25147), ("test", 2077, 25094), ("train", 12544, 204577)])
def test_real_ewt_counts_match_the_data_readme(ud_root, split, sentences, words):
    treebank = read_conllu(ud_root / "en_ewt" / f"en_ewt-ud-{split}.conllu")
    assert (len(treebank), treebank.n_words, treebank.n_skipped) == (sentences, words, 0)


def _raw(path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


@pytest.mark.parametrize("name", ["tiny-train.conllu", "tiny-dev.conllu", "EWT-dev"])
def test_unchanged_round_trip_is_byte_identical(fixtures, ud_root, tmp_path, name):
    path = ud_root / "en_ewt" / "en_ewt-ud-dev.conllu" if name == "EWT-dev" else fixtures / name
    out = tmp_path / "out.conllu"
    write_conllu(read_conllu(path), out)
    assert _raw(out) == _raw(path)


def test_new_heads_replace_only_head_and_deprel(fixtures, tmp_path):
    treebank = read_conllu(fixtures / "tiny-train.conllu")
    # a left-branching chain: word 1 is the root, every other word attaches to its left
    heads = [[0] + list(range(1, len(s))) for s in treebank]
    deprels = [["root"] + ["dep"] * (len(s) - 1) for s in treebank]
    upos = [["X"] * len(s) for s in treebank]
    out = tmp_path / "pred.conllu"
    write_conllu(treebank, out, heads=heads, deprels=deprels)
    back = read_conllu(out)
    assert [s.heads for s in back] == heads and [s.deprels for s in back] == deprels
    for old_sentence, new_sentence in zip(treebank, back):
        assert len(old_sentence.lines) == len(new_sentence.lines)
        for old, new in zip(old_sentence.lines, new_sentence.lines):
            old_cols, new_cols = old.split("\t"), new.split("\t")
            if old.startswith("#") or not old_cols[0].isdigit():
                assert old == new  # comments, multiword tokens, empty nodes untouched
            else:
                assert [c for i, c in enumerate(old_cols) if i not in (6, 7)] == \
                       [c for i, c in enumerate(new_cols) if i not in (6, 7)]
    write_conllu(treebank, out, upos=upos)
    assert [s.upos for s in read_conllu(out)] == upos
    assert [s.heads for s in read_conllu(out)] == [s.heads for s in treebank]


def test_write_accepts_tensors_and_none_labels(fixtures):
    sentence = read_conllu(fixtures / "tiny-dev.conllu")[0]
    block = format_sentence(sentence, heads=torch.tensor([3, 3, 0, 6, 6, 3, 3]),
                            deprels=[None] * 7)
    assert block.endswith("\n\n")
    assert block.split("\n")[4].split("\t")[6:8] == ["3", "_"]


@pytest.mark.parametrize("heads, message", [
    ([[1]], "1 values for column 7 but the sentence has 7 words"),
    ([[0, 9, 2, 3, 3, 3, 3]], "head 9 of word 2 is not in 0..7"),
    ([[0, 2, 2, 3, 3, 3, 3]], "head 2 of word 2"),
])
def test_write_rejects_bad_heads_and_keeps_the_old_file(fixtures, tmp_path, heads, message):
    sentence = read_conllu(fixtures / "tiny-dev.conllu")[0]
    out = tmp_path / "out.conllu"
    out.write_text("previous\n")
    with pytest.raises(ValueError, match=message):
        write_conllu([sentence], out, heads=heads)
    assert out.read_text() == "previous\n"  # atomic: nothing half-written
    assert os.listdir(tmp_path) == ["out.conllu"]  # and no temporary file left behind
    with pytest.raises(ValueError, match="2 heads for 1 sentences"):
        write_conllu([sentence], out, heads=heads * 2)


def test_write_to_a_stream(fixtures):
    treebank = read_conllu(fixtures / "tiny-dev.conllu")
    stream = io.StringIO()
    write_conllu(treebank, stream)
    assert stream.getvalue() == _raw(fixtures / "tiny-dev.conllu")


def test_read_tokenized_and_write_predictions(tmp_path):
    path = tmp_path / "raw.txt"
    path.write_text("The cat sat .\n\n  Dogs   bark\n", encoding="utf-8")
    treebank = read_tokenized(path)
    assert [s.forms for s in treebank] == [["The", "cat", "sat", "."], ["Dogs", "bark"]]
    assert [s.line for s in treebank] == [1, 3]
    assert treebank[1].heads == [-1, -1] and treebank[1].upos == [None, None]
    assert treebank[1].text == "Dogs bark" and treebank[1].sent_id == "raw-3"
    out = tmp_path / "pred.conllu"
    write_conllu(treebank, out, heads=[[3, 3, 0, 3], [2, 0]],
                 deprels=[["det", "nsubj", "root", "punct"], ["nsubj", "root"]])
    back = read_conllu(out)
    assert [s.heads for s in back] == [[3, 3, 0, 3], [2, 0]]
    assert back[1].forms == ["Dogs", "bark"]


def test_read_tokenized_rejects_empty_and_crlf(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ConlluError, match="empty.txt:1: no sentences"):
        read_tokenized(empty)
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"a b\r\nc\r\n")
    with pytest.raises(ConlluError, match="crlf.txt:1: CRLF"):
        read_tokenized(crlf)


def test_all_sentences_skipped_is_an_error(tmp_path):
    path = tmp_path / "bad.conllu"
    path.write_text("1\ta\ta\tX\t_\t_\t1\troot\t_\t_\n\n", encoding="utf-8")
    with pytest.raises(ConlluError, match=r"no valid sentences \(1 skipped\)"):
        read_conllu(path, on_invalid="skip")
