"""One command-line grammar and one unknown-option error for every tool (issue 40).

The key=value tools read their arguments with Hydra's override grammar, as the trainers do
(parser/cli/shell.py's docstring, docs/cli.md); a misspelt option gives every tool the same first
line, ``<prog>: error: unknown option '<key>'; did you mean '<known key>'?``, with exit status 2
and no traceback.
"""

from __future__ import annotations

import pytest

from parser.cli.calibrate import main as calibrate_main
from parser.cli.evaluate import main as evaluate_main
from parser.cli.pipeline import main as pipeline_main
from parser.cli.predict import main as predict_main
from parser.cli.shell import UsageError, parse_key_values
from parser.cli.train import main as train_main
from parser.cli.train_tagger import main as tagger_main
from parser.cli.train_tokenizer import main as tokenizer_main

DEFAULTS = {"input": None, "device": "auto", "ud_rules": None, "seed": "0", "retag": "false"}


def parse(*argv: str) -> dict[str, str | None]:
    return parse_key_values(argv, defaults=DEFAULTS, prog="tool")


def test_values_as_written_quotes_removed_null_and_empty_as_none():
    assert parse("input='a b,c.conllu'", "device=null", "seed=1.50", "retag=TRUE") == {
        **DEFAULTS, "input": "a b,c.conllu", "device": None, "seed": "1.50", "retag": "TRUE"}
    assert parse('input="it\'s.txt"', "device=") == {**DEFAULTS, "input": "it's.txt", "device": None}


def test_a_list_and_a_comma_sweep_reach_the_command_as_one_text():
    assert parse("ud_rules=[root,punct]")["ud_rules"] == "root,punct"
    assert parse("ud_rules=root,punct")["ud_rules"] == "root,punct"  # parser-train -m would sweep it
    assert parse("ud_rules=[]")["ud_rules"] == ""
    with pytest.raises(UsageError, match=r"ud_rules=range\(1,3\): expected a value or a list"):
        parse("ud_rules=range(1,3)")
    with pytest.raises(UsageError, match="expected a value or a list"):
        parse("ud_rules=[[a],b]")


def test_plus_tilde_and_double_plus_mean_what_they_mean_to_parser_train():
    # '+' adds an option the tool lacks: refused for one it has, as `parser-train +trainer.max_steps=1`
    with pytest.raises(UsageError, match=r"'\+' adds an option the tool lacks, and 'device' is one of its options: give 'device=cpu'"):
        parse("+device=cpu")
    assert parse("++device=cpu")["device"] == "cpu"  # add or change
    with pytest.raises(UsageError, match="given twice"):
        parse("device=cpu", "~device")
    assert parse("~device")["device"] == "auto"  # back to its default
    for forced in ("+devic=cpu", "++devic=cpu"):  # an unknown key stays unknown, as check_known_keys makes it
        with pytest.raises(UsageError, match=r"^tool: unknown option 'devic'; did you mean 'device'\?\noptions: input, device"):
            parse(forced)


def test_what_the_grammar_cannot_read_is_named():
    with pytest.raises(UsageError, match=r"cannot read 'input=a#b' \(token recognition error at: '#'\); quote a value"):
        parse("input=a#b")
    assert parse("input='a#b'")["input"] == "a#b"
    with pytest.raises(UsageError, match="argument 'input' is not key=value; options: input, device"):
        parse("input")
    with pytest.raises(UsageError, match="option 'seed' given twice"):
        parse("seed=1", "seed=2")


def test_a_key_without_a_close_match_is_named_alone():
    with pytest.raises(UsageError, match=r"^tool: unknown option 'zzz'\noptions: "):
        parse("zzz=1")


TRAIN_TINY = ("data=tiny", "trainer.max_steps=1", "trainer.final_eval=false", "trainer.progress=false")
MISSPELT = [
    ("parser-train", train_main, ("trainer.max_step=10",), "trainer.max_step", "trainer.max_steps"),
    ("parser-train", train_main, ("+trainer.max_step=10",), "trainer.max_step", "trainer.max_steps"),
    ("parser-train", train_main, ("++trainr.max_steps=10",), "trainr.max_steps", "trainer.max_steps"),
    ("parser-train", train_main, ("model.encoder.knd=x",), "model.encoder.knd", "model.encoder.kind"),
    ("parser-train-tagger", tagger_main, ("trainer.max_step=10",), "trainer.max_step", "trainer.max_steps"),
    ("parser-train-tagger", tagger_main, ("+trainer.max_step=10",), "trainer.max_step", "trainer.max_steps"),
    ("parser-train-tokenizer", tokenizer_main, ("trainer.max_step=10",), "trainer.max_step", "trainer.max_steps"),
    ("parser-predict", predict_main, ("chekpoint=x",), "chekpoint", "checkpoint"),
    ("parser-predict", predict_main, ("+chekpoint=x",), "chekpoint", "checkpoint"),
    ("parser-evaluate", evaluate_main, ("gld=x",), "gld", "gold"),
    ("parser-calibrate", calibrate_main, ("checkpoint=a.pt", "outptu=b.pt"), "outptu", "output"),
    ("parser-pipeline", pipeline_main, ("build", "parsr=a.pt"), "parsr", "parser"),
]


@pytest.mark.parametrize("prog, main, argv, key, meant", MISSPELT, ids=[f"{m[0]} {' '.join(m[2])}" for m in MISSPELT])
def test_a_misspelt_option_is_one_error_everywhere(prog, main, argv, key, meant, capsys, tmp_path):
    if prog.startswith("parser-train"):
        argv = (*argv, f"hydra.run.dir={tmp_path / 'run'}", *(TRAIN_TINY if prog == "parser-train" else ()))
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    message = err[err.index(f"{prog}: error:"):]  # after Hydra's own "Error executing job" line, if any
    first, listing = message.splitlines()[:2]
    assert first == f"{prog}: error: unknown option '{key}'; did you mean '{meant}'?"
    assert listing.startswith("options: ")
    assert "Traceback" not in err and "+" + key not in message  # no advice to force the key in
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_mapping_given_a_new_entry_is_not_an_unknown_option(capsys, tmp_path):
    # model.layer_weights exists (an open mapping): a plain override of a new entry is refused by
    # Hydra's struct mode, and the error says how to add it, not that the option is unknown
    argv = ["model.layer_weights={xpos:0.2}", f"hydra.run.dir={tmp_path / 'run'}", *TRAIN_TINY]
    assert train_main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown option" not in err
    assert "Could not override 'model.layer_weights'" in err
    assert "+model.layer_weights={xpos:0.2}" in err
    assert not (tmp_path / "run" / "checkpoints").exists()
