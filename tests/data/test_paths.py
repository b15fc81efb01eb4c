"""The UD data root and treebank files."""

from __future__ import annotations

import pytest

from parser.data import paths
from parser.data.paths import (
    available_treebanks,
    existing_file,
    find_treebank,
    resolve_ud_root,
    treebank_file,
)

SPLITS_ALL = ("train", "dev", "test")


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


def _release_root(tmp_path):
    """Both layouts in one root: official folders (one of them with a README) and ``<code>/``."""
    for folder, code, splits in (("UD_Hungarian-Szeged", "hu_szeged", ("train", "dev", "test")),
                                 ("UD_Ancient_Greek-PROIEL", "grc_proiel", ("train", "test")),
                                 ("en_ewt", "en_ewt", ("dev",))):
        (tmp_path / folder).mkdir()
        for split in splits:
            (tmp_path / folder / f"{code}-ud-{split}.conllu").write_text("")
    (tmp_path / "UD_Hungarian-Szeged" / "README.md").write_text("")
    (tmp_path / "notes").mkdir()  # a folder holding no treebank
    return tmp_path


def test_treebank_files(tmp_path):
    root = _fake_root(tmp_path)
    assert treebank_file(root, "en_ewt", "dev") == root / "en_ewt" / "en_ewt-ud-dev.conllu"
    assert treebank_file(root, "xx_new", "test").name == "xx_new-ud-test.conllu"
    with pytest.raises(ValueError, match=r"^unknown treebank 'en_gum' under .*: looked for "
                                         r"en_gum/en_gum-ud-<split>.conllu and UD_<Language>-"
                                         r"<Name>/en_gum-ud-<split>.conllu; available: "
                                         r"en_ewt, xx_new$"):
        treebank_file(root, "en_gum", "dev")
    with pytest.raises(ValueError, match=r"en_ewt has no 'train' split .*\(available: dev\)"):
        treebank_file(root, "en_ewt", "train")
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        treebank_file(root, "en_ewt", "valid")


def test_either_layout_by_code_or_folder_name(tmp_path):
    root = _release_root(tmp_path)
    official = root / "UD_Hungarian-Szeged"
    for name in ("hu_szeged", "UD_Hungarian-Szeged"):
        found = find_treebank(root, name)
        assert (found.code, found.folder, found.splits) == ("hu_szeged", official, SPLITS_ALL)
        assert treebank_file(root, name, "dev") == official / "hu_szeged-ud-dev.conllu"
    assert find_treebank(root, "UD_Ancient_Greek-PROIEL").splits == ("train", "test")
    assert find_treebank(root, "en_ewt").folder == root / "en_ewt"
    assert available_treebanks(root) == ["en_ewt", "grc_proiel", "hu_szeged"]
    with pytest.raises(ValueError, match=r"grc_proiel has no 'dev' split .*\(available: train, test\)"):
        treebank_file(root, "UD_Ancient_Greek-PROIEL", "dev")


def test_unknown_names_close_matches_of_codes_and_folders(tmp_path):
    root = _release_root(tmp_path)
    with pytest.raises(ValueError, match=r"close matches: hu_szeged;"):
        find_treebank(root, "hu_szged")
    with pytest.raises(ValueError, match=r"close matches: UD_Hungarian-Szeged;"):
        find_treebank(root, "UD_Hungarian-Szegd")
    with pytest.raises(ValueError, match=r"^unknown treebank 'notes'"):
        find_treebank(root, "notes")  # a folder, but no treebank's
    with pytest.raises(ValueError, match=r"^unknown treebank '../en_ewt'"):
        find_treebank(root / "notes", "../en_ewt")  # names, not paths


def test_a_folder_of_several_treebanks_needs_a_code(tmp_path):
    (tmp_path / "UD_Mixed-Two").mkdir()
    for code in ("xx_a", "xx_b"):
        (tmp_path / "UD_Mixed-Two" / f"{code}-ud-test.conllu").write_text("")
    assert find_treebank(tmp_path, "xx_b").files == {"test": tmp_path / "UD_Mixed-Two" / "xx_b-ud-test.conllu"}
    with pytest.raises(ValueError, match=r"UD_Mixed-Two: files of several treebanks \(xx_a, xx_b\)"):
        find_treebank(tmp_path, "UD_Mixed-Two")


def test_finding_a_code_opens_no_file(tmp_path, monkeypatch):
    """A 300-treebank release: a code is found from directory listings alone."""
    for i in range(300):
        folder = tmp_path / f"UD_Lang{i:03d}-X"
        folder.mkdir()
        (folder / f"x{i:03d}_x-ud-test.conllu").write_text("")
    opened = []
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a) or pytest.fail("opened"))
    assert find_treebank(tmp_path, "x299_x").folder.name == "UD_Lang299-X"
    assert not opened


def test_real_root_has_the_shared_treebanks(ud_root):
    for name in ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt"):
        assert treebank_file(ud_root, name, "test").is_file()
    with pytest.raises(ValueError, match=r"available: dev, test"):
        treebank_file(ud_root, "fi_tdt", "train")


def test_existing_file_expands_home_and_names_the_option(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "a.conllu").write_text("")
    assert existing_file("~/a.conllu", option="data.train_file") == tmp_path / "a.conllu"
    with pytest.raises(ValueError, match=r"^data.dev_file=~: no such file$"):
        existing_file("~", option="data.dev_file")  # a folder is not a file
