"""parser-predict and parser-evaluate on a checkpoint trained for a few steps on the fixtures,
and a smoke run of the real training entry point on a few hundred EWT sentences."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import conllu
import pytest
import torch

from parser.eval.cli import main as evaluate_main
from parser.eval.validate import validate_conllu
from parser.predict import main as predict_main
from parser.train.cli_args import run_key_value_cli
from parser.train.loop import Trainer
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


def _columns(path: Path) -> list:
    """Every token (words, multiword tokens, empty nodes) and comment, HEAD/DEPREL left out."""
    out = []
    for sentence in conllu.parse(path.read_text(encoding="utf-8")):
        out.append(dict(sentence.metadata))
        for token in sentence:
            out.append({k: v for k, v in token.items() if k not in ("head", "deprel")})
    return out


def test_predict_round_trip_keeps_every_other_column(checkpoint, fixtures, tmp_path, capsys):
    source = fixtures / "tiny-dev.conllu"
    output = tmp_path / "parsed.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={output}"]) == 0
    assert "parsed" in capsys.readouterr().out
    assert _columns(output) == _columns(source)
    for sentence in conllu.parse(output.read_text(encoding="utf-8")):
        words = [t for t in sentence if isinstance(t["id"], int)]
        heads = [t["head"] for t in words]
        assert sum(h == 0 for h in heads) == 1 and all(0 <= h <= len(words) for h in heads)
        assert all(t["deprel"] not in (None, "_", "<pad>", "<unk>", "<root>") for t in words)
    assert validate_conllu(output, level=2) == []


def test_predict_tokenised_text(checkpoint, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("The dog barks .\nA much longer sentence than any word seen before here .\n")
    output = tmp_path / "parsed.conllu"
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={output}"]) == 0
    sentences = conllu.parse(output.read_text(encoding="utf-8"))
    assert [len(s) for s in sentences] == [4, 11]
    assert [t["form"] for t in sentences[0]] == ["The", "dog", "barks", "."]
    assert all(isinstance(t["head"], int) for s in sentences for t in s)


def test_predict_errors_name_the_problem(checkpoint, tmp_path, capsys):
    assert predict_main([f"checkpoint={checkpoint}", "input=/nonexistent.conllu", f"output={tmp_path / 'o'}"]) == 2
    assert "input=/nonexistent.conllu: no such file" in capsys.readouterr().err
    assert predict_main(["checkpoint=x", "inptu=y"]) == 2
    assert "unknown option 'inptu'" in capsys.readouterr().err
    assert predict_main([f"input={tmp_path}"]) == 2
    assert "missing checkpoint=..., output=..." in capsys.readouterr().err


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
        sys.executable, "-m", "parser.train", "experiment=quickstart", f"data.root={ud_root}",
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
        [sys.executable, "-m", "parser.train", "data=tiny", "trainer.max_stpes=3", f"hydra.run.dir={tmp_path}"],
        cwd=REPO, check=False, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode != 0 and "max_stpes" in done.stderr
