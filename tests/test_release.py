"""``parser-release``: a recipe over every treebank of a release, one table, skipped treebanks
with their reason, and a second run that trains only what the first left unfinished."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from parser.cli import release
from parser.cli.release import main, sweep_release
from parser.eval.official import METRICS
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
    assert [r["treebank"] for r in swept["results"]] == ["xx_one", "xx_two"]  # by code
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


def _fake_training(monkeypatch):
    """Each treebank's process writes a result.json with every official metric at once (the
    values tell the treebanks and the metrics apart), instead of training."""
    script = ("import json, sys, pathlib\n"
              "out, code = pathlib.Path(sys.argv[1]), sys.argv[2]\n"
              "out.mkdir(parents=True, exist_ok=True)\n"
              "rank = int(code[-1])\n"
              f"raw = {{m: rank * 10 + i / 10 for i, m in enumerate({list(METRICS)!r})}}\n"
              "result = {'treebank': code, 'train_sentences': 100 * rank, 'train_seconds': 60,\n"
              "          'raw': raw, 'gold_tokens': {'UAS': 90.0 + rank, 'LAS': 80.0 + rank}}\n"
              "(out / 'result.json').write_text(json.dumps(result))\n")
    monkeypatch.setattr(release, "_command", lambda code, *, root, recipe, output: [
        sys.executable, "-c", script, str(output / code), code])


def test_the_table_gives_every_official_metric(tmp_path, fixtures, monkeypatch):
    _fake_training(monkeypatch)
    root = tmp_path / "release"
    lay_out(root, fixtures, layout="code", code="xx_1")
    out = tmp_path / "sweep"
    sweep_release(root=root, output=out, recipe=RECIPE)
    header, _, row, _ = (out / "release.md").read_text().splitlines()[:4]
    assert [c.strip() for c in header.strip("|").split("|")][2:15] == list(METRICS)
    assert [c.strip() for c in row.strip("|").split("|")][2:15] == [
        f"{10 + i / 10:.2f}" for i in range(len(METRICS))]
    csv_header, csv_row = (out / "release.csv").read_text().splitlines()
    assert csv_header.split(",")[2:15] == list(METRICS)
    assert [float(v) for v in csv_row.split(",")[2:15]] == [10 + i / 10 for i in range(len(METRICS))]


def test_runs_of_one_treebank_each_into_one_folder_make_one_table(tmp_path, fixtures, monkeypatch):
    _fake_training(monkeypatch)
    root = tmp_path / "release"
    for code in ("xx_3", "xx_1", "xx_2"):
        lay_out(root, fixtures, layout="code", code=code)
    lay_out(root, fixtures, layout="official", code="xx_4", folder="UD_Xx-Four", blank_forms=True)
    out = tmp_path / "sweep"
    for code in ("xx_4", "xx_3", "xx_1", "xx_2"):
        swept = sweep_release(root=root, output=out, recipe=RECIPE, treebanks=[code])
    assert [r["treebank"] for r in swept["results"]] == ["xx_1", "xx_2", "xx_3"]
    table = (out / "release.md").read_text()
    rows = [line.split("|")[1].strip() for line in table.splitlines()[2:6]]
    assert rows == ["xx_1", "xx_2", "xx_3", "macro average (3)"]
    assert "xx_4 (" in table and "no text" in table  # an earlier run's skipped treebank stays
    assert [line.split(",")[0] for line in (out / "release.csv").read_text().splitlines()] == [
        "treebank", "xx_1", "xx_2", "xx_3"]
    assert set(json.loads((out / "skipped.json").read_text())) == {"xx_4"}
