"""Lemma edit scripts: exact inversion on every annotated word of the fixtures and the shared UD
treebanks, the classes words share, scripts that cannot apply, and random Unicode pairs."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from parser.data.layers.edit_script import IDENTITY, apply_script, identity_script, lemma_script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHARED = Path(__file__).resolve().parents[2].parent / "shared"
HELD_OUT = ("de_gsd", "fi_tdt", "fr_gsd", "ar_padt")  # their dev/test files (ar_padt: test only)


def annotated_pairs(path: Path) -> list[tuple[str, str]]:
    """``(form, lemma)`` of every word line with a lemma; lenient, as the fixtures include broken
    files (BOM, CRLF, wrong column counts): lines without 10 columns are passed over."""
    pairs = []
    with open(path, encoding="utf-8-sig") as lines:
        for line in lines:
            if line.count("\t") == 9 and line[:1].isdigit():
                _, form, lemma, _ = line.split("\t", 3)
                if lemma != "_":
                    pairs.append((form, lemma))
    return pairs


def assert_inverts(paths: list[Path]) -> int:
    """Checks each distinct ``(form, lemma)`` pair once; returns the number of words."""
    words, pairs = 0, set()
    for path in paths:
        annotated = annotated_pairs(path)
        words += len(annotated)
        pairs.update(annotated)
    failures = []
    for form, lemma in pairs:
        script = lemma_script(form, lemma)
        if apply_script(form, script) != lemma or not script.isprintable():
            failures.append((form, lemma, script))
    assert not failures, failures[:10]
    return words


def test_inverts_every_fixture_word():
    paths = sorted(FIXTURES.rglob("*.conllu"))
    assert len(paths) >= 10
    assert assert_inverts(paths) > 50


def test_inverts_every_word_of_the_shared_treebanks():
    """en_ewt train, the dev/test files of four more languages and the whole shared release."""
    if not (SHARED / "data").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{SHARED / 'data'} is missing in CI")
        pytest.skip(f"shared treebanks not found at {SHARED / 'data'}")
    ud = SHARED / "data" / "ud"
    paths = [ud / "en_ewt" / "en_ewt-ud-train.conllu"]
    for code in HELD_OUT:
        held_out = sorted((ud / code).glob(f"{code}-ud-[dt]e[vs]*.conllu"))
        assert held_out, f"no dev or test file of {code} under {ud}"
        paths += held_out
    release = sorted((SHARED / "data" / "ud-release").glob("*/*.conllu"))
    assert release, "no *.conllu under ud-release"
    assert assert_inverts(paths + release) > 500_000


@pytest.mark.parametrize(("pairs", "script"), [
    ([("dogs", "dog"), ("cats", "cat"), ("Dogs", "dog"), ("CATS", "cat")], "↓0;-0+¦-1+"),
    ([("running", "run"), ("sitting", "sit")], "↓0;-0+¦-4+"),
    ([("The", "the"), ("A", "a"), ("This", "this"), ("the", "the")], "↓0;-0+¦-0+"),
    ([("NASA", "NASA"), ("Paris", "Paris"), ("iPhone", "iPhone"), ("U.S.", "U.S.")], IDENTITY),
    ([("NASA's", "NASA"), ("CEO's", "CEO")], "=;-0+¦-2+"),
    ([("WOMEN", "WOMAN"), ("MEN", "MAN")], "↑0;-0+¦-2+an"),
    ([("is", "be"), ("Is", "be"), ("was", "be")], "!be"),
    ([("went", "go"), ("WENT", "go")], "!go"),
])
def test_words_of_one_kind_share_a_script(pairs, script):
    scripts = {lemma_script(form, lemma) for form, lemma in pairs}
    assert len(scripts) == 1, scripts
    assert scripts == {script}
    for form, lemma in pairs:
        assert apply_script(form, script) == lemma


def test_a_shared_script_applies_to_unseen_words():
    assert apply_script("Horses", lemma_script("Dogs", "dog")) == "horse"
    assert apply_script("swimming", lemma_script("running", "run")) == "swim"
    assert apply_script("Berlin", lemma_script("NASA", "NASA")) == "Berlin"
    assert apply_script("ging", lemma_script("ging", "gehen")) == "gehen"
    assert lemma_script("ging", "gehen") == "↓0;-0+¦-3+ehen"
    assert apply_script("gingen", lemma_script("gingen", "gehen")) == "gehen"


def test_identity_copies_any_form():
    assert identity_script() == IDENTITY
    for form in ["a", "NASA", "iPhone", "Straße", "İstanbul", "ǅemal", "¦;=!\\", "👍🏽", "שלום"]:
        assert apply_script(form, IDENTITY) == form


@pytest.mark.parametrize(("form", "script"), [
    ("s", "↓0;-0+¦-1+"),  # deletes the whole form
    ("ab", "↓0;-1+¦-1+"),
    ("ab", "↓0;-3+x¦-0+"),  # deletes more than the form has
    ("ab", "=;-0+¦-5+"),
    ("ab", "↑0¦↓2;-0+¦-0+"),  # a casing run starting past the end
    ("ab", "↑0¦↓-3;-0+¦-0+"),  # counted from the end, before the start
    ("abc", "↓0¦↑1;-0+¦-2+"),  # past the end of the edited word, not of the form
])
def test_none_when_the_script_cannot_apply(form, script):
    assert apply_script(form, script) is None


@pytest.mark.parametrize("script", [
    "", "dog", "↓0", "↓0;-0¦-1+", "↓0;-a+¦-1+", "↓0;-0+¦-1+¦", "↕0;-0+¦-0+", "↑;-0+¦-0+",
    "↓0;-0+\\q¦-0+", "!\\u12", "!\\U00110000", "↓0;-0+x\\¦-0+",
])
def test_a_string_that_is_not_a_script_is_a_value_error(script):
    with pytest.raises(ValueError, match="lemma script"):
        apply_script("words", script)


ODD = ("¦;=!+-↑↓\\ 0123456789\t\n\u200d\u200f\u00a0\u0301\u0308\ud800İiıIßẞǅǆǄKkΣσς\u2126\u212aΩω"
       "שלוםسلام👍🏽🇫🇷ﬁǰŉ")
LETTERS = "abcdefgABCDEFGäöüÄÖÜéÉ"


def random_word(rng: random.Random, low: int, high: int) -> str:
    alphabet = ODD if rng.random() < 0.5 else LETTERS + ODD[:20]
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


def related_lemma(rng: random.Random, form: str) -> str:
    """The form with a prefix and a suffix swapped for random text and some letters' case
    flipped, as inflection does, or an unrelated word."""
    if rng.random() < 0.2:
        return random_word(rng, 0, 6)
    start = rng.randint(0, len(form))
    end = rng.randint(start, len(form))
    middle = "".join(c.swapcase() if rng.random() < 0.2 else c for c in form[start:end])
    return random_word(rng, 0, 3) + middle + random_word(rng, 0, 3)


def test_random_unicode_pairs_invert():
    rng = random.Random(0)
    kinds = set()
    for _ in range(600):
        form = random_word(rng, 1, 12)
        lemma = related_lemma(rng, form)
        script = lemma_script(form, lemma)
        assert script.isprintable() and "\t" not in script and "\n" not in script, script
        assert apply_script(form, script) == lemma, (form, lemma, script)
        kinds.add(script[0] if script[0] in "!=" else "runs")
    assert kinds == {"!", "=", "runs"}
