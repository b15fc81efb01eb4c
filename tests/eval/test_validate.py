"""The official UD validator, level 2, run in-process."""

from __future__ import annotations

import pytest

from parser.eval.validate import validate_conllu

GOOD = """# sent_id = s1
# text = a b c
1	a	a	X	_	_	2	dep	_	_
2	b	b	X	_	_	0	root	_	_
3	c	c	X	_	_	2	dep	_	_

"""


def test_real_ewt_dev_passes_level_2(ud_root):
    assert validate_conllu(ud_root / "en_ewt" / "en_ewt-ud-dev.conllu") == []


def test_valid_small_file_passes(tmp_path):
    path = tmp_path / "good.conllu"
    path.write_text(GOOD, encoding="utf-8")
    assert validate_conllu(path) == []


@pytest.mark.parametrize(
    ("old", "new", "test_id"),
    [
        ("2\tb\tb\tX\t_\t_\t0\troot", "2\tb\tb\tX\t_\t_\t3\troot", "non-tree"),  # cycle 2 <-> 3
        ("1\ta\ta\tX\t_\t_\t2\tdep", "1\ta\ta\tX\t_\t_\t0\tdep", "multiple-roots"),
        ("3\tc\tc\tX\t_\t_\t2\tdep", "3\tc\tc\tX\t_\t_\t7\tdep", "unknown-head"),  # no such word
    ],
)
def test_broken_tree_fails(tmp_path, old, new, test_id):
    path = tmp_path / "broken.conllu"
    assert old in GOOD
    path.write_text(GOOD.replace(old, new), encoding="utf-8")
    errors = validate_conllu(path)
    assert errors, "a broken tree must not pass"
    assert any(test_id in error for error in errors), errors
    assert all(error.startswith(f"{path}:") for error in errors)


def test_bad_arguments(tmp_path):
    path = tmp_path / "good.conllu"
    path.write_text(GOOD, encoding="utf-8")
    with pytest.raises(ValueError, match="level"):
        validate_conllu(path, level=7)
    with pytest.raises(FileNotFoundError, match="missing.conllu"):
        validate_conllu(tmp_path / "missing.conllu")
