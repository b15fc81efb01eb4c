"""The UD data root and treebank files."""

from __future__ import annotations

import pytest

from parser.data import paths
from parser.data.paths import KNOWN_TREEBANKS, existing_file, resolve_ud_root, treebank_file


def _fake_root(tmp_path):
    (tmp_path / "en_ewt").mkdir()
    (tmp_path / "en_ewt" / "en_ewt-ud-dev.conllu").write_text("")
    (tmp_path / "xx_new").mkdir()
    (tmp_path / "xx_new" / "xx_new-ud-test.conllu").write_text("")
    return tmp_path


def test_resolution_order(tmp_path, monkeypatch):
    configured, env = tmp_path / "a", tmp_path / "b"
    configured.mkdir(), env.mkdir()
    monkeypatch.setenv("UD_ROOT", str(env))
    assert resolve_ud_root(str(configured)) == configured
    assert resolve_ud_root(None) == env
    monkeypatch.delenv("UD_ROOT")
    monkeypatch.setattr(paths, "REPO", tmp_path)
    (tmp_path / "data" / "ud").mkdir(parents=True)
    assert resolve_ud_root(None) == tmp_path / "data" / "ud"


def test_missing_root_says_how_to_set_it(tmp_path, monkeypatch):
    monkeypatch.setenv("UD_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"nowhere \(from \$UD_ROOT\).*UD_ROOT=.*make data"):
        resolve_ud_root(None)
    with pytest.raises(ValueError, match=r"from data.root"):
        resolve_ud_root(str(tmp_path / "missing"))


def test_treebank_files(tmp_path):
    root = _fake_root(tmp_path)
    assert treebank_file(root, "en_ewt", "dev") == root / "en_ewt" / "en_ewt-ud-dev.conllu"
    assert treebank_file(root, "xx_new", "test").name == "xx_new-ud-test.conllu"
    with pytest.raises(ValueError, match="unknown treebank 'en_gum'; available: ar_padt, de_gsd, "
                                         "en_ewt, fi_tdt, fr_gsd, xx_new"):
        treebank_file(root, "en_gum", "dev")
    with pytest.raises(ValueError, match=r"en_ewt has no 'train' split .*\(available: dev\)"):
        treebank_file(root, "en_ewt", "train")
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        treebank_file(root, "en_ewt", "valid")


def test_real_root_has_the_known_treebanks(ud_root):
    for name in KNOWN_TREEBANKS:
        assert treebank_file(ud_root, name, "test").is_file()
    with pytest.raises(ValueError, match=r"available: dev, test"):
        treebank_file(ud_root, "fi_tdt", "train")


def test_existing_file_expands_home_and_names_the_option(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "a.conllu").write_text("")
    assert existing_file("~/a.conllu", option="data.train_file") == tmp_path / "a.conllu"
    with pytest.raises(ValueError, match=r"^data.dev_file=~: no such file$"):
        existing_file("~", option="data.dev_file")  # a folder is not a file
