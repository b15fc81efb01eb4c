"""parser-predict and parser-evaluate on a checkpoint trained for a few steps on the fixtures
(with a tiny trained tagger for input without UPOS: the tagging + parsing pipeline), and a smoke
run of the real training entry point on a few hundred EWT sentences."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import conllu
import pytest
import torch

from parser.cli.evaluate import main as evaluate_main
from parser.cli.predict import main as predict_main
from parser.cli.shell import run_key_value_cli
from parser.data.conllu_io import read_conllu, read_tokenized
from parser.eval.validate import validate_conllu
from parser.tagger.predict import load_tagger, tag_sentences, upos_accuracy
from parser.train.loop import Trainer
from tests.tagger.helpers import train_tiny_tagger
from tests.train.helpers import TINY_MODEL, tiny_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    run_dir = tmp_path_factory.mktemp("run")
    Trainer(tiny_config("trainer.max_steps=4", "trainer.eval_every=4"), run_dir=run_dir).fit()
    torch.set_num_threads(previous)
    return run_dir / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def tagger(tmp_path_factory) -> Path:
    return train_tiny_tagger(tmp_path_factory.mktemp("tagger"))


def _columns(path: Path, *, skip=("head", "deprel"), empty_nodes: bool = True) -> list:
    """Every token (words, multiword tokens, and empty nodes unless not ``empty_nodes``) and
    comment, the ``skip`` columns left out."""
    out = []
    for sentence in conllu.parse(path.read_text(encoding="utf-8")):
        out.append(dict(sentence.metadata))
        for token in sentence:
            if empty_nodes or not isinstance(token["id"], tuple) or token["id"][1] != ".":
                out.append({k: v for k, v in token.items() if k not in skip})
    return out


def test_predict_round_trip_keeps_every_other_column(checkpoint, fixtures, tmp_path, capsys):
    source = fixtures / "tiny-dev.conllu"
    output = tmp_path / "parsed.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={output}"]) == 0
    assert "parsed" in capsys.readouterr().out
    # The enhanced graph was built on the input's heads: DEPS cleared and empty nodes dropped,
    # unless keep_deps=true; LEMMA is the model's (a lemma layer: the fixture's XPOS and FEATS
    # are '_', not trained); everything else kept.
    assert any(t["deps"] for s in conllu.parse(source.read_text(encoding="utf-8")) for t in s)
    assert all(t["deps"] is None for s in conllu.parse(output.read_text(encoding="utf-8"))
               for t in s)
    skip = ("head", "deprel", "deps", "lemma")
    assert _columns(output, skip=skip) == _columns(source, skip=skip, empty_nodes=False)
    kept = tmp_path / "kept.conllu"  # keep_columns=given: the input's lemmas too
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={kept}",
                         "keep_deps=true", "keep_columns=given", "chunk_size=3"]) == 0
    assert _columns(kept) == _columns(source)
    # chunk by chunk (3 sentences at a time): the same trees, in input order
    assert _columns(kept, skip=("deps", "lemma"), empty_nodes=False) == _columns(
        output, skip=("deps", "lemma"))
    for sentence in conllu.parse(output.read_text(encoding="utf-8")):
        words = [t for t in sentence if isinstance(t["id"], int)]
        heads = [t["head"] for t in words]
        assert sum(h == 0 for h in heads) == 1 and all(0 <= h <= len(words) for h in heads)
        assert all(t["deprel"] not in (None, "_", "<pad>", "<unk>", "<root>") for t in words)
    assert validate_conllu(output, level=2) == []


def test_predict_tokenised_text_is_tagged_then_parsed(checkpoint, tagger, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("The dog barks .\nA much longer sentence than any word seen before here .\n")
    output = tmp_path / "parsed.conllu"
    argv = [f"checkpoint={checkpoint}", f"input={source}", f"output={output}", f"tagger={tagger}"]
    assert predict_main(argv) == 0
    sentences = conllu.parse(output.read_text(encoding="utf-8"))
    assert [len(s) for s in sentences] == [4, 11]
    assert [t["form"] for t in sentences[0]] == ["The", "dog", "barks", "."]
    assert all(isinstance(t["head"], int) for s in sentences for t in s)
    # the UPOS column holds exactly the tagger's Viterbi tags of the words
    expected = tag_sentences(load_tagger(tagger), read_tokenized(source).sentences)
    assert [[t["upos"] for t in s] for s in sentences] == expected
    assert validate_conllu(output, level=2) == []
    # the parse is the one the parser gives CoNLL-U input carrying those tags
    tagged_input = tmp_path / "tagged.conllu"
    tagged_input.write_text(output.read_text(encoding="utf-8"), encoding="utf-8")
    again = tmp_path / "again.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={tagged_input}", f"output={again}"]) == 0
    assert again.read_text(encoding="utf-8") == output.read_text(encoding="utf-8")


def _blank_upos(source: Path, target: Path, *, words: set[int] | None = None) -> Path:
    """``source`` with the UPOS of its words (all, or the 1-based file ``words`` of each
    sentence) set to ``_``; multiword tokens and empty nodes untouched."""
    lines = source.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        cols = line.split("\t")
        if len(cols) == 10 and cols[0].isdigit() and (words is None or int(cols[0]) in words):
            cols[3] = "_"
            lines[i] = "\t".join(cols)
    target.write_text("\n".join(lines), encoding="utf-8")
    return target


def _upos(path: Path) -> list[list[str | None]]:
    return [sentence.upos for sentence in read_conllu(path).sentences]


def test_predict_conllu_without_upos(checkpoint, tagger, fixtures, tmp_path):
    gold = fixtures / "tiny-dev.conllu"
    source = _blank_upos(gold, tmp_path / "no-upos.conllu")
    output = tmp_path / "parsed.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={output}",
                         f"tagger={tagger}"]) == 0
    assert validate_conllu(output, level=2) == []
    trained = load_tagger(tagger)
    assert _upos(output) == tag_sentences(trained, read_conllu(gold).sentences)
    # every column but UPOS, HEAD, DEPREL, LEMMA (the model's lemma layer) and the enhanced
    # graph is the input's (multiword tokens too)
    skip = ("upos", "head", "deprel", "deps", "lemma")
    assert _columns(output, skip=skip) == _columns(source, skip=skip, empty_nodes=False)


def test_predict_retag_and_partial_upos(checkpoint, tagger, fixtures, tmp_path):
    gold = fixtures / "tiny-dev.conllu"
    predicted = tag_sentences(load_tagger(tagger), read_conllu(gold).sentences)
    gold_upos = _upos(gold)
    assert predicted != gold_upos  # else the checks below could not tell the sources apart
    retagged = tmp_path / "retagged.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={gold}", f"output={retagged}",
                         f"tagger={tagger}", "retag=true"]) == 0
    assert _upos(retagged) == predicted
    kept = tmp_path / "kept.conllu"  # complete tags and no retag: the tagger is not used
    assert predict_main([f"checkpoint={checkpoint}", f"input={gold}", f"output={kept}",
                         f"tagger={tagger}"]) == 0
    assert _upos(kept) == gold_upos
    partial = _blank_upos(gold, tmp_path / "partial.conllu", words={2})
    filled = tmp_path / "filled.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={partial}", f"output={filled}",
                         f"tagger={tagger}"]) == 0
    assert _upos(filled) == [[p if word == 1 else g for word, (g, p) in enumerate(zip(gs, ps))]
                             for gs, ps in zip(gold_upos, predicted)]


def test_predict_without_tags_needs_a_tagger(checkpoint, fixtures, tmp_path, capsys):
    text = tmp_path / "input.txt"
    text.write_text("The dog barks .\n")
    no_upos = _blank_upos(fixtures / "tiny-dev.conllu", tmp_path / "no-upos.conllu")
    for source in (text, no_upos):
        output = tmp_path / "out.conllu"
        assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={output}"]) == 2
        err = capsys.readouterr().err
        assert f"input={source}: has no UPOS tags" in err and "pass tagger=" in err
        assert not output.exists()
    assert predict_main([f"checkpoint={checkpoint}", f"input={text}", f"output={tmp_path / 'o'}",
                         "retag=true"]) == 2
    assert "retag=true: give the tagger" in capsys.readouterr().err
    assert predict_main([f"checkpoint={checkpoint}", f"input={text}", f"output={tmp_path / 'o'}",
                         "tagger=/nope.pt"]) == 2
    assert "tagger=/nope.pt: no such file" in capsys.readouterr().err
    assert predict_main([f"checkpoint={checkpoint}", f"input={text}", f"output={tmp_path / 'o'}",
                         "retag=maybe"]) == 2
    assert "retag=maybe: expected true or false" in capsys.readouterr().err
    # a parser checkpoint is no tagger
    assert predict_main([f"checkpoint={checkpoint}", f"input={text}", f"output={tmp_path / 'o'}",
                         f"tagger={checkpoint}"]) == 2
    assert "not a UPOS tagger" in capsys.readouterr().err


def test_a_parser_without_upos_input_needs_no_tags(tmp_path):
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    run_dir = tmp_path / "run"
    Trainer(tiny_config("trainer.max_steps=1", "trainer.eval_every=1", "trainer.final_eval=false",
                        "model.use_upos=false"), run_dir=run_dir).fit()
    torch.set_num_threads(previous)
    source = tmp_path / "input.txt"
    source.write_text("The dog barks .\n")
    output = tmp_path / "out.conllu"
    assert predict_main([f"checkpoint={run_dir / 'checkpoints' / 'best.pt'}", f"input={source}",
                         f"output={output}"]) == 0
    words = conllu.parse(output.read_text(encoding="utf-8"))[0]
    assert [t["upos"] for t in words] == ["_"] * 4 and all(isinstance(t["head"], int) for t in words)


def test_predict_errors_name_the_problem(checkpoint, tmp_path, capsys):
    assert predict_main([f"checkpoint={checkpoint}", "input=/nonexistent.conllu", f"output={tmp_path / 'o'}"]) == 2
    assert "input=/nonexistent.conllu: no such file" in capsys.readouterr().err
    assert predict_main(["checkpoint=x", "inptu=y"]) == 2
    assert "unknown option 'inptu'" in capsys.readouterr().err
    assert predict_main([f"input={tmp_path}"]) == 2
    assert "missing output=..." in capsys.readouterr().err
    assert predict_main([f"input={tmp_path}", f"output={tmp_path / 'o'}"]) == 2
    assert "give checkpoint=<parser best.pt> or pipeline=<file>" in capsys.readouterr().err


def test_key_value_cli_shell(capsys):
    calls = []

    def command(args):
        calls.append(args)
        if args["x"] == "missing-file":
            raise FileNotFoundError("x=missing-file: no such file")
        return f"got {args['x']} {args['y']}"

    def run(argv):
        return run_key_value_cli(
            argv, prog="tool", doc="usage text", defaults={"x": None, "y": "1"}, required=("x",),
            command=command,
        )

    assert run(["x=a", "--help"]) == 0 and calls == []
    assert capsys.readouterr().out == "usage text\n"
    assert run(["y=2"]) == 2 and calls == []
    assert capsys.readouterr().err == "tool: error: missing x=...\n"
    assert run(["x=a", "y=null"]) == 0 and calls == [{"x": "a", "y": None}]
    assert capsys.readouterr().out == "got a None\n"
    assert run(["x=missing-file"]) == 2
    assert capsys.readouterr().err == "tool: error: x=missing-file: no such file\n"


def test_evaluate_gold_against_itself_and_a_corrupted_copy(fixtures, tmp_path, capsys):
    gold = fixtures / "tiny-dev.conllu"
    assert evaluate_main([f"gold={gold}", f"pred={gold}", f"metrics={tmp_path / 'self.json'}"]) == 0
    assert "official: UAS 100.00  LAS 100.00" in capsys.readouterr().out
    # Corrupt one relation: LAS drops by exactly one word in the file's word count.
    lines = gold.read_text(encoding="utf-8").split("\n")
    index = next(i for i, line in enumerate(lines) if line.startswith("2\tcat\t"))
    cols = lines[index].split("\t")
    cols[7] = "obj"
    lines[index] = "\t".join(cols)
    pred = tmp_path / "pred.conllu"
    pred.write_text("\n".join(lines), encoding="utf-8")
    assert evaluate_main([f"gold={gold}", f"pred={pred}"]) == 0
    assert "metrics: not written" in capsys.readouterr().out
    assert not (tmp_path / "pred.metrics.json").exists()  # scoring a file writes nothing unasked
    assert evaluate_main([f"gold={gold}", f"pred={pred}", "metrics=beside"]) == 0
    metrics = json.loads((tmp_path / "pred.metrics.json").read_text())
    n_words = metrics["n_words"]
    assert metrics["official"]["UAS"] == pytest.approx(100.0)
    assert metrics["official"]["LAS"] == pytest.approx(100.0 * (n_words - 1) / n_words)
    assert metrics["las"] == pytest.approx(metrics["official"]["LAS"])


def test_evaluate_a_checkpoint_on_a_gold_file(checkpoint, fixtures, tmp_path, capsys):
    gold = fixtures / "tiny-dev.conllu"
    assert evaluate_main([f"checkpoint={checkpoint}", f"gold={gold}", f"output={tmp_path}"]) == 0
    assert "official: UAS" in capsys.readouterr().out
    assert (tmp_path / "tiny-dev.pred.conllu").is_file()
    assert (tmp_path / "tiny-dev.pred.metrics.json").is_file()
    assert evaluate_main(["gold=/nope.conllu", "pred=/nope2.conllu"]) == 2
    assert "gold=/nope.conllu: no such file" in capsys.readouterr().err


def test_evaluate_writes_beside_the_checkpoints_never_into_them(checkpoint, fixtures, tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    best = run / "checkpoints" / "best.pt"
    shutil.copyfile(checkpoint, best)
    final = run / "tiny-dev.pred.metrics.json"  # as the trainer's final evaluation writes it
    final.write_text(json.dumps({"split": "dev", "las": 1.0}), encoding="utf-8")
    gold = fixtures / "tiny-dev.conllu"
    assert evaluate_main([f"checkpoint={best}", f"gold={gold}"]) == 0
    assert f"metrics: {run / 'eval' / 'tiny-dev.pred.metrics.json'}" in capsys.readouterr().out
    assert (run / "eval" / "tiny-dev.pred.conllu").is_file()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.pt"]
    assert json.loads(final.read_text()) == {"split": "dev", "las": 1.0}
    # Asked to write into checkpoints/, or over the final evaluation's metrics: refused, unchanged.
    assert evaluate_main([f"checkpoint={best}", f"gold={gold}", f"output={run / 'checkpoints'}"]) == 2
    assert "checkpoints/ folder holds checkpoints only" in capsys.readouterr().err
    pred = run / "eval" / "tiny-dev.pred.conllu"
    assert evaluate_main([f"gold={gold}", f"pred={pred}", f"metrics={final}"]) == 2
    assert "metrics of the run's final evaluation" in capsys.readouterr().err
    assert json.loads(final.read_text()) == {"split": "dev", "las": 1.0}
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.pt"]
    # A file parser-evaluate wrote itself may be replaced (a re-run).
    assert evaluate_main([f"checkpoint={best}", f"gold={gold}"]) == 0


def test_evaluate_with_predicted_upos(checkpoint, tagger, fixtures, tmp_path, capsys):
    gold = fixtures / "tiny-dev.conllu"
    assert evaluate_main([f"checkpoint={checkpoint}", f"gold={gold}", f"output={tmp_path}",
                          f"tagger={tagger}"]) == 0
    out = capsys.readouterr().out
    pred = tmp_path / "tiny-dev.tagged.pred.conllu"
    metrics = json.loads((tmp_path / "tiny-dev.tagged.pred.metrics.json").read_text())
    accuracy = upos_accuracy(load_tagger(tagger), read_conllu(gold).sentences)
    # the official UPOS score of the tagged predictions is the tagger's accuracy on the gold words
    assert metrics["official"]["UPOS"] == pytest.approx(100.0 * accuracy["accuracy"])
    assert accuracy["total"] == metrics["n_words"] and metrics["tagger"] == str(tagger)
    assert f"UPOS {100.0 * accuracy['accuracy']:.2f} (predicted by {tagger})" in out
    assert _upos(pred) == tag_sentences(load_tagger(tagger), read_conllu(gold).sentences)
    assert not (tmp_path / "tiny-dev.pred.conllu").exists()  # a gold-UPOS run's file is untouched
    assert evaluate_main([f"gold={gold}", f"pred={pred}", f"tagger={tagger}"]) == 2
    assert "tagger= tags the input of a checkpoint" in capsys.readouterr().err


def _first_sentences(source: Path, count: int, target: Path) -> Path:
    blocks = source.read_text(encoding="utf-8").split("\n\n")[:count]
    target.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return target


def test_training_entry_point_on_real_ewt(ud_root, tmp_path):
    ewt = ud_root / "en_ewt"
    dev = _first_sentences(ewt / "en_ewt-ud-dev.conllu", 60, tmp_path / "dev.conllu")
    test = _first_sentences(ewt / "en_ewt-ud-test.conllu", 60, tmp_path / "test.conllu")
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "parser.cli.train", "experiment=quickstart", f"data.root={ud_root}",
        "data.max_train_sentences=300", f"data.dev_file={dev}", f"data.test_file={test}",
        *TINY_MODEL, "trainer.max_steps=12", "trainer.eval_every=6", "trainer.num_threads=1",
        "trainer.progress=false", f"hydra.run.dir={run_dir}",
    ]
    done = subprocess.run(command, cwd=REPO, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dev: UAS" in done.stdout and "test: UAS" in done.stdout
    metrics = json.loads((run_dir / "test.pred.metrics.json").read_text())
    assert metrics["n_sentences"] == 60 and 0.0 < metrics["official"]["UAS"] <= 100.0
    assert list((run_dir / "tb").glob("events.out.tfevents.*"))
    assert (run_dir / "checkpoints" / "best.pt").is_file()


def test_training_entry_point_rejects_a_typo(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "parser.cli.train", "data=tiny", "trainer.max_stpes=3", f"hydra.run.dir={tmp_path}"],
        cwd=REPO, check=False, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode != 0 and "max_stpes" in done.stderr


def test_training_entry_point_rejects_a_key_forced_in_with_plus(tmp_path):
    """Hydra's ``+`` adds any key to a typed config; parser-train refuses it before training."""
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "parser.cli.train", "data=tiny", "+trainer.max_step=10",
         f"hydra.run.dir={run_dir}"],
        cwd=REPO, check=False, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "trainer.max_step" in done.stderr and "max_steps" in done.stderr
    assert not (run_dir / "checkpoints").exists()
