"""The Python API and the raw-text commands, end to end on the fixtures: a tiny tokenizer, tagger
and parser are trained here (no network, about a minute of CPU), put into one pipeline file, and
raw text goes through it."""

from __future__ import annotations

import gzip
import io
import threading

import conllu
import pytest
from hydra import compose, initialize_config_dir

from parser import Pipeline
from parser.cli.evaluate import main as evaluate_main
from parser.cli.pipeline import build_pipeline
from parser.cli.pipeline import main as pipeline_main
from parser.cli.predict import main as predict_main
from parser.cli.train import train as train_parser
from parser.cli.train_tagger import train as train_tagger
from parser.cli.train_tokenizer import train as train_tokenizer
from parser.data.conllu_io import read_conllu
from parser.tagger.config import register_tagger_configs, tagger_config_dir
from parser.tokenize import read_paragraphs
from parser.tokenize.text import paragraph_text
from tests.tokenize.helpers import FIXTURES, tokenizer_config
from tests.train.helpers import tiny_config

TRAIN = FIXTURES / "tiny-train.conllu"
TEXT = paragraph_text(next(read_paragraphs(TRAIN)))  # the fixture's 32 sentences, one paragraph


def _tagger(run):
    register_tagger_configs()
    with initialize_config_dir(config_dir=str(tagger_config_dir()), version_base="1.3"):
        cfg = compose("tagger", overrides=[
            "data=tiny", "trainer.max_epochs=4", "tagger.word_dim=8", "tagger.char_dim=8",
            "tagger.char_hidden=8", "tagger.char_out=8", "tagger.lstm_hidden=8",
            "tagger.lstm_layers=1"])
    train_tagger(cfg, run_dir=run)
    return run / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    tokenizer_cfg = tokenizer_config("trainer.max_steps=70", "trainer.eval_every=70",
                                     f"data.dev_file={TRAIN}")
    train_tokenizer(tokenizer_cfg, run_dir=root / "tokenizer")
    common = ["trainer.max_steps=30", "trainer.eval_every=30", "trainer.final_eval=false"]
    train_parser(tiny_config(*common, "model.use_upos=false"), run_dir=root / "plain")
    train_parser(tiny_config(*common), run_dir=root / "upos")
    train_parser(tiny_config(*common, "model.tag_loss_weight=1.0", "model.upos_input=predicted"),
                 run_dir=root / "joint")
    return {
        "joint": root / "joint" / "checkpoints" / "best.pt",
        "root": root,
        "tokenizer": root / "tokenizer" / "checkpoints" / "best.pt",
        "plain": root / "plain" / "checkpoints" / "best.pt",
        "upos": root / "upos" / "checkpoints" / "best.pt",
        "tagger": _tagger(root / "tagger"),
    }


@pytest.fixture(scope="module")
def pipeline_file(parts):
    output = parts["root"] / "tiny.pipeline"
    build_pipeline(tokenizer=parts["tokenizer"], parser=parts["upos"], tagger=parts["tagger"],
                   output=output)
    return output


def _forms(sentence: conllu.TokenList) -> list[str]:
    """Surface tokens: a multiword token's range line, not its words."""
    inside: set = set()
    forms = []
    for token in sentence:
        if isinstance(token["id"], tuple) and token["id"][1] == "-":
            inside.update(range(token["id"][0], token["id"][2] + 1))
            forms.append(token["form"])
        elif isinstance(token["id"], int) and token["id"] not in inside:
            forms.append(token["form"])
    return forms


def _check_trees(sentences: list[conllu.TokenList]) -> None:
    for sentence in sentences:
        words = [t for t in sentence if isinstance(t["id"], int)]
        assert words
        for word in words:
            assert isinstance(word["head"], int) and 0 <= word["head"] <= len(words)
            assert word["deprel"] not in (None, "_") and word["upos"] not in (None, "_")
        assert sum(w["head"] == 0 for w in words) >= 1


def test_raw_text_becomes_the_treebank_tokens_sentences_and_trees(pipeline_file):
    nlp = Pipeline.load(pipeline_file)
    parsed = nlp.parse(TEXT)
    gold = read_conllu(TRAIN).sentences
    assert len(parsed) == len(gold) == 32
    for mine, theirs in zip(parsed, gold):
        assert _forms(mine) == _forms(theirs.tokenlist)
        assert [t["form"] for t in mine if isinstance(t["id"], int)] == theirs.forms  # words
    _check_trees(parsed)
    dont = next(s for s in parsed if "don't" in _forms(s))
    assert [t["form"] for t in dont if isinstance(t["id"], int)][1:3] == ["do", "n't"]


def test_a_parser_with_its_own_tags_needs_no_tagger(parts):
    """Joint UPOS (model.upos_input=predicted): the pipeline writes the parser's own tags."""
    output = parts["root"] / "joint.pipeline"
    build_pipeline(tokenizer=parts["tokenizer"], parser=parts["joint"], tagger=None, output=output)
    nlp = Pipeline.load(output)
    assert nlp.tagger is None
    parsed = nlp.parse(TEXT)
    assert len(parsed) == 32
    _check_trees(parsed)  # every word has a UPOS, a head and a relation
    tags = {t["upos"] for sentence in parsed for t in sentence if isinstance(t["id"], int)}
    assert tags <= set(nlp.vocabs.upos.tokens)


def test_pretokenised_sentences_are_parsed_as_given(pipeline_file):
    nlp = Pipeline.load(pipeline_file, batch_size=50)
    parsed = nlp.parse([["The", "dog", "barked", "."], ["I", "do", "n't", "know"]])
    assert [[t["form"] for t in s] for s in parsed] == [["The", "dog", "barked", "."],
                                                       ["I", "do", "n't", "know"]]
    _check_trees(parsed)
    with pytest.raises(ValueError, match="sentence 2"):
        nlp.parse([["fine"], ["two words"]])


def test_confidence_adds_marginals_and_changes_no_tree(pipeline_file):
    words = [["The", "dog", "barked", "."], ["I", "do", "n't", "know"]]
    plain = Pipeline.load(pipeline_file, batch_size=50).parse(words)
    sure = Pipeline.load(pipeline_file, batch_size=50, confidence=True).parse(words)
    for before, after in zip(plain, sure):
        assert [(t["head"], t["deprel"]) for t in before] == [(t["head"], t["deprel"]) for t in after]
        assert all(t["misc"] is None for t in before) and "tree_entropy" not in before.metadata
        head = [float(t["misc"]["HeadProb"]) for t in after]
        assert all(0 <= float(t["misc"]["DeprelProb"]) <= 1 for t in after)
        assert float(after.metadata["expected_correct"]) == pytest.approx(sum(head), abs=3e-4)
        assert float(after.metadata["tree_logprob"]) <= 0 <= float(after.metadata["tree_entropy"])


def test_parse_file_streams_in_chunks(pipeline_file, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text((TEXT + "\n\n") * 3, encoding="utf-8")
    nlp = Pipeline.load(pipeline_file, chunk_sentences=7)
    assert nlp.parse_file(source, tmp_path / "out.conllu") == 96
    written = read_conllu(tmp_path / "out.conllu")  # valid CoNLL-U with a tree per sentence
    assert len(written) == 96 and written.sentences[32].lines[0] == "# newpar"
    assert [s.forms for s in written.sentences[:32]] == [s.forms for s in read_conllu(TRAIN)]


def test_model_card_and_scores_are_written(pipeline_file):
    card = pipeline_file.with_suffix(".md").read_text(encoding="utf-8")
    assert "tokenizer + sentence splitter" in card and "UPOS tagger" in card
    assert "tokens_f1" in card and "Pipeline.load('tiny.pipeline')" in card
    assert Pipeline.load(pipeline_file).meta["scores"]["tokenizer"]["dev"]["tokens_f1"] >= 98


def test_a_parser_that_reads_upos_needs_a_tagger(parts, tmp_path, capsys):
    status = pipeline_main(["build", f"tokenizer={parts['tokenizer']}", f"parser={parts['upos']}",
                            f"output={tmp_path / 'x.pipeline'}"])
    assert status == 2 and "tagger=" in capsys.readouterr().err
    # a parser without UPOS input needs none; UPOS is then left empty
    output = tmp_path / "plain.pipeline"
    assert pipeline_main(["build", f"tokenizer={parts['tokenizer']}", f"parser={parts['plain']}",
                          f"output={output}"]) == 0
    [sentence] = Pipeline.load(output).parse("The dog barked loudly.")
    assert [t["form"] for t in sentence] == ["The", "dog", "barked", "loudly", "."]
    assert all(t["upos"] == "_" for t in sentence) and all(t["head"] is not None for t in sentence)


def test_one_pipeline_per_thread_or_a_lock_gives_the_serial_results(pipeline_file):
    texts = [TEXT, "The dog barked loudly. She gave him a book yesterday.", TEXT[:200]]
    serial = [Pipeline.load(pipeline_file).parse(t) for t in texts]
    results: dict = {}
    shared, lock = Pipeline.load(pipeline_file), threading.Lock()

    def own(i):  # one Pipeline per thread
        results[("own", i)] = Pipeline.load(pipeline_file).parse(texts[i])

    def locked(i):  # a shared Pipeline behind a lock
        with lock:
            results[("lock", i)] = shared.parse(texts[i])

    threads = [threading.Thread(target=f, args=(i,)) for f in (own, locked) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(3):
        assert results[("own", i)] == serial[i] and results[("lock", i)] == serial[i]


def test_predict_refuses_untokenised_text_and_tokenises_with_a_tokenizer(parts, tmp_path, capsys):
    raw = tmp_path / "raw.txt"
    raw.write_text("The dog barked .\nI can't believe it was Tuesday!\n", encoding="utf-8")
    out = tmp_path / "out.conllu"
    status = predict_main([f"checkpoint={parts['plain']}", f"input={raw}", f"output={out}"])
    err = capsys.readouterr().err
    assert status == 2 and f"input={raw}, line 2" in err and "can't" in err
    assert "tokenizer=" in err and not out.exists()
    status = predict_main([f"checkpoint={parts['upos']}", f"tokenizer={parts['tokenizer']}",
                           f"tagger={parts['tagger']}", f"input={raw}", f"output={out}"])
    assert status == 0, capsys.readouterr().err
    parsed = read_conllu(out)
    assert "can't" not in [f for s in parsed for f in s.forms]  # split into words
    assert "Tuesday" in [f for s in parsed for f in s.forms]
    # k-best trees of raw text through separate checkpoints too (refused before issue 40).
    status = predict_main([f"checkpoint={parts['upos']}", f"tokenizer={parts['tokenizer']}",
                           f"tagger={parts['tagger']}", f"input={raw}", f"output={out}", "kbest=2"])
    assert status == 0, capsys.readouterr().err
    assert len(read_conllu(out)) == 2 * len(parsed)


def test_evaluate_scores_raw_text_with_the_official_script(pipeline_file, tmp_path, capsys):
    status = evaluate_main([f"pipeline={pipeline_file}", f"gold={TRAIN}", f"output={tmp_path}"])
    out = capsys.readouterr().out
    assert status == 0
    for row in ("Tokens", "Sentences", "Words", "UPOS", "UAS", "LAS"):
        assert f"{row} " in out
    assert "Tokens 100.00" in out and "Sentences 100.00" in out
    assert (tmp_path / "tiny-train.raw.metrics.json").is_file()


def test_predict_takes_a_pipeline_file_with_every_option_on_raw_text(pipeline_file, tmp_path,
                                                                     capsys, monkeypatch):
    raw = tmp_path / "raw.txt"
    raw.write_text("The dog barked loudly. She gave him a book yesterday.\n", encoding="utf-8")
    nlp = Pipeline.load(pipeline_file)
    for options, kwargs, per_sentence in ((["kbest=3"], {"kbest": 3}, 3),
                                          (["samples=2", "seed=1"], {"samples": 2, "seed": 1}, 2)):
        for given in ([f"checkpoint={pipeline_file}"], [f"pipeline={pipeline_file}"]):
            out = tmp_path / "out.conllu"
            status = predict_main([*given, f"input={raw}", f"output={out}", *options])
            assert status == 0, capsys.readouterr().err
            written = conllu.parse(out.read_text(encoding="utf-8"))
            assert len(written) == 2 * per_sentence
            key = "tree_rank" if "kbest" in kwargs else "sample"
            assert [t.metadata[key] for t in written] == [str(r) for r in range(1, per_sentence + 1)] * 2
            # The API gives the same trees for the same text.
            api = nlp.parse(raw.read_text(encoding="utf-8"), **kwargs)
            assert [[(t["head"], t["deprel"]) for t in s] for s in written] == \
                [[(t["head"], t["deprel"]) for t in s] for s in api]
    # Raw text on standard input, CoNLL-U on standard output, with confidence.
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(raw.read_text(encoding="utf-8")))
    assert predict_main([f"checkpoint={pipeline_file}", "input=-", "output=-",
                         "confidence=true"]) == 0
    captured = capsys.readouterr()
    [first, second] = conllu.parse(captured.out)
    assert "tree_entropy" in first.metadata and "HeadProb" in second[0]["misc"]
    assert "parsed 2 sentences" in captured.err
    # A gzip-compressed raw text file.
    packed = tmp_path / "raw.txt.gz"
    packed.write_bytes(gzip.compress(raw.read_bytes()))
    assert predict_main([f"pipeline={pipeline_file}", f"input={packed}",
                         f"output={tmp_path / 'gz.conllu'}"]) == 0
    assert len(read_conllu(tmp_path / "gz.conllu")) == 2
    # keep_heads= has no heads to keep in raw text; a tagger= beside a pipeline is ambiguous.
    for extra, message in ((["keep_heads=given"], "keep_heads=given"), ([f"tagger={raw}"], "tagger=")):
        assert predict_main([f"pipeline={pipeline_file}", f"input={raw}",
                             f"output={tmp_path / 'x.conllu'}", *extra]) == 2
        assert message in capsys.readouterr().err
