"""``experiments/holdout_split.py``: a train/dev split cut out of a dev file, sentences copied
byte for byte (comments, multiword tokens, CRLF line endings), file order kept, test copied."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
_SPEC = importlib.util.spec_from_file_location("holdout_split", REPO / "experiments" / "holdout_split.py")
holdout_split = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(holdout_split)


def _blocks(text: str) -> list[str]:
    return [block + "\n\n" for block in text.rstrip("\n").split("\n\n")]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A data root holding treebank xx_tiny: tiny-train as its dev file, tiny-dev as its test."""
    folder = tmp_path / "ud" / "xx_tiny"
    folder.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "tiny-train.conllu", folder / "xx_tiny-ud-dev.conllu")
    shutil.copyfile(FIXTURES / "tiny-dev.conllu", folder / "xx_tiny-ud-test.conllu")
    return tmp_path / "ud"


def test_script_splits_dev_in_file_order_byte_for_byte(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "split"
    env = {**os.environ, "PYTHONPATH": str(REPO), "UD_ROOT": str(root)}
    done = subprocess.run([sys.executable, str(REPO / "experiments" / "holdout_split.py"),
                           "--treebank", "xx_tiny", "--held-out-fraction", "0.25", "--seed", "1",
                           "--out", str(out)], env=env, cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    source = _blocks((root / "xx_tiny" / "xx_tiny-ud-dev.conllu").read_text(encoding="utf-8"))
    train = (out / "xx_tiny" / "xx_tiny-ud-train.conllu").read_text(encoding="utf-8")
    dev = (out / "xx_tiny" / "xx_tiny-ud-dev.conllu").read_text(encoding="utf-8")
    held = holdout_split.held_out_indices(len(source), fraction=0.25, seed=1)
    assert len(held) == round(0.25 * len(source)) == 8
    assert train == "".join(b for i, b in enumerate(source) if i not in held)
    assert dev == "".join(b for i, b in enumerate(source) if i in held)
    assert len(train) + len(dev) == len("".join(source))
    assert "# sent_id" in dev and "\n\n\n" not in train + dev
    assert ((out / "xx_tiny" / "xx_tiny-ud-test.conllu").read_bytes()
            == (root / "xx_tiny" / "xx_tiny-ud-test.conllu").read_bytes())
    assert "24 training sentences, 8 held out" in done.stdout


def test_seed_changes_the_sample_and_fraction_sets_its_size() -> None:
    first = holdout_split.held_out_indices(100, fraction=0.2, seed=1)
    assert len(first) == 20
    assert first == holdout_split.held_out_indices(100, fraction=0.2, seed=1)
    assert first != holdout_split.held_out_indices(100, fraction=0.2, seed=2)


def test_crlf_sentences_are_kept_as_written(tmp_path: Path) -> None:
    path = tmp_path / "crlf.conllu"
    sentence = "# sent_id = {n}\r\n1\tA\ta\tX\t_\t_\t0\troot\t_\t_\r\n\r\n"
    path.write_bytes("".join(sentence.format(n=n) for n in range(3)).encode("utf-8"))
    assert holdout_split.sentence_blocks(path) == [sentence.format(n=n) for n in range(3)]


@pytest.mark.parametrize(("text", "line"), [("1\tA\ta\tX\t_\t_\t0\troot\t_\t_\n", 1),
                                             ("\n1\tA\ta\tX\t_\t_\t0\troot\t_\t_\n\n", 1)])
def test_unclosed_or_stray_blank_line_names_file_and_line(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "bad.conllu"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"bad\.conllu:{line}: "):
        holdout_split.sentence_blocks(path)


@pytest.mark.parametrize("fraction", [0.0, 1.0, 0.001])
def test_fraction_that_empties_a_split_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="held-out-fraction"):
        holdout_split.held_out_indices(10, fraction=fraction, seed=1)
