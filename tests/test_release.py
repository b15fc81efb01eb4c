"""``parser-release``: a recipe over every treebank of a release, one table, skipped treebanks
with their reason, and a second run that trains only what the first left unfinished."""

from __future__ import annotations

import json
from pathlib import Path

from parser.cli.release import main, sweep_release
from tests.data.test_treebanks import lay_out

RECIPE = str(Path(__file__).resolve().parent / "fixtures" / "recipe-tiny.yaml")


def test_a_release_is_swept_into_one_table_and_a_rerun_finishes_it(tmp_path, fixtures, capsys):
    root = tmp_path / "release"
    lay_out(root, fixtures, layout="official", code="xx_one", folder="UD_Xx-One")
    lay_out(root, fixtures, layout="code", code="xx_two")
    lay_out(root, fixtures, layout="official", code="xx_text", folder="UD_Xx-Text", blank_forms=True)
    lay_out(root, fixtures, layout="official", code="xx_pud", folder="UD_Xx-PUD", splits=("test",))
    out = tmp_path / "sweep"
    assert main([f"root={root}", f"output={out}", f"recipe={RECIPE}", "jobs=2"]) == 0
    table = (out / "release.md").read_text()
    assert "| xx_one |" in table and "| xx_two |" in table and "macro average (2)" in table
    assert "xx_text (" in table and "no text" in table
    assert "xx_pud (" in table and "no 'train' split" in table
    assert capsys.readouterr().out.startswith("| treebank |")
    assert len((out / "release.csv").read_text().splitlines()) == 3
    assert set(json.loads((out / "skipped.json").read_text())) == {"xx_text", "xx_pud"}
    # after a kill: one treebank unfinished; only it is trained again
    kept = (out / "xx_one" / "result.json").stat().st_mtime_ns
    (out / "xx_two" / "result.json").unlink()
    swept = sweep_release(root=root, output=out, recipe=RECIPE, treebanks=["xx_two", "UD_Xx-One"])
    assert [r["treebank"] for r in swept["results"]] == ["xx_two", "xx_one"]
    assert (out / "xx_one" / "result.json").stat().st_mtime_ns == kept


def test_a_failing_treebank_is_reported_and_the_others_go_on(tmp_path, fixtures):
    root = tmp_path / "release"
    lay_out(root, fixtures, layout="code", code="xx_one")
    broken = lay_out(root, fixtures, layout="code", code="xx_bad")
    (broken / "xx_bad-ud-train.conllu").write_text("1\tword\n\n", encoding="utf-8")  # 2 columns
    swept = sweep_release(root=root, output=tmp_path / "sweep", recipe=RECIPE)
    assert [r["treebank"] for r in swept["results"]] == ["xx_one"]
    assert swept["skipped"]["xx_bad"].startswith("failed with exit status 2: ")
    assert "xx_bad-ud-train.conllu:1" in swept["skipped"]["xx_bad"]
