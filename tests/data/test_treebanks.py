"""A treebank described from its files, in either layout, and the edge cases of a UD release
(docs/treebanks.md): no text, no dev file, test only, a handful of training trees, unknown names.

The fixture treebank is tests/fixtures/tiny-{train,dev}.conllu laid out in a tmp_path, once per
layout, so no CoNLL-U file is duplicated in the repository.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from parser.cli.train import main as train_main
from parser.cli.train import train
from parser.config import DataConfig, config_dir, register_configs
from parser.data.conllu_io import read_conllu
from parser.data.treebanks import MIN_CARVED_DEV, forms_hold_text, read_treebank_info
from parser.runtime.checkpoint import load_checkpoint
from parser.train.training_data import load_training_data
from tests.train.helpers import QUIET, TINY_DATA, TINY_MODEL, tiny_config

FOLDER, CODE = "UD_Tiny-Fixture", "xx_tiny"
LAYOUTS = ("official", "code")
SHARED_COPY = ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")  # configs/data/<code>.yaml


def lay_out(root: Path, fixtures: Path, *, layout: str, splits=("train", "dev", "test"),
            code: str = CODE, folder: str = FOLDER, blank_forms: bool = False,
            train_copies: int = 1) -> Path:
    """The tiny fixture as treebank ``code`` under ``root`` (test = the dev file); returns the
    treebank's folder. ``blank_forms``: every FORM and LEMMA ``_`` (en_esl); ``train_copies``:
    the training file repeated (a treebank large enough to carve a dev set from)."""
    target = root / (folder if layout == "official" else code)
    target.mkdir(parents=True)
    sources = {"train": fixtures / "tiny-train.conllu", "dev": fixtures / "tiny-dev.conllu",
               "test": fixtures / "tiny-dev.conllu"}
    for split in splits:
        text = sources[split].read_text(encoding="utf-8")
        if split == "train":
            text = text * train_copies
        if blank_forms:
            text = re.sub(r"^(\d+(?:-\d+)?)\t[^\t]*\t[^\t]*\t", r"\1\t_\t_\t", text, flags=re.MULTILINE)
        (target / f"{code}-ud-{split}.conllu").write_text(text, encoding="utf-8")
    (target / "LICENSE.txt").write_text("fixture\n")
    return target


def treebank_config(root: Path, name: str, *overrides: str):
    """``data=tiny``'s settings and tiny model, the treebank read from ``root`` by ``name``."""
    return tiny_config("data.train_file=null", "data.dev_file=null", "data.test_file=null",
                       f"data.treebank={name}", f"data.root={root}", *overrides)


def data_config(root: Path, name: str, **options) -> DataConfig:
    return DataConfig(treebank=name, root=str(root), min_freq=1, tokens_per_batch=200, **options)


# -- what the files say -----------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_info_from_the_files_in_either_layout(tmp_path, fixtures, layout):
    folder = lay_out(tmp_path, fixtures, layout=layout)
    names = (CODE, FOLDER) if layout == "official" else (CODE,)
    for name in names:
        info = read_treebank_info(tmp_path, name)
        assert (info.code, info.folder, info.splits) == (CODE, folder, ("train", "dev", "test"))
        assert info.has_text and info.unlabeled_split == "train"
        assert info.language == ("Tiny" if layout == "official" else "xx")
        assert info.files["dev"] == folder / f"{CODE}-ud-dev.conllu"


def test_text_is_decided_from_the_first_sentences_only(tmp_path, fixtures):
    blank = lay_out(tmp_path / "a", fixtures, layout="official", blank_forms=True)
    train = blank / f"{CODE}-ud-train.conllu"
    assert not forms_hold_text(train)
    # Text after the first 20 sentences is never read: the whole file is not scanned.
    text = fixtures.joinpath("tiny-train.conllu").read_text(encoding="utf-8")
    train.write_text(train.read_text(encoding="utf-8") + text, encoding="utf-8")
    assert not forms_hold_text(train)
    assert forms_hold_text(train, sentences=40)
    assert forms_hold_text(fixtures / "tiny-train.conllu")


def test_the_unlabeled_split_is_train_then_dev_then_test(tmp_path, fixtures):
    lay_out(tmp_path, fixtures, layout="code", code="xx_a", splits=("dev", "test"))
    lay_out(tmp_path, fixtures, layout="code", code="xx_b", splits=("test",))
    assert read_treebank_info(tmp_path, "xx_a").unlabeled_split == "dev"
    assert read_treebank_info(tmp_path, "xx_b").unlabeled_split == "test"


# -- the same treebank in both layouts --------------------------------------------------------

def _run(root: Path, name: str, run_dir: Path) -> dict:
    cfg = treebank_config(root, name, "trainer.max_steps=6", "trainer.eval_every=3",
                          "trainer.seed=3")
    results = train(cfg, run_dir=run_dir)
    weights = load_checkpoint(results["checkpoint"])["model"]
    return {"dev": {k: results["dev"][k] for k in ("uas", "las")},
            "test": {k: results["test"][k] for k in ("uas", "las")},
            "best": (results["state"].best_step, results["state"].best_score), "weights": weights}


def test_both_layouts_and_both_names_give_identical_runs(tmp_path, fixtures):
    runs = []
    for layout, name in (("code", CODE), ("official", CODE), ("official", FOLDER)):
        root = tmp_path / f"{layout}-{name}"
        lay_out(root, fixtures, layout=layout)
        runs.append(_run(root, name, tmp_path / f"run-{layout}-{name}"))
    first = runs[0]
    assert first["best"][0] > 0 and 0 <= first["dev"]["uas"] <= 100
    for other in runs[1:]:
        assert (other["dev"], other["test"], other["best"]) == (first["dev"], first["test"], first["best"])
        assert other["weights"].keys() == first["weights"].keys()
        for key, value in first["weights"].items():
            assert torch.equal(other["weights"][key], value), key


# -- edge cases -------------------------------------------------------------------------------

def test_no_text_is_refused_naming_the_treebank(tmp_path, fixtures):
    lay_out(tmp_path, fixtures, layout="official", blank_forms=True)
    with pytest.raises(ValueError, match=rf"^treebank {CODE} \(.*{FOLDER}\): every FORM of the "
                                         r"first 20 sentences of xx_tiny-ud-train.conllu is '_'"):
        load_training_data(data_config(tmp_path, FOLDER), seed=0)


def test_no_text_stops_parser_train_before_a_model_is_built(tmp_path, fixtures, capsys):
    lay_out(tmp_path / "ud", fixtures, layout="official", blank_forms=True)
    run_dir = tmp_path / "run"
    argv = [*TINY_DATA, *TINY_MODEL, *QUIET, "data.train_file=null", "data.dev_file=null",
            "data.test_file=null", f"data.treebank={CODE}", f"data.root={tmp_path / 'ud'}",
            "trainer.max_steps=2", f"hydra.run.dir={run_dir}"]
    root_logger = logging.getLogger()
    handlers, level = root_logger.handlers[:], root_logger.level
    try:
        assert train_main(argv) == 2
    finally:
        root_logger.handlers[:], root_logger.level = handlers, level
    err = capsys.readouterr().err
    assert f"parser-train: error: treebank {CODE}" in err and "no text to train on" in err
    assert "Traceback" not in err
    assert not list(run_dir.rglob("*.pt"))


def test_test_only_is_refused_saying_how_to_evaluate_it(tmp_path, fixtures):
    lay_out(tmp_path, fixtures, layout="official", splits=("test",))
    with pytest.raises(ValueError) as error:
        load_training_data(data_config(tmp_path, CODE), seed=0)
    message = str(error.value)
    assert message.startswith(f"{CODE} has no 'train' split (available: test) in {tmp_path / FOLDER}")
    assert "can only be evaluated with a model trained elsewhere (on another Tiny treebank)" in message
    assert f"parser-evaluate checkpoint=<that run>/checkpoints/best.pt treebank={CODE} split=test " \
           f"root={tmp_path}" in message


def test_test_only_is_read_as_text_when_named_explicitly(tmp_path, fixtures):
    """A run without trees may read the test file as text (transductive): only when asked."""
    lay_out(tmp_path, fixtures, layout="official", splits=("test",))
    data = load_training_data(data_config(tmp_path, CODE, train_split="test", dev_split=None,
                                          labeled_size=0), seed=0)
    assert len(data.unlabeled) == 12 and not data.labeled and data.dev is None


def test_dev_and_test_only_points_to_the_unlabeled_text(tmp_path, fixtures):
    lay_out(tmp_path, fixtures, layout="code", splits=("dev", "test"))
    with pytest.raises(ValueError, match=r"xx_tiny has no 'train' split \(available: dev, test\) "
                                         r".*data.unlabeled_split=dev"):
        load_training_data(data_config(tmp_path, CODE), seed=0)


def test_no_dev_file_carves_the_last_tenth_of_train(tmp_path, fixtures, caplog):
    lay_out(tmp_path, fixtures, layout="official", splits=("train", "test"), train_copies=7)
    train = read_conllu(tmp_path / FOLDER / f"{CODE}-ud-train.conllu").sentences
    assert len(train) == 224
    with caplog.at_level(logging.INFO, logger="parser.train.training_data"):
        data = load_training_data(data_config(tmp_path, CODE), seed=0)
    assert [s.forms for s in data.dev.sentences] == [s.forms for s in train[-22:]]
    assert [s.forms for s in data.labeled] == [s.forms for s in train[:-22]]
    assert not Path(data.dev.path).is_file()  # the final evaluation writes its gold file
    assert "no dev file: the dev set is the last 22 of its 224 training sentences" in caplog.text
    none = load_training_data(data_config(tmp_path, CODE, dev_fraction=0.0), seed=0)
    assert none.dev is None and len(none.labeled) == 224


def test_a_carved_dev_set_is_scored_against_its_own_gold_file(tmp_path, fixtures):
    lay_out(tmp_path, fixtures, layout="official", splits=("train", "test"), train_copies=7)
    cfg = treebank_config(tmp_path, CODE, "trainer.max_steps=2", "trainer.eval_every=2")
    results = train(cfg, run_dir=tmp_path / "run")
    gold = read_conllu(tmp_path / "run" / "dev.gold.conllu").sentences
    assert len(gold) == 22 and "official_error" not in results["dev"]
    assert results["dev"]["official"]["LAS"] is not None


def test_a_handful_of_trees_and_no_dev_file_trains_without_model_selection(tmp_path, fixtures, caplog):
    lay_out(tmp_path, fixtures, layout="official", splits=("train", "test"))
    assert round(0.1 * 32) < MIN_CARVED_DEV
    cfg = treebank_config(tmp_path, CODE, "trainer.max_steps=4", "trainer.eval_every=2")
    with caplog.at_level(logging.INFO, logger="parser.train.training_data"):
        results = train(cfg, run_dir=tmp_path / "run")
    assert "no dev set, no model selection; the model of the last step is kept" in caplog.text
    assert results["state"].best_step == 4 and "dev" not in results
    assert 0 <= results["test"]["las"] <= 100


def test_unknown_treebank_names_root_layouts_and_close_matches(tmp_path, fixtures):
    lay_out(tmp_path, fixtures, layout="official")
    with pytest.raises(ValueError, match=rf"^unknown treebank 'xx_tiyn' under {tmp_path}: looked "
                                         r"for xx_tiyn/xx_tiyn-ud-<split>.conllu and "
                                         r"UD_<Language>-<Name>/xx_tiyn-ud-<split>.conllu; "
                                         r"close matches: xx_tiny; available: xx_tiny$"):
        load_training_data(data_config(tmp_path, "xx_tiyn"), seed=0)


# -- the shared release (../shared/data/ud-release) and the shared copy (../shared/data/ud) ----

RELEASE = {  # code: (folder, splits, has text), as ../shared/data/ud-release/README.md lists them
    "en_ewt": ("UD_English-EWT", ("train", "dev", "test"), True),
    "af_afribooms": ("UD_Afrikaans-AfriBooms", ("train", "dev", "test"), True),
    "el_gdt": ("UD_Greek-GDT", ("train", "dev", "test"), True),
    "hu_szeged": ("UD_Hungarian-Szeged", ("train", "dev", "test"), True),
    "mt_mudt": ("UD_Maltese-MUDT", ("train", "dev", "test"), True),
    "ta_ttb": ("UD_Tamil-TTB", ("train", "dev", "test"), True),
    "mr_ufal": ("UD_Marathi-UFAL", ("train", "dev", "test"), True),
    "kk_ktb": ("UD_Kazakh-KTB", ("train", "test"), True),
    "en_pud": ("UD_English-PUD", ("test",), True),
    "en_esl": ("UD_English-ESL", ("train", "dev", "test"), False),
}


def test_the_release_as_its_readme_describes_it(ud_release_root):
    for code, (folder, splits, has_text) in RELEASE.items():
        for name in (code, folder):
            info = read_treebank_info(ud_release_root, name)
            assert (info.code, info.folder.name, info.splits, info.has_text) == (
                code, folder, splits, has_text), name
    assert read_treebank_info(ud_release_root, "UD_Hungarian-Szeged").language == "Hungarian"


def test_the_release_edge_cases(ud_release_root, caplog):
    with pytest.raises(ValueError, match=r"^treebank en_esl \(.*UD_English-ESL\): every FORM"):
        load_training_data(data_config(ud_release_root, "en_esl"), seed=0)
    with pytest.raises(ValueError, match=r"en_pud has no 'train' split \(available: test\) .*"
                                         r"another English treebank.*treebank=en_pud split=test"):
        load_training_data(data_config(ud_release_root, "en_pud"), seed=0)
    with caplog.at_level(logging.INFO, logger="parser.train.training_data"):
        kk = load_training_data(data_config(ud_release_root, "kk_ktb", test_split=None), seed=0)
    assert len(kk.labeled) == 31 and kk.dev is None
    assert "kk_ktb has no dev file and 31 training sentences" in caplog.text


def test_parser_train_runs_a_release_treebank_it_has_no_config_for(ud_release_root, tmp_path):
    cfg = treebank_config(ud_release_root, "hu_szeged", "data.max_train_sentences=40",
                          "trainer.max_steps=2", "trainer.eval_every=2", "trainer.final_eval=false")
    results = train(cfg, run_dir=tmp_path)
    assert results["state"].step == 2 and results["state"].best_step == 2


def test_the_shared_copy_configs_choose_what_its_files_allow(ud_root):
    """configs/data/<code>.yaml name the unlabeled text of the trimmed shared copy: the split its
    files give (en_ewt.yaml says nothing but its name: the default, train)."""
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        for code in SHARED_COPY:
            chosen = compose("config", overrides=[f"data={code}"]).data.unlabeled_split
            assert chosen == read_treebank_info(ud_root, code).unlabeled_split, code
