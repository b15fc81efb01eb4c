"""The README's Results table is true to its results files: every number of a row's "result"
cell appears in a results file the row links (``1,456`` and ``1456``, ``84.0`` and ``84``
read as the same number)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)*")
LINK = re.compile(r"\]\(([^)\s]+\.md)\)")


def _value(text: str) -> float:
    """``"1,456"`` -> 1456.0; a comma is a thousands separator only between digit groups of 3."""
    return float(text.replace(",", ""))


def numbers(text: str) -> set[float | str]:
    """Every number of ``text``: a comma separates thousands only before groups of exactly three
    digits (``1,456`` is 1456, ``1,2`` is 1 and 2); a version (``1.1.4``) stays a string.

    >>> sorted(numbers("1,456 MB; 0.77 / 0.56, 877-2077; x 1000"))
    [0.56, 0.77, 877.0, 1000.0, 1456.0, 2077.0]
    >>> numbers("SuPar 1.1.4")
    {'1.1.4'}
    """
    found: set[float | str] = set()
    for match in NUMBER.finditer(text):
        token = match.group().rstrip(",")
        if token.count(".") > 1 and "," not in token:
            found.add(token)
        elif re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", token):
            found.add(_value(token))
        else:
            found.update(_value(part) for part in token.split(",") if part)
    return found


def results_rows() -> list[tuple[str, str, list[Path]]]:
    """(what, result, linked results files) of each row of the README's Results table."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| what ", "| ---")):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, line
        what, result, file = cells
        files = [REPO / link for link in LINK.findall(file + " " + result)]
        rows.append((what, result, files))
    return rows


ROWS = results_rows()


def test_the_table_has_rows_that_link_results_files():
    assert len(ROWS) >= 8
    assert all(files for _, _, files in ROWS)


@pytest.mark.parametrize(("what", "result", "files"), ROWS, ids=[r[0][:40] for r in ROWS])
def test_every_number_of_a_result_is_in_its_results_file(what, result, files):
    shown = LINK.sub("]", result)  # a link's target is no figure
    in_files = set()
    for path in files:
        assert path.is_file(), f"{what}: {path} does not exist"
        in_files |= numbers(path.read_text(encoding="utf-8"))
    missing = sorted(map(str, numbers(shown) - in_files))
    assert not missing, f"{what}: {missing} not in {[p.name for p in files]}"
