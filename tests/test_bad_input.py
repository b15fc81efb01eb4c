"""Bad input through the real entry points (``parser-train``, ``parser-predict``,
``parser-evaluate`` called in process with their argv): each case fails with ``<prog>: error:``
naming the file, line or option and the problem, exit status 2 and no traceback; or, where the
input is usable, goes on with a logged count. Nothing written before is lost."""

from __future__ import annotations

import logging
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import conllu
import pytest
import torch

from parser.cli.evaluate import main as evaluate_main
from parser.cli.predict import main as predict_main
from parser.cli.train import main as train_main
from tests.tagger.helpers import train_tiny_tagger
from tests.train.helpers import QUIET, TINY_DATA, TINY_MODEL

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOOD = FIXTURES / "tiny-dev.conllu"

# Each malformed fixture: the line the reader names and the words of its problem.
MALFORMED = {
    "bad-bom.conllu": (1, "byte-order mark (BOM)"),
    "bad-columns.conllu": (12, "expected 10 tab-separated columns, found 9"),
    "bad-crlf.conllu": (1, "CRLF line ending"),
    "bad-cycle.conllu": (12, "cycle in HEAD: 3 -> 4 -> 3"),
    "bad-empty-sentence.conllu": (8, "empty sentence"),
    "bad-head-nonint.conllu": (12, "HEAD 'x' is not a non-negative integer"),
    "bad-head-range.conllu": (12, "HEAD 12 out of range"),
    "bad-mixed.conllu": (12, "HEAD 3 is a self-loop"),
    "bad-no-final-blank.conllu": (14, "missing blank line after the last sentence"),
    "bad-no-root.conllu": (8, "no root"),
    "bad-self-loop.conllu": (13, "HEAD 4 is a self-loop"),
    "bad-several-roots.conllu": (13, "several roots: words 2, 4 have HEAD 0"),
    "bad-word-ids.conllu": (12, "word id '4' where 3 expected"),
}
MAX_LENGTH = 7  # the trained fixture skips the 17 of 32 training sentences longer than this


@contextmanager
def _restored_logging():
    """Hydra configures the root logger for each run; put the test's handlers back after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture(autouse=True)
def _one_thread_and_logging():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    with _restored_logging():
        yield
    torch.set_num_threads(previous)


def _train_argv(run_dir: Path, *overrides: str) -> list[str]:
    return [*TINY_DATA, *TINY_MODEL, *QUIET, "trainer.max_steps=2", "trainer.eval_every=2",
            "trainer.final_eval=false", f"hydra.run.dir={run_dir}", *overrides]


def _fails(capsys, status: int, main, argv: list[str], prog: str, *expected: str) -> str:
    """Run ``main(argv)``; assert its status, ``<prog>: error:`` and each of ``expected`` in
    stderr, and no traceback anywhere. Returns stderr."""
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert f"{prog}: error: " in err, err
    for text in expected:
        assert text in err, (text, err)
    assert "Traceback" not in out + err
    return err


def train_fails(capsys, tmp_path, *overrides: str, expected=()) -> str:
    return _fails(capsys, 2, train_main, _train_argv(tmp_path / "run", *overrides), "parser-train", *expected)


def predict_fails(capsys, *args: str, expected=()) -> str:
    return _fails(capsys, 2, predict_main, list(args), "parser-predict", *expected)


def evaluate_fails(capsys, *args: str, expected=()) -> str:
    return _fails(capsys, 2, evaluate_main, list(args), "parser-evaluate", *expected)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A run of ``parser-train`` (2 steps, ``data.max_length=7``); its run directory."""
    run_dir = tmp_path_factory.mktemp("trained")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    with _restored_logging():
        status = train_main(_train_argv(run_dir, f"data.max_length={MAX_LENGTH}"))
    torch.set_num_threads(previous)
    assert status == 0
    return run_dir


@pytest.fixture(scope="module")
def tagger(tmp_path_factory) -> Path:
    """A tiny trained UPOS tagger (text input has no tags; the parser reads UPOS)."""
    return train_tiny_tagger(tmp_path_factory.mktemp("tagger"), epochs=1)


# -- malformed CoNLL-U ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_training_file(name, capsys, tmp_path):
    line, problem = MALFORMED[name]
    train_fails(capsys, tmp_path, f"data.train_file={FIXTURES / name}",
                expected=[f"{FIXTURES / name}:{line}: ", problem])


@pytest.mark.parametrize("option", ["dev_file", "test_file", "unlabeled_file"])
def test_malformed_dev_test_and_unlabeled_files(option, capsys, tmp_path):
    bad = FIXTURES / "bad-columns.conllu"
    train_fails(capsys, tmp_path, f"data.{option}={bad}", expected=[f"{bad}:12: expected 10"])


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_input_to_predict(name, trained, capsys, tmp_path):
    line, problem = MALFORMED[name]
    predict_fails(capsys, f"checkpoint={trained / 'checkpoints' / 'best.pt'}",
                  f"input={FIXTURES / name}", f"output={tmp_path / 'out.conllu'}",
                  expected=[f"{FIXTURES / name}:{line}: ", problem])
    assert not list(tmp_path.iterdir())  # no output, not even half of one


@pytest.mark.parametrize("role", ["gold", "pred"])
@pytest.mark.parametrize("name", ["bad-cycle.conllu", "bad-crlf.conllu", "bad-several-roots.conllu"])
def test_malformed_files_to_evaluate(role, name, capsys, tmp_path):
    line, problem = MALFORMED[name]
    files = {"gold": GOOD, "pred": GOOD, role: FIXTURES / name}
    evaluate_fails(capsys, f"gold={files['gold']}", f"pred={files['pred']}",
                   f"metrics={tmp_path / 'm.json'}", expected=[f"{FIXTURES / name}:{line}: ", problem])
    assert not (tmp_path / "m.json").exists()


# -- configs and names ------------------------------------------------------------------------------

@pytest.mark.parametrize("override, expected", [
    ("trainer.max_stepz=3", ["unknown option 'trainer.max_stepz'; did you mean 'trainer.max_steps'?\noptions:"]),
    ("data=xx_none", ["Could not find 'data/xx_none'", "tiny"]),
    ("optim.name=adamm", ["optim.name=adamm", "Invalid value 'adamm', expected one of [adam, adamw]"]),
    ("trainer.max_steps=many", ["Value 'many' of type 'str' could not be converted to Integer"]),
])
def test_unknown_config_keys_and_values_fail_at_composition(override, expected, capsys, tmp_path):
    train_fails(capsys, tmp_path, override, expected=expected)
    assert not (tmp_path / "run").exists()  # nothing started


def test_unknown_options_of_predict_and_evaluate(capsys):
    predict_fails(capsys, "checkpoint=a.pt", "inptu=x",
                  expected=["unknown option 'inptu'; did you mean 'input'?\noptions: checkpoint"])
    evaluate_fails(capsys, "gld=x", expected=["unknown option 'gld'; did you mean 'gold'?\noptions: gold, pred"])


def test_unknown_treebank(capsys, tmp_path):
    nulls = ["data.train_file=null", "data.dev_file=null", "data.test_file=null"]
    train_fails(capsys, tmp_path, "data.treebank=xx_none", f"data.root={tmp_path}", *nulls,
                expected=["unknown treebank 'xx_none' under", "UD_<Language>-<Name>/xx_none-ud-<split>"])
    evaluate_fails(capsys, f"checkpoint={tmp_path / 'a.pt'}", "treebank=xx_none", f"root={tmp_path}",
                   expected=["unknown treebank 'xx_none'"])
    (tmp_path / "fi_tdt").mkdir()
    (tmp_path / "fi_tdt" / "fi_tdt-ud-test.conllu").write_text(GOOD.read_text())
    train_fails(capsys, tmp_path, "data.treebank=fi_tdt", f"data.root={tmp_path}", *nulls[:1],
                "data.train_split=train", expected=["fi_tdt has no 'train' split", "(available: test)"])


# -- missing files, directories, empty files --------------------------------------------------------

@pytest.mark.parametrize("override, expected", [
    ("data.train_file=/nope/train.conllu", "data.train_file=/nope/train.conllu: no such file"),
    ("data.dev_file=/nope/dev.conllu", "data.dev_file=/nope/dev.conllu: no such file"),
    ("data.test_file=/nope/test.conllu", "data.test_file=/nope/test.conllu: no such file"),
    ("data.unlabeled_file=/nope/more.txt", "data.unlabeled_file=/nope/more.txt: no such file"),
    ("trainer.resume=/nope/step.pt", "trainer.resume: checkpoint /nope/step.pt: no such file"),
    ("+objective.terms.kl.checkpoint=/nope/teacher.pt",
     "objective.terms.kl.checkpoint: checkpoint /nope/teacher.pt: no such file"),
])
def test_missing_files_in_training(override, expected, capsys, tmp_path):
    train_fails(capsys, tmp_path, override, expected=[expected])


def test_missing_files_of_predict_and_evaluate(trained, capsys, tmp_path):
    best, out = trained / "checkpoints" / "best.pt", tmp_path / "out.conllu"
    predict_fails(capsys, "checkpoint=/nope.pt", f"input={GOOD}", f"output={out}",
                  expected=["checkpoint /nope.pt: no such file"])
    predict_fails(capsys, f"checkpoint={best}", "input=/nope.conllu", f"output={out}",
                  expected=["input=/nope.conllu: no such file"])
    evaluate_fails(capsys, "gold=/nope.conllu", f"pred={GOOD}", expected=["gold=/nope.conllu: no such file"])
    evaluate_fails(capsys, f"gold={GOOD}", "pred=/nope.conllu", expected=["pred=/nope.conllu: no such file"])
    evaluate_fails(capsys, "checkpoint=/nope.pt", f"gold={GOOD}", f"output={tmp_path}",
                   expected=["checkpoint /nope.pt: no such file"])


@pytest.mark.parametrize("name, text", [("empty.txt", ""), ("blank.txt", "\n\n"), ("empty.conllu", "")])
def test_empty_unlabeled_file(name, text, capsys, tmp_path):
    empty = tmp_path / name
    empty.write_text(text)
    train_fails(capsys, tmp_path, f"data.unlabeled_file={empty}",
                expected=[f"{empty}:1: no sentences: the file is empty"])


def test_a_directory_where_a_file_is_expected(trained, capsys, tmp_path):
    for option in ("train_file", "unlabeled_file"):
        train_fails(capsys, tmp_path, f"data.{option}={tmp_path}",
                    expected=[f"data.{option}={tmp_path}: is a directory, not a file"])
    best, out = trained / "checkpoints" / "best.pt", tmp_path / "out.conllu"
    predict_fails(capsys, f"checkpoint={best}", f"input={tmp_path}", f"output={out}",
                  expected=[f"input={tmp_path}: is a directory, not a file"])
    predict_fails(capsys, f"checkpoint={best.parent}", f"input={GOOD}", f"output={out}",
                  expected=[f"checkpoint {best.parent}: is a directory, not a checkpoint file"])
    evaluate_fails(capsys, f"gold={tmp_path}", f"pred={GOOD}", expected=[f"gold={tmp_path}: is a directory"])


def test_a_file_that_is_not_a_checkpoint(capsys, tmp_path):
    predict_fails(capsys, f"checkpoint={GOOD}", f"input={GOOD}", f"output={tmp_path / 'o.conllu'}",
                  expected=[f"checkpoint {GOOD} (", "or not a checkpoint, and was refused: UnpicklingError"])


def test_bad_tagger_files_fail_before_any_output(trained, tagger, capsys, tmp_path):
    best, out = trained / "checkpoints" / "best.pt", tmp_path / "out.conllu"
    text = tmp_path / "input.txt"
    text.write_text("The dog barks .\n")
    predict_fails(capsys, f"checkpoint={best}", f"input={text}", f"output={out}", f"tagger={tmp_path}",
                  expected=[f"tagger={tmp_path}: is a directory, not a file"])
    predict_fails(capsys, f"checkpoint={best}", f"input={text}", f"output={out}", f"tagger={GOOD}",
                  expected=[f"checkpoint {GOOD} (", "not a checkpoint"])
    predict_fails(capsys, f"checkpoint={best}", f"input={text}", f"output={out}", f"tagger={best}",
                  expected=[f"checkpoint {best}: kind None, not a UPOS tagger"])
    predict_fails(capsys, f"checkpoint={best}", f"input={text}", f"output={tagger}",
                  f"tagger={tagger}", expected=[f"output={tagger}: is also the input file"])
    evaluate_fails(capsys, f"checkpoint={best}", f"gold={GOOD}", f"output={tmp_path}",
                   "tagger=/nope.pt", expected=["tagger=/nope.pt: no such file"])
    assert not out.exists() and not list(tmp_path.glob("*.pred.conllu"))


# -- sentence length and unknown words ------------------------------------------------------------

def test_long_sentences_are_skipped_in_training_with_a_count(trained):
    log = (trained / "train.log").read_text()
    assert f"skipped 17 of 32 sentences longer than max_length={MAX_LENGTH}" in log


def test_long_sentences_are_never_dropped_when_predicting(trained, tagger, capsys, tmp_path):
    source = tmp_path / "long.txt"
    long_sentence = " ".join(["the", "dog"] * 30) + " ."
    source.write_text(f"The dog barks .\n{long_sentence}\n")
    for name, path in (("text", source), ("conllu", GOOD)):
        out = tmp_path / f"{name}.out.conllu"
        assert predict_main([f"checkpoint={trained / 'checkpoints' / 'best.pt'}", f"input={path}",
                             f"output={out}", f"tagger={tagger}"]) == 0
        got = [_words(s) for s in conllu.parse(out.read_text(encoding="utf-8"))]
        want = [4, 61] if name == "text" else [len(_words(s)) for s in conllu.parse(GOOD.read_text())]
        assert [len(words) for words in got] == want  # tiny-dev: 5 sentences longer than 7 words
        assert all(isinstance(t["head"], int) for words in got for t in words)


def _words(sentence) -> list:
    return [token for token in sentence if isinstance(token["id"], int)]


def test_all_training_sentences_too_long(capsys, tmp_path):
    train_fails(capsys, tmp_path, "data.max_length=4", expected=[
        "data.max_length=4: all 32 labeled training sentences are longer (shortest: 5 words)"])


def test_unknown_words_are_counted_and_logged(trained, tagger, caplog, tmp_path):
    # "the" and "." are training words (data=tiny keeps every form); the other three are not.
    source = tmp_path / "unseen.txt"
    source.write_text("the zorblax qwimp .\nfrobnicate .\n")
    with caplog.at_level(logging.INFO, logger="parser.inference.parse"):
        assert predict_main([f"checkpoint={trained / 'checkpoints' / 'best.pt'}", f"input={source}",
                             f"output={tmp_path / 'out.conllu'}", f"tagger={tagger}"]) == 0
    assert f"{source}: 3 of 6 words (50.0%) are unknown to the model's vocabulary" in caplog.text
    log = (trained / "train.log").read_text()
    assert f"{GOOD}: " in log and "are unknown to the model's vocabulary" in log  # dev and test


# -- outputs: where they go, and nothing lost -------------------------------------------------------

def test_outputs_in_a_missing_folder_are_created(trained, tmp_path):
    out = tmp_path / "new" / "folder" / "out.conllu"
    assert predict_main([f"checkpoint={trained / 'checkpoints' / 'best.pt'}", f"input={GOOD}",
                         f"output={out}"]) == 0
    assert len(conllu.parse(out.read_text(encoding="utf-8"))) == 12
    metrics = tmp_path / "more" / "m.json"
    assert evaluate_main([f"gold={GOOD}", f"pred={out}", f"metrics={metrics}"]) == 0
    assert metrics.is_file()


def test_outputs_that_cannot_be_written_fail_before_any_work(trained, capsys, tmp_path):
    best = trained / "checkpoints" / "best.pt"
    copy = tmp_path / "input.conllu"
    copy.write_text(GOOD.read_text())
    predict_fails(capsys, f"checkpoint={best}", f"input={GOOD}", f"output={tmp_path}",
                  expected=[f"output={tmp_path}: is a directory; give a file path"])
    predict_fails(capsys, f"checkpoint={best}", f"input={GOOD}", f"output={copy}/out.conllu",
                  expected=[f"cannot create the folder {copy}: {copy} is not a folder"])
    predict_fails(capsys, f"checkpoint={best}", f"input={copy}", f"output={copy}",
                  expected=[f"output={copy}: is also the input file"])
    evaluate_fails(capsys, f"gold={GOOD}", f"pred={copy}", f"metrics={copy}",
                   expected=[f"metrics={copy}: is also the input file"])
    assert copy.read_text() == GOOD.read_text()  # the input was not overwritten


def test_a_failed_prediction_leaves_the_previous_output_intact(trained, capsys, tmp_path):
    out = tmp_path / "out.conllu"
    out.write_text("earlier predictions\n")
    predict_fails(capsys, f"checkpoint={trained / 'checkpoints' / 'best.pt'}",
                  f"input={FIXTURES / 'bad-cycle.conllu'}", f"output={out}", expected=["cycle in HEAD"])
    assert out.read_text() == "earlier predictions\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.conllu"]  # no temporary file left


def test_another_runs_checkpoints_are_not_overwritten(trained, capsys, tmp_path):
    directory = trained / "checkpoints"
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    train_fails(capsys, tmp_path, f"trainer.checkpoint_dir={directory}", expected=[
        f"trainer.checkpoint_dir={directory}: already holds checkpoints", "trainer.resume=last"])
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    train_fails(capsys, tmp_path, f"trainer.checkpoint_dir={GOOD}/checkpoints",
                expected=[f"cannot create the folder {GOOD}/checkpoints: {GOOD} is not a folder"])


@pytest.mark.parametrize("lr, expected", [
    ("1e30", "training stopped at step 3: 3 steps in a row had non-finite scores"),  # overflow
    ("inf", "training stopped at step 1: the update left non-finite parameters"),
])
def test_training_that_diverges_stops_with_status_1(lr, expected, capsys, tmp_path):
    argv = _train_argv(tmp_path / "run", f"optim.lr={lr}", "optim.warmup_steps=0",
                       "trainer.max_nonfinite=3", "trainer.max_steps=20", "trainer.eval_every=20")
    _fails(capsys, 1, train_main, argv, "parser-train", expected)


def test_console_entry_point_exit_status(tmp_path):
    # The real process: sys.exit(main()) gives status 2 and one clean message.
    done = subprocess.run(
        [sys.executable, "-m", "parser.cli.train", "data=tiny", "trainer.max_stpes=3", f"hydra.run.dir={tmp_path}"],
        cwd=REPO, check=False, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("parser-train: error: unknown option 'trainer.max_stpes'; did you mean 'trainer.max_steps'?")
    assert "Traceback" not in done.stderr + done.stdout


def test_ge_on_text_without_upos_and_no_tagger(capsys, tmp_path):
    # The trainer passes its objective terms to the data loader, so a GE term that would read the
    # UPOS of tokenised text (which has none) stops before training and names data.tagger.
    text = tmp_path / "unlabeled.txt"
    text.write_text("The cat sat on the mat .\nDogs bark .\n")
    train_fails(capsys, tmp_path, f"data.unlabeled_file={text}", "objective=likelihood_ge",
                expected=["data.tagger", "objective term 'ge' reads UPOS"])


def test_tagger_entry_point_reports_bad_input(capsys, tmp_path):
    from parser.cli.train_tagger import main as tagger_main

    run = f"hydra.run.dir={tmp_path / 'tagger'}"
    _fails(capsys, 2, tagger_main, ["data=tiny", "tagger.no_such_key=1", run],
           "parser-train-tagger", "no_such_key")
    missing = tmp_path / "missing.conllu"
    _fails(capsys, 2, tagger_main, ["data=tiny", f"data.train_file={missing}", run],
           "parser-train-tagger", f"data.train_file={missing}: no such file")
