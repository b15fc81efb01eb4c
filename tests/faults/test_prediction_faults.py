"""Faults of prediction (issue 39): one sentence that cannot be parsed costs only itself, for
every option and input kind; numbers of any size in CoNLL-U give ``file:line`` errors in every
reader; an over-long sentence and a checkpoint of absurd dimensions are refused clearly.

The unparseable sentence is injected: the decoder raises Eisner's error for any batch holding a
sentence of :data:`POISON` words (no sentence of the fixture has that many), as it does for a
sentence whose given heads admit no projective tree."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from parser import Pipeline
from parser.cli.evaluate import main as evaluate_main
from parser.cli.predict import main as predict_main
from parser.data.conllu_io import read_conllu
from parser.data.conllu_stream import stream_conllu
from parser.data.validate import ConlluError
from parser.inference import load_parser, loading
from parser.models.decoder import Decoder
from parser.runtime.checkpoint import load_checkpoint, save_checkpoint
from parser.tokenize import Token
from parser.tokenize.segment import to_sentence
from tests.inference.helpers import train_tiny

POISON = 13
EISNER = "eisner: no projective tree with a finite score for sentences [0]"
OPTIONS = {
    "best": [],
    "keep_heads": ["keep_heads=given"],
    "kbest": ["kbest=2"],
    "samples": ["samples=2", "seed=3"],
    "confidence": ["confidence=true"],
}
WORDS = [f"w{i}" for i in range(POISON)]
NUMBERS = ("tree_prob", "tree_logprob", "tree_entropy", "expected_correct")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("faults-predict"), "classifier")


@pytest.fixture
def poisoned(monkeypatch):
    """Any batch holding a sentence of POISON words fails in the decoder."""
    relations = Decoder.relations

    def failing(self, out, heads, *, upos=None):
        if bool((out.dist.lengths == POISON).any()):
            raise ValueError(EISNER)
        return relations(self, out, heads, upos=upos)

    monkeypatch.setattr(Decoder, "relations", failing)


def _word_line(i: int, form: str, head: str = "_", rel: str = "_") -> str:
    return f"{i}\t{form}\t{form}\tNOUN\t_\t_\t{head}\t{rel}\t_\t_"


def _sentence(sent_id: str, forms, heads=None) -> str:
    heads = heads or ["0"] + ["1"] * (len(forms) - 1)
    rels = ["root" if h == "0" else "dep" for h in heads]
    rows = [_word_line(i, f, h, r) for i, (f, h, r) in enumerate(zip(forms, heads, rels), start=1)]
    return "\n".join([f"# sent_id = {sent_id}", *rows]) + "\n\n"


def _blocks(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").strip("\n").split("\n\n")


def _trees(blocks: list[str]) -> list:
    """Per block: its lines with the numbers of probabilities (comments, MISC) taken out, then
    those numbers."""
    rows = []
    for block in blocks:
        text, numbers = [], []
        for line in block.splitlines():
            name = line[1:].partition("=")[0].strip()
            if line.startswith("#") and name in NUMBERS:
                numbers.append(float(line.partition("=")[2]))
                continue
            columns = line.split("\t")
            if len(columns) == 10 and "Prob=" in columns[9]:
                numbers += [float(item.split("=")[1]) for item in columns[9].split("|")
                            if "Prob=" in item]
                columns[9] = "|".join(i for i in columns[9].split("|") if "Prob=" not in i)
            text.append("\t".join(columns))
        rows.append(("\n".join(text), numbers))
    return rows


@pytest.mark.parametrize("option", OPTIONS)
def test_one_failing_sentence_costs_only_itself(checkpoint, fixtures, tmp_path, poisoned, option,
                                                capsys):
    dev = fixtures / "tiny-dev.conllu"
    source = tmp_path / "in.conllu"
    source.write_text(dev.read_text(encoding="utf-8") + _sentence("bad", WORDS), encoding="utf-8")
    clean, out = tmp_path / "clean.conllu", tmp_path / "out.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={dev}", f"output={clean}",
                         *OPTIONS[option]]) == 0
    status = predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={out}",
                           *OPTIONS[option]])
    captured = capsys.readouterr()
    assert status == 3, captured.err
    assert "parsed 13 sentences, 1 failed" in captured.out
    blocks = _blocks(out)
    # The good sentences as without the bad one: those parsed again in smaller batches have the
    # same trees, their probabilities may differ in the last digit written.
    got, expected = _trees(blocks[:-1]), _trees(_blocks(clean))
    assert [text for text, _ in got] == [text for text, _ in expected]
    assert [n for _, numbers in got for n in numbers] == pytest.approx(
        [n for _, numbers in expected for n in numbers], rel=1e-3, abs=1e-4)
    assert f"# parse_error = {EISNER}" in blocks[-1]
    assert [line for line in blocks[-1].splitlines() if "parse_error" not in line] == \
        _sentence("bad", WORDS).strip("\n").splitlines()  # its input columns, as read


def test_raw_text_through_a_pipeline_isolates_the_failing_sentence(checkpoint, tmp_path, poisoned,
                                                                   monkeypatch):
    def whitespace(tokenizer, paragraphs, *, path):  # stands in for a trained tokenizer
        for number, paragraph in enumerate(paragraphs, start=1):
            tokens = [Token(w, True, (w,)) for w in paragraph.split()]
            yield to_sentence(tokens, sent_id=str(number), path=path, line=number)

    monkeypatch.setattr("parser.pipeline.iter_sentences", whitespace)
    model, vocabs, config = load_parser(checkpoint)
    nlp = Pipeline(parser=(model, vocabs, config), tokenizer=_NoTokenizer())
    raw = tmp_path / "raw.txt"
    raw.write_text("The cat sleeps .\n\n" + " ".join(WORDS) + "\n\nI want to go home .\n",
                   encoding="utf-8")
    parsed = nlp.parse_file(raw, tmp_path / "out.conllu")
    assert parsed == 3 and parsed.failed == 1
    blocks = _blocks(tmp_path / "out.conllu")
    assert ["parse_error" in block for block in blocks] == [False, True, False]
    first, bad, last = nlp.parse("The cat sleeps .\n\n" + " ".join(WORDS) + "\n\nI want to go home .")
    assert "parse_error" in bad.metadata and "parse_error" not in first.metadata | last.metadata


class _NoTokenizer:
    model = torch.nn.Module()


# --- numbers of any size -------------------------------------------------------------------

HUGE = {"20 digits": "9" * 20, "5000 digits": "9" * 5000}


def _with_head(fixtures, tmp_path: Path, head: str) -> Path:
    """tiny-dev with word 1 of sentence 2 (file line 14) given ``head``."""
    lines = (fixtures / "tiny-dev.conllu").read_text(encoding="utf-8").split("\n")
    columns = lines[13].split("\t")
    columns[6] = head
    lines[13] = "\t".join(columns)
    path = tmp_path / "huge.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("digits", HUGE)
def test_huge_heads_name_the_file_and_line_in_every_reader(fixtures, tmp_path, digits, checkpoint,
                                                           capsys):
    path = _with_head(fixtures, tmp_path, HUGE[digits])
    message = f"{path}:14: HEAD '{HUGE[digits][:12]}"
    for read in (lambda **k: read_conllu(path, **k),  # train, evaluate, calibrate
                 lambda **k: list(stream_conllu(path, **k)),  # predict
                 lambda **k: read_conllu(path, check_heads=False, require_trees=False, **k)):
        with pytest.raises(ConlluError, match="is not a word index of this sentence") as error:
            read()
        assert str(error.value).startswith(message)
        assert len(read(on_invalid="skip")) == 11  # the sentence skipped, the others read
    out = tmp_path / "out.conllu"
    for extra in ([], ["keep_heads=given"]):
        assert predict_main([f"checkpoint={checkpoint}", f"input={path}", f"output={out}",
                             *extra]) == 2
        assert message in capsys.readouterr().err
        assert predict_main([f"checkpoint={checkpoint}", f"input={path}", f"output={out}",
                             "on_invalid=skip", *extra]) == 0
        assert len(read_conllu(out, require_trees=False)) == 11
    assert evaluate_main([f"gold={fixtures / 'tiny-dev.conllu'}", f"pred={path}"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("digits", HUGE)
@pytest.mark.parametrize("field", ["ID", "range", "empty node", "DEPS"])
def test_huge_ids_ranges_and_deps_heads_are_errors_with_a_line(tmp_path, digits, field):
    huge = HUGE[digits]
    rows = {"ID": [_word_line(1, "a", "0", "root"), _word_line(2, "b", "1").replace("2", huge, 1)],
            "range": [f"1-{huge}\tab\t_\t_\t_\t_\t_\t_\t_\t_", _word_line(1, "a", "0", "root"),
                      _word_line(2, "b", "1")],
            "empty node": [_word_line(1, "a", "0", "root"), f"1.{huge}\te\t_\t_\t_\t_\t_\t_\t_\t_",
                           _word_line(2, "b", "1")],
            "DEPS": [_word_line(1, "a", "0", "root"),
                     _word_line(2, "b", "1").rsplit("\t", 2)[0] + f"\t{huge}:dep\t_"]}[field]
    good = _sentence("ok", ["x", "y"])
    path = tmp_path / "ids.conllu"
    path.write_text(good + "\n".join(rows) + "\n\n", encoding="utf-8")
    with pytest.raises(ConlluError, match=rf"{path}:[56]: .*'[0-9.-]*{huge[:10]}") as error:
        read_conllu(path)
    assert len(str(error.value)) < len(str(path)) + 200  # the value shown, not all of it
    assert len(read_conllu(path, on_invalid="skip")) == 1


# --- bounds --------------------------------------------------------------------------------

def test_an_over_long_sentence_is_refused_alone(checkpoint, fixtures, tmp_path, capsys, caplog):
    dev = fixtures / "tiny-dev.conllu"
    source = tmp_path / "long.conllu"
    source.write_text(_sentence("long", WORDS) + dev.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out.conllu"
    with caplog.at_level(logging.WARNING):
        status = predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={out}",
                               "max_words=12"])
    assert status == 3 and "parsed 13 sentences, 1 failed" in capsys.readouterr().out
    blocks = _blocks(out)
    assert "# parse_error = 13 words, more than max_words=12" in blocks[0]
    assert not any("parse_error" in block for block in blocks[1:])
    assert "sentence long" in caplog.text
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={out}",
                         "max_words=0"]) == 2
    assert "max_words=0: expected a positive integer" in capsys.readouterr().err


def test_a_checkpoint_of_absurd_dimensions_is_refused_before_allocation(checkpoint, fixtures,
                                                                       tmp_path, capsys):
    state = load_checkpoint(checkpoint)
    state["config"]["model"]["lstm_hidden"] = 400_000
    absurd = save_checkpoint(state, tmp_path / "absurd.pt")
    status = predict_main([f"checkpoint={absurd}", f"input={fixtures / 'tiny-dev.conllu'}",
                           f"output={tmp_path / 'out.conllu'}"])
    err = capsys.readouterr().err
    assert status == 2
    assert "model.lstm_hidden=400000" in err and "bytes" in err and "available" in err
    assert "Traceback" not in err


def test_a_consistent_checkpoint_skips_the_exact_count_and_a_larger_vocabulary_does_not(
        checkpoint, tmp_path, monkeypatch):
    """Sizes that the stored weights bound need no meta-device build (about 1 s at start-up);
    a vocabulary larger than every stored dimension is counted before anything is allocated."""
    counted = []
    real = loading.check_model_memory
    monkeypatch.setattr(loading, "check_model_memory",
                        lambda *args, **kwargs: counted.append(1) or real(*args, **kwargs))
    load_parser(checkpoint)
    assert counted == []
    state = load_checkpoint(checkpoint)
    state["vocabs"]["words"]["tokens"] += "".join(f"\nw{i}" for i in range(100_000))
    larger = save_checkpoint(state, tmp_path / "larger-vocab.pt")
    with pytest.raises(RuntimeError, match="size mismatch"):  # its weights do not fit its vocabulary
        load_parser(larger)
    assert counted == [1]
