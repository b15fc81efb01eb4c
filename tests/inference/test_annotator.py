"""One annotator behind every prediction path: the same sentences give the same trees whatever the
input kind (CoNLL-U file, tokenised text file, the Python API's word lists, standard input, gzip)
and whatever the chunking, for every option (best tree, confidence, k-best, samples, given heads);
the trainer's final evaluation writes what ``parser-evaluate checkpoint=`` writes."""

from __future__ import annotations

import gzip
import io
import lzma
import re
from pathlib import Path

import conllu
import pytest

from parser import Pipeline
from parser.cli.evaluate import main as evaluate_main
from parser.cli.predict import main as predict_main
from parser.data.conllu_io import read_conllu
from parser.eval.report import file_report
from parser.inference import Annotator, load_parser, parse, predict_file
from parser.inference.options import PredictOptions
from parser.train.final import evaluate_split

OPTIONS = {
    "best": {},
    "confidence": {"confidence": True},
    "kbest": {"kbest": 3},
    "samples": {"samples": 2, "seed": 1},
}
# What only the tree depends on: the columns the parser writes and the trees' comments.
TREE_KEYS = ("tree_rank", "tree_prob", "sample", "tree_logprob", "tree_entropy", "expected_correct")


def _trees(text: str) -> list[tuple]:
    """Per block: (forms, heads, deprels, HeadProb/DeprelProb, tree comments)."""
    rows = []
    for tokens in conllu.parse(text):
        words = [t for t in tokens if isinstance(t["id"], int)]
        rows.append((
            [t["form"] for t in words], [t["head"] for t in words], [t["deprel"] for t in words],
            [(t["misc"] or {}).get("HeadProb") for t in words],
            {key: tokens.metadata.get(key) for key in TREE_KEYS},
        ))
    return rows


def _without_upos(line: str) -> str:
    columns = line.split("\t")
    if len(columns) != 10:
        return line
    columns[3] = "_"
    return "\t".join(columns)


@pytest.fixture(scope="module")
def dev(fixtures) -> Path:
    return fixtures / "tiny-dev.conllu"


def _without_probs(conllu: str) -> str:
    return re.sub(r"^# tree_prob = .*$", "# tree_prob", conllu, flags=re.MULTILINE)


def _probs(conllu: str) -> list[float]:
    return [float(p) for p in re.findall(r"^# tree_prob = (\S+)$", conllu, flags=re.MULTILINE)]


@pytest.mark.parametrize("option", OPTIONS)
def test_every_input_kind_and_chunking_gives_the_same_trees(tiny_checkpoint, dev, tmp_path, option):
    options = OPTIONS[option]
    sentences = read_conllu(dev).sentences
    model, vocabs, config = load_parser(tiny_checkpoint)
    # CoNLL-U file, in chunks of 1000 and of 3 sentences.
    whole, chunked = tmp_path / "whole.conllu", tmp_path / "chunked.conllu"
    assert predict_file(tiny_checkpoint, dev, whole, PredictOptions(**options)) == len(sentences)
    predict_file(tiny_checkpoint, dev, chunked, PredictOptions(chunk_size=3, **options))
    expected = whole.read_text(encoding="utf-8")
    # Other chunks batch other sentences together: the trees and every other line are the same
    # bytes, a k-best tree's probability the same to float32 precision (its last printed digit
    # can move with the padding of the batch's LU).
    assert _without_probs(chunked.read_text(encoding="utf-8")) == _without_probs(expected)
    assert _probs(chunked.read_text(encoding="utf-8")) == pytest.approx(_probs(expected), rel=1e-5)
    # The annotator itself, one chunk: the same bytes.
    annotator = Annotator(model, vocabs, config=config, tokens_per_batch=5000, **options)
    assert "".join(annotator.annotate(sentences).blocks) == expected
    # Words alone: the CoNLL-U without its UPOS (the UD punct rule reads the tags), tokenised text
    # (one sentence a line) and the Python API's word lists give the same trees.
    bare = tmp_path / "bare.conllu"
    bare.write_text("".join(_without_upos(line) for line in dev.read_text(encoding="utf-8")
                            .splitlines(keepends=True)), encoding="utf-8")
    predict_file(tiny_checkpoint, bare, tmp_path / "bare.pred.conllu", PredictOptions(**options))
    text = tmp_path / "words.txt"
    text.write_text("".join(" ".join(s.forms) + "\n" for s in sentences), encoding="utf-8")
    predict_file(tiny_checkpoint, text, tmp_path / "text.conllu", PredictOptions(**options))
    nlp = Pipeline(parser=(model, vocabs, config), chunk_sentences=4,
                   confidence=options.get("confidence", False))
    api = nlp.to_conllu(nlp.parse([s.forms for s in sentences], kbest=options.get("kbest", 0),
                                  samples=options.get("samples", 0), seed=options.get("seed", 0)))
    assert len(_trees(expected)) == len(sentences) * (options.get("kbest") or options.get("samples") or 1)
    trees = _trees((tmp_path / "bare.pred.conllu").read_text(encoding="utf-8"))
    assert _trees((tmp_path / "text.conllu").read_text(encoding="utf-8")) == trees
    assert _trees(api) == trees


def test_given_heads_are_kept_through_the_api_and_the_file(tiny_checkpoint, dev, tmp_path):
    sentences = read_conllu(dev).sentences
    required = [[(dep, head) for dep, head in enumerate(s.heads, start=1) if dep % 2]
                for s in sentences]
    partial = tmp_path / "partial.conllu"
    with open(partial, "w", encoding="utf-8") as out:
        for sentence, kept in zip(sentences, required):
            deps = {dep for dep, _ in kept}
            for line in sentence.lines:
                columns = line.split("\t")
                if len(columns) == 10 and columns[0].isdigit() and int(columns[0]) not in deps:
                    columns[6:8] = ["_", "_"]
                out.write(_without_upos("\t".join(columns) + "\n"))  # the API has no tags
            out.write("\n")
    written = tmp_path / "kept.conllu"
    predict_file(tiny_checkpoint, partial, written, PredictOptions(keep_heads="given"))
    nlp = Pipeline(parser=load_parser(tiny_checkpoint))
    api = nlp.parse([s.forms for s in sentences], required=required)
    from_file = conllu.parse(written.read_text(encoding="utf-8"))
    assert len(from_file) == len(api) == len(sentences)
    for tokens, kept, parsed in zip(from_file, required, api):
        assert ("parse_error" in tokens.metadata) == ("parse_error" in parsed.metadata)
        heads = [t["head"] for t in tokens if isinstance(t["id"], int)]
        assert heads == [t["head"] for t in parsed if isinstance(t["id"], int)]
        if "parse_error" not in tokens.metadata:
            assert all(heads[dep - 1] == head for dep, head in kept)
    assert sum("parse_error" not in t.metadata for t in from_file) > len(sentences) // 2


def test_standard_input_output_and_gzip_give_the_file_output(tiny_checkpoint, dev, tmp_path,
                                                             monkeypatch, capsys):
    plain = tmp_path / "plain.conllu"
    assert predict_main([f"checkpoint={tiny_checkpoint}", f"input={dev}", f"output={plain}",
                         "kbest=2"]) == 0
    expected = plain.read_text(encoding="utf-8")
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(dev.read_text(encoding="utf-8")))
    assert predict_main([f"checkpoint={tiny_checkpoint}", "input=-", "output=-", "kbest=2"]) == 0
    captured = capsys.readouterr()
    assert captured.out == expected  # the parse alone: the summary went to standard error
    assert "parsed" in captured.err
    for suffix, compress in ((".gz", gzip.compress), (".xz", lzma.compress)):
        packed = tmp_path / f"tiny-dev.conllu{suffix}"
        packed.write_bytes(compress(dev.read_bytes()))
        unpacked = tmp_path / f"from{suffix}.conllu"
        assert predict_main([f"checkpoint={tiny_checkpoint}", f"input={packed}",
                             f"output={unpacked}", "kbest=2"]) == 0
        assert unpacked.read_text(encoding="utf-8") == expected
        broken = tmp_path / f"broken.conllu{suffix}"
        broken.write_bytes(b"not compressed")
        assert predict_main([f"checkpoint={tiny_checkpoint}", f"input={broken}",
                             f"output={tmp_path / 'x.conllu'}"]) == 2
        assert f"input={broken}: not a readable {suffix} file" in capsys.readouterr().err


def test_final_evaluation_writes_and_scores_what_parser_evaluate_does(tiny_checkpoint, dev,
                                                                       tmp_path, capsys):
    model, vocabs, _ = load_parser(tiny_checkpoint)
    report = evaluate_split(model, read_conllu(dev), vocabs, name="dev", out_dir=tmp_path / "run",
                            tokens_per_batch=5000, device="cpu")
    assert evaluate_main([f"checkpoint={tiny_checkpoint}", f"gold={dev}",
                          f"output={tmp_path / 'eval'}"]) == 0
    capsys.readouterr()
    final = (tmp_path / "run" / "dev.pred.conllu").read_text(encoding="utf-8")
    assert (tmp_path / "eval" / "tiny-dev.pred.conllu").read_text(encoding="utf-8") == final
    again = file_report(dev, tmp_path / "eval" / "tiny-dev.pred.conllu")
    assert again["official"] == report["official"]
    # The in-loop scores of the annotator's best trees: those of parse(), as the trainer had them.
    sentences = read_conllu(dev).sentences
    scores = Annotator(model, vocabs, score=True).annotate(sentences).scores
    assert scores == parse(model, sentences, vocabs, tokens_per_batch=5000).scores


def test_bad_options_are_refused_by_name(tiny_checkpoint):
    model, vocabs, _ = load_parser(tiny_checkpoint)
    for options, message in (({"kbest": 2, "samples": 2}, "kbest=2, samples=2"),
                             ({"keep_heads": "all"}, "keep_heads='all'"),
                             ({"tokens_per_batch": 0}, "tokens_per_batch=0"),
                             ({"retag": True}, "retag=true")):
        with pytest.raises(ValueError, match=message):
            Annotator(model, vocabs, **options)
