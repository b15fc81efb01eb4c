"""The streamed unlabeled corpus: formats, compression and shards, ranks, bad records, resume."""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path

import pytest
import torch

from parser.data.conllu_io import read_conllu, tokenized_sentence
from parser.data.corpus import UnlabeledCorpus
from parser.data.corpus_batches import CorpusBatcher
from parser.data.corpus_files import corpus_files, detect_format
from parser.data.vocab import Vocabularies

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SENTENCES = [s.forms for s in read_conllu(FIXTURES / "tiny-train.conllu").sentences]


def _corpus(path, *, fmt="auto", segment=None, rank=0, replicas=1, share=0.0, max_words=100):
    files = corpus_files(path, option="corpus")
    fmt = detect_format(files, given=fmt, has_segmenter=segment is not None, option="format")
    return UnlabeledCorpus(files, fmt=fmt, segment=segment, max_words=max_words,
                           max_bad_share=share, num_replicas=replicas, rank=rank)


def _read_all(corpus) -> list:
    found = []
    while (record := corpus.read()) is not None:
        found += record
    return found


def _batcher(corpus, *, buffer=7, tokens=40, seed=3, vocabs=None):
    if vocabs is None:
        vocabs = Vocabularies.build(read_conllu(FIXTURES / "tiny-train.conllu").sentences, min_freq=1)
    return CorpusBatcher(corpus, vocabs, tokens_per_batch=tokens, buffer_size=buffer, seed=seed,
                         max_length=100)


def _write_tokenised(path: Path, sentences) -> Path:
    path.write_text("".join(" ".join(forms) + "\n" for forms in sentences), encoding="utf-8")
    return path


def test_raw_tokenised_and_conllu_give_the_same_sentences(tmp_path):
    tokenised = _write_tokenised(tmp_path / "a.txt", SENTENCES)
    raw = tmp_path / "raw.txt"  # two sentences per paragraph line, split at " ||| " by the test's segmenter
    pairs = [SENTENCES[i:i + 2] for i in range(0, len(SENTENCES), 2)]
    raw.write_text("".join(" ||| ".join(" ".join(f) for f in pair) + "\n" for pair in pairs))

    def segment(paragraph):
        return [part.split() for part in paragraph.split(" ||| ")]

    conllu = FIXTURES / "tiny-train.conllu"
    read = {name: [forms for _, forms, _ in _read_all(corpus)] for name, corpus in (
        ("tokenised", _corpus(tokenised)), ("raw", _corpus(raw, segment=segment)),
        ("conllu", _corpus(conllu)))}
    assert read["tokenised"] == read["raw"] == read["conllu"] == SENTENCES
    upos = [tags for _, _, tags in _read_all(_corpus(conllu))]
    assert upos == [s.upos for s in read_conllu(conllu).sentences]  # CoNLL-U keeps its UPOS


def test_compressed_files_and_a_folder_of_shards(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    text = "".join(" ".join(f) + "\n" for f in SENTENCES)
    half = len(text.splitlines()) // 2
    lines = text.splitlines(keepends=True)
    with gzip.open(shards / "part-0.txt.gz", "wt", encoding="utf-8") as out:
        out.writelines(lines[:half])
    with lzma.open(shards / "part-1.txt.xz", "wt", encoding="utf-8") as out:
        out.writelines(lines[half:])
    (shards / ".hidden").write_text("not read\n")
    assert [forms for _, forms, _ in _read_all(_corpus(shards))] == SENTENCES


@pytest.mark.parametrize("replicas", [2, 3])
def test_ranks_cover_an_epoch_exactly_once(tmp_path, replicas):
    sentences = [[f"w{i}"] * (1 + i % 5) for i in range(101)]
    corpus_path = _write_tokenised(tmp_path / "a.txt", sentences)
    vocabs = Vocabularies.build([tokenized_sentence(f, path="", stem="", line=1) for f in sentences],
                                min_freq=1)

    def epoch(rank: int, number: int) -> list[str]:
        batcher = _batcher(_corpus(corpus_path, rank=rank, replicas=replicas), vocabs=vocabs)
        batcher.set_epoch(number)
        return [vocabs.words.tokens[int(row[1])] for batch in batcher for row in batch.words]

    for number in (0, 1):
        per_rank = [epoch(rank, number) for rank in range(replicas)]
        assert per_rank == [epoch(rank, number) for rank in range(replicas)]  # deterministic
        seen = [word for words in per_rank for word in words]
        assert sorted(seen) == sorted(f[0] for f in sentences)  # each sentence once, none skipped
    assert epoch(0, 0) != epoch(0, 1)  # another epoch, another order


def test_ranks_split_records_the_same_way_every_run(tmp_path):
    corpus_path = _write_tokenised(tmp_path / "a.txt", [[f"w{i}"] for i in range(10)])
    words = [[forms[0] for _, forms, _ in _read_all(_corpus(corpus_path, rank=r, replicas=2))]
             for r in (0, 1)]
    assert words == [[f"w{i}" for i in range(0, 10, 2)], [f"w{i}" for i in range(1, 10, 2)]]


def test_batches_respect_the_budget_and_the_buffer(tmp_path):
    corpus_path = _write_tokenised(tmp_path / "a.txt", SENTENCES * 5)
    batcher = _batcher(_corpus(corpus_path), buffer=6, tokens=60)
    batches = list(batcher)
    assert sum(b.size for b in batches) == 5 * len(SENTENCES)
    assert all(b.size == 1 or b.size * int(b.lengths.max()) <= 60 for b in batches)
    assert all(b.heads is None for b in batches)
    assert list(batcher) == []  # the epoch is over until set_epoch


def test_resume_draws_the_same_batches(tmp_path):
    corpus_path = tmp_path / "a.txt.gz"
    with gzip.open(corpus_path, "wt") as out:
        out.write("".join(" ".join(f) + "\n" for f in SENTENCES * 4))
    straight = _batcher(_corpus(corpus_path))
    expected = [straight.next_batch() for _ in range(12)]
    first = _batcher(_corpus(corpus_path))
    for _ in range(5):
        first.next_batch()
    state = first.state_dict()
    resumed = _batcher(_corpus(corpus_path))
    resumed.load_state_dict(state)
    for want in expected[5:]:
        got = resumed.next_batch()
        assert torch.equal(got.words, want.words) and torch.equal(got.index, want.index)


def test_bad_records_are_skipped_counted_and_named(tmp_path, caplog):
    path = tmp_path / "bad.txt"
    long = " ".join(["w"] * 20)
    path.write_bytes(b"good one\n\xff\xfe broken\n\n" + long.encode() + b"\nfine too\n")
    corpus = _corpus(path, share=1.0, max_words=10)
    assert [forms for _, forms, _ in _read_all(corpus)] == [["good", "one"], ["fine", "too"]]
    assert corpus.counts == {"records": 5, "sentences": 2, "bad": 2, "empty": 1}
    assert corpus.first_bad == [f"{path}:2: not valid UTF-8 (byte 0xff at column 1)",
                                f"{path}:4: 20 words (data.max_sentence_words=10)"]
    assert "skipped a bad record" in caplog.text


def test_bad_conllu_block_is_skipped_with_its_line(tmp_path):
    good = (FIXTURES / "tiny-train.conllu").read_text()
    path = tmp_path / "c.conllu"
    path.write_text("# sent_id = x\n1\tonly three\tcolumns\n\n" + good)
    corpus = _corpus(path, share=1.0)
    assert [forms for _, forms, _ in _read_all(corpus)] == SENTENCES
    assert corpus.counts["bad"] == 1 and corpus.first_bad[0].startswith(f"{path}:2: expected 10")


def test_the_share_limit_stops_with_the_first_bad_lines(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"".join(b"ok line\n" if i % 3 else b"\xff\n" for i in range(60)))
    corpus = _corpus(path, share=0.01)  # 1% of at least 1000 records: 10 bad ones allowed
    with pytest.raises(ValueError, match=rf"11 bad records of 31 .*max_bad_share=0.01.*{path}:1: not valid"):
        _read_all(corpus)


def test_an_over_long_line_is_never_held_whole(tmp_path):
    path = tmp_path / "long.txt"
    path.write_bytes(b"a " * 100_000 + b"\nshort line\n")
    corpus = _corpus(path, share=1.0, max_words=10)  # 640 bytes at most
    assert [forms for _, forms, _ in _read_all(corpus)] == [["short", "line"]]
    assert corpus.first_bad[0].startswith(f"{path}:1: over-long")


def test_bad_options(tmp_path):
    with pytest.raises(ValueError, match="data.unlabeled_corpus=.*nope: no such file or folder"):
        corpus_files(tmp_path / "nope", option="data.unlabeled_corpus")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no files"):
        corpus_files(tmp_path / "empty", option="data.unlabeled_corpus")
    with pytest.raises(ValueError, match="raw text needs a segmenter"):
        UnlabeledCorpus([tmp_path], fmt="raw", max_words=5, max_bad_share=0.0)
    with pytest.raises(ValueError, match="mixes CoNLL-U and text"):
        detect_format([Path("a.conllu"), Path("b.txt")], given="auto", has_segmenter=False, option="f")
