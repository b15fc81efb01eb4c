"""``experiments/compare_arms.py``: an arm's per-seed scores and its seed-pooled difference to the
baseline, on the tiny fixture with one prediction made worse on purpose."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GOLD = Path(__file__).parent / "fixtures" / "tiny-dev.conllu"
_SPEC = importlib.util.spec_from_file_location("compare_arms", REPO / "experiments" / "compare_arms.py")
compare_arms = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(compare_arms)


def _worse(tmp_path: Path) -> Path:
    """The gold file with every word attached to its sentence's root word (a star: still a tree)."""
    blocks = []
    for block in GOLD.read_text(encoding="utf-8").strip().split("\n\n"):
        rows = [line.split("\t") for line in block.splitlines()]
        words = [cols for cols in rows if len(cols) == 10 and cols[0].isdigit()]
        root = next(cols[0] for cols in words if cols[6] == "0")
        for cols in words:
            if cols[6] != "0":
                cols[6] = root
        blocks.append("\n".join("\t".join(cols) for cols in rows))
    path = tmp_path / "worse.conllu"
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return path


def test_table_has_each_seed_and_the_pooled_difference(tmp_path, capsys):
    run = tmp_path / "run_s1"
    run.mkdir()
    (run / "test.pred.conllu").write_text(GOLD.read_text(encoding="utf-8"), encoding="utf-8")
    worse = _worse(tmp_path)
    out = tmp_path / "table.md"
    compare_arms.main(["--gold", str(GOLD), "--baseline", f"base={worse},{worse}",
                       "--arm", f"perfect={run}", "--out", str(out)])
    table = out.read_text(encoding="utf-8").splitlines()
    assert table[0].startswith("| arm | seeds |") and len(table) == 4
    base, perfect = table[2].split(" | "), table[3].split(" | ")
    assert perfect[1:4] == ["1", "100.00", "100.00"]
    assert float(base[4]) < 100.0
    delta = float(perfect[6].split()[0])
    assert delta == pytest.approx(100.0 - float(base[4]), abs=0.01)
    assert "(vs its first 1)" in perfect[6]
    assert "p = 0.0000" in perfect[6]


def test_a_missing_run_is_named(tmp_path):
    with pytest.raises(SystemExit):
        compare_arms.main(["--gold", str(GOLD), "--baseline", f"base={tmp_path / 'nope'}"])
