"""Significance of UAS/LAS differences: the per-sentence counts reproduce the scorer and the
official script, the two tests agree with plain-Python versions and behave at their extremes, and
``parser-evaluate compare=`` runs end to end.

The fixtures are built from tests/fixtures/tiny-{dev,train}.conllu (multiword tokens and an empty
node included): a 60-sentence gold file, a system ``a`` with one wrong head in every sentence and
a system ``b`` with a's error plus one more head and one relation wrong in every sentence (so ``a``
is better on every sentence), both still single-rooted trees.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import conllu
import numpy as np
import pytest

from parser.cli.evaluate import main as evaluate_main
from parser.eval import significance
from parser.eval.official import official_evaluation
from parser.eval.report import file_report, sentence_counts
from parser.eval.significance import (
    Significance,
    approximate_randomization,
    compare_counts,
    compare_files,
    compare_runs,
    paired_bootstrap,
)
from tests.eval.conftest import descendants

METHODS = ("bootstrap", "randomization")


# -- fixtures -----------------------------------------------------------------------------------

def _words(sentence) -> list:
    return [t for t in sentence if isinstance(t["id"], int)]


def _reattach(sentence, rng: random.Random, *, gold) -> None:
    """Move one word whose head is still right (not the root word) to another head that keeps
    the tree a single-rooted tree."""
    words = _words(sentence)
    heads = {t["id"]: t["head"] for t in words}
    gold_heads = {t["id"]: t["head"] for t in _words(gold)}
    candidates = [t for t in words if t["head"] != 0 and t["head"] == gold_heads[t["id"]]]
    rng.shuffle(candidates)
    for token in candidates:
        allowed = sorted(set(heads) - descendants(token["id"], heads) - {token["head"]})
        if allowed:
            token["head"] = rng.choice(allowed)
            return
    raise AssertionError(f"no word of {sentence.metadata['sent_id']} can be re-attached")


def _serialise(sentences, path: Path) -> Path:
    path.write_text("".join(s.serialize() for s in sentences), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(fixtures, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("significance")
    source = [fixtures / "tiny-dev.conllu", fixtures / "tiny-train.conllu"]
    pool = [s for path in source for s in conllu.parse(path.read_text(encoding="utf-8"))]
    gold = [conllu.parse(pool[i % len(pool)].serialize())[0] for i in range(60)]
    for number, sentence in enumerate(gold, start=1):
        sentence.metadata = {"sent_id": f"sig-{number:02}", "text": sentence.metadata["text"]}
    gold_path = _serialise(gold, folder / "gold.conllu")

    rng = random.Random(19)
    a = conllu.parse(gold_path.read_text(encoding="utf-8"))
    for sentence, g in zip(a, gold):
        _reattach(sentence, rng, gold=g)
    a_path = _serialise(a, folder / "a.conllu")
    b = conllu.parse(a_path.read_text(encoding="utf-8"))
    for sentence, g in zip(b, gold):
        _reattach(sentence, rng, gold=g)
        word = next(t for t in _words(sentence) if t["deprel"].split(":")[0] != "dep")
        word["deprel"] = "dep"  # a second LAS error (or the same word's: LAS still drops by one)
        last = _words(sentence)[-1]
        base, _, subtype = last["deprel"].partition(":")
        last["deprel"] = base if subtype else f"{base}:sig"  # subtype only: costs nothing
    b_path = _serialise(b, folder / "b.conllu")

    lines = a_path.read_text(encoding="utf-8").split("\n")
    start = lines.index("# sent_id = sig-17")
    word = next(i for i in range(start, len(lines)) if lines[i].startswith("3\t"))
    columns = lines[word].split("\t")
    columns[1] = "mistokenised"
    lines[word] = "\t".join(columns)
    misaligned = folder / "misaligned.conllu"
    misaligned.write_text("\n".join(lines), encoding="utf-8")
    short = _serialise(a[:59], folder / "short.conllu")
    return {"gold": gold_path, "a": a_path, "b": b_path, "misaligned": misaligned, "short": short}


# -- plain-Python references ---------------------------------------------------------------------

def _percentile(sorted_values: list[float], q: float) -> float:
    position = q / 100 * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def slow_bootstrap(words, a, b, *, samples: int, seed: int) -> tuple[float, tuple[float, float]]:
    """One metric, one resample and one sentence at a time, the same uniforms in the same order."""
    rng = np.random.default_rng(seed)
    n = len(words)
    direction = 1 if sum(a) - sum(b) >= 0 else -1
    not_better, deltas = 0, []
    for _ in range(samples):
        total = diff = 0
        for _ in range(n):
            i = min(int(rng.random() * n), n - 1)
            total += int(words[i])
            diff += int(a[i]) - int(b[i])
        not_better += diff * direction <= 0
        deltas.append(100 * (diff / total) if total else 0.0)
    deltas.sort()
    return not_better / samples, (_percentile(deltas, 2.5), _percentile(deltas, 97.5))


def slow_randomization(words, a, b, *, samples: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    observed = abs(sum(a) - sum(b))
    reached = 0
    for _ in range(samples):
        diff = 0
        for x, y in zip(a, b):
            diff += int(y) - int(x) if rng.random() < 0.5 else int(x) - int(y)
        reached += abs(diff) >= observed
    return (reached + 1) / (samples + 1)


# -- counts ---------------------------------------------------------------------------------------

def test_sentence_counts_reproduce_the_official_script_on_ewt(corrupted_dev):
    counts = sentence_counts(corrupted_dev.gold, corrupted_dev.pred)
    assert counts.shape == (len(corrupted_dev.gold_sentences), 3)
    words, heads, labeled = (int(c) for c in counts.sum(0))
    assert (words, heads, labeled) == (
        corrupted_dev.words, corrupted_dev.head_correct, corrupted_dev.labeled_correct
    )
    official = official_evaluation(corrupted_dev.gold, corrupted_dev.pred)
    assert (official["UAS"].gold_total, official["UAS"].correct, official["LAS"].correct) == (
        words, heads, labeled
    )
    # the percentages too, to the last bit, as significance reports them (b: the gold file itself)
    perfect = counts.numpy().copy()
    perfect[:, 1:] = perfect[:, :1]
    result = compare_counts(counts.numpy(), perfect, samples=10)
    assert (result["UAS"].a, result["LAS"].a) == (official["UAS"].f1, official["LAS"].f1)
    assert (result["UAS"].b, result["LAS"].b) == (100.0, 100.0)


def test_sentence_counts_reproduce_the_scorer_on_the_fixtures(files):
    for system in ("a", "b"):
        counts = sentence_counts(files["gold"], files[system]).numpy()
        assert counts.shape == (60, 3) and (counts[:, 0] > 0).all()
        report = file_report(files["gold"], files[system])
        words, heads, labeled = counts.sum(0).tolist()
        assert words == report["n_words"]
        assert 100 * (heads / words) == report["uas"] == report["official"]["UAS"]
        assert 100 * (labeled / words) == report["las"] == report["official"]["LAS"]
    a = sentence_counts(files["gold"], files["a"]).numpy()
    b = sentence_counts(files["gold"], files["b"]).numpy()
    assert (a[:, 0] - a[:, 1] == 1).all()  # one wrong head per sentence, as built
    assert (a[:, 1] > b[:, 1]).all() and (a[:, 2] > b[:, 2]).all()


def test_misaligned_files_name_the_file_and_the_sentence(files):
    with pytest.raises(ValueError, match=re.escape(f"{files['misaligned']}: sentence 17 (sent_id sig-17)")):
        compare_files(files["gold"], files["a"], files["misaligned"])
    with pytest.raises(ValueError, match="tokenisation differs"):
        compare_files(files["gold"], files["misaligned"], files["a"])
    with pytest.raises(ValueError, match=re.escape(f"{files['short']} has 59 sentences") + ".*sentence 60"):
        compare_files(files["gold"], files["a"], files["short"])
    with pytest.raises(ValueError, match="same number of runs per arm"):
        compare_runs(files["gold"], [files["a"]], [files["b"], files["b"]])


# -- the tests --------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_identical_systems_differ_by_nothing(files, method):
    result = compare_files(files["gold"], files["a"], files["a"], method=method, samples=500)
    for metric in ("UAS", "LAS"):
        r = result[metric]
        assert isinstance(r, Significance) and r.metric == metric and r.method == method
        assert (r.delta, r.p_value, r.ci) == (0.0, 1.0, (0.0, 0.0))
        assert r.a == r.b


@pytest.mark.parametrize("method", METHODS)
def test_better_on_every_sentence_is_significant(files, method):
    result = compare_files(files["gold"], files["a"], files["b"], method=method, samples=2000, seed=7)
    reverse = compare_files(files["gold"], files["b"], files["a"], method=method, samples=2000, seed=7)
    for metric in ("UAS", "LAS"):
        r, back = result[metric], reverse[metric]
        assert r.delta > 0 and r.p_value < 0.01 and 0 < r.ci[0] <= r.delta <= r.ci[1]
        assert r.delta == pytest.approx(r.a - r.b, abs=1e-12)
        # swapping the systems negates the delta and its interval, and keeps p
        assert (back.a, back.b, back.p_value) == (r.b, r.a, r.p_value)
        assert back.delta == -r.delta and back.ci == pytest.approx((-r.ci[1], -r.ci[0]), abs=1e-12)
    if method == "randomization":  # no shuffle reaches the observed difference: p = 1 / (R + 1)
        assert result["UAS"].p_value == 1 / 2001
    else:  # a is better in every resample
        assert result["UAS"].p_value == 0.0


def _mixed(seed: int = 0, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Two systems each better on some sentences: p strictly between 0 and 1."""
    rng = np.random.default_rng(seed)
    words = rng.integers(1, 30, n)
    a = np.column_stack([words, rng.binomial(words, 0.85), rng.binomial(words, 0.8)])
    b = np.column_stack([words, rng.binomial(words, 0.83), rng.binomial(words, 0.78)])
    b[:, 2] = np.minimum(b[:, 2], b[:, 1])
    a[:, 2] = np.minimum(a[:, 2], a[:, 1])
    return a, b


@pytest.mark.parametrize("method", METHODS)
def test_reproducible_with_the_seed(method):
    a, b = _mixed()
    first = compare_counts(a, b, method=method, samples=3000, seed=5)
    assert compare_counts(a, b, method=method, samples=3000, seed=5) == first
    other = compare_counts(a, b, method=method, samples=3000, seed=6)
    assert 0 < first["UAS"].p_value < 1
    assert other["UAS"].p_value != first["UAS"].p_value and other["UAS"].delta == first["UAS"].delta


def test_vectorised_tests_equal_the_plain_python_ones(monkeypatch):
    a, b = _mixed(seed=3, n=9)
    words = a[:, 0]
    p, ci = paired_bootstrap(words, a[:, 1:], b[:, 1:], samples=400, seed=11)
    p_swap = approximate_randomization(words, a[:, 1:], b[:, 1:], samples=400, seed=11)
    for m in range(2):
        slow_p, slow_ci = slow_bootstrap(words, a[:, 1 + m], b[:, 1 + m], samples=400, seed=11)
        assert p[m] == slow_p
        assert tuple(ci[m]) == pytest.approx(slow_ci, rel=1e-12, abs=1e-12)
        assert p_swap[m] == slow_randomization(words, a[:, 1 + m], b[:, 1 + m], samples=400, seed=11)
    # the same numbers whatever the chunking (here 2 resamples at a time)
    monkeypatch.setattr(significance, "_CHUNK", 2 * len(words))
    p_chunked, ci_chunked = paired_bootstrap(words, a[:, 1:], b[:, 1:], samples=400, seed=11)
    assert (p_chunked == p).all() and (ci_chunked == ci).all()
    assert (approximate_randomization(words, a[:, 1:], b[:, 1:], samples=400, seed=11) == p_swap).all()


def test_bad_options_and_counts():
    a, b = _mixed()
    with pytest.raises(ValueError, match="method='permutation'"):
        compare_counts(a, b, method="permutation")
    with pytest.raises(ValueError, match="samples=0"):
        compare_counts(a, b, samples=0)
    with pytest.raises(ValueError, match="seed=-1"):
        compare_counts(a, b, seed=-1)
    with pytest.raises(ValueError, match="different words"):
        compare_counts(a, np.column_stack([b[:, 0] + 1, b[:, 1:]]))
    with pytest.raises(ValueError, match="no scored words"):
        compare_counts(np.zeros((3, 3), dtype=int), np.zeros((3, 3), dtype=int))


def test_several_seeds_keep_each_sentence_one_unit(files):
    single = compare_files(files["gold"], files["a"], files["b"], samples=1000)
    # two identical seeds per arm: every count doubles, no ratio or sign changes
    assert compare_runs(files["gold"], [files["a"]] * 2, [files["b"]] * 2, samples=1000) == single
    # arms that hold the same runs in another order: the same sums, no difference
    mixed = compare_runs(files["gold"], [files["a"], files["b"]], [files["b"], files["a"]],
                         method="randomization", samples=500)
    assert (mixed["LAS"].delta, mixed["LAS"].p_value) == (0.0, 1.0)
    assert mixed["UAS"].a == pytest.approx((single["UAS"].a + single["UAS"].b) / 2, abs=1e-12)


# -- command line ---------------------------------------------------------------------------------

def test_parser_evaluate_compare_end_to_end(files, tmp_path, capsys):
    out = tmp_path / "a-vs-b.json"
    argv = [f"gold={files['gold']}", f"pred={files['a']}", f"compare={files['b']}",
            "test=randomization", "samples=999", "seed=3", f"metrics={out}"]
    assert evaluate_main(argv) == 0
    printed = capsys.readouterr().out
    expected = compare_files(files["gold"], files["a"], files["b"], method="randomization",
                             samples=999, seed=3)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["n_sentences"] == 60 and report["method"] == "randomization"
    for metric, r in expected.items():
        assert report[metric]["p_value"] == r.p_value == 1 / 1000
        assert (report[metric]["a"], report[metric]["b"], tuple(report[metric]["ci"])) == (r.a, r.b, r.ci)
        assert re.search(rf"^{metric} +{r.a:.2f} +{r.b:.2f} +\+{r.delta:.2f} .* 0\.0010$", printed, re.MULTILINE)
    assert "p (randomization, two-sided)" in printed and f"metrics: {out}" in printed

    # defaults: bootstrap, 10000 samples, seed 1, nothing written
    assert evaluate_main([f"gold={files['gold']}", f"pred={files['a']}", f"compare={files['a']}"]) == 0
    printed = capsys.readouterr().out
    assert "p (bootstrap, one-sided)" in printed and "10000 samples, seed 1" in printed
    assert "metrics: not written" in printed


@pytest.mark.parametrize("extra, message", [
    (["compare={misaligned}"], "{misaligned}: sentence 17 (sent_id sig-17)"),
    (["compare={b}", "samples=many"], "samples=many: expected an integer"),
    (["compare={b}", "test=t-test"], "test=t-test: expected one of bootstrap, randomization"),
    (["compare={b}", "seed=-2"], "seed=-2: expected a non-negative integer"),
    (["compare={b}", "metrics=beside"], "metrics=beside: with compare= give metrics=<file>"),
    (["seed=2"], "go with compare=<file>"),
    (["compare={b}", "tagger={a}"], "not with tagger="),
])
def test_parser_evaluate_compare_errors(files, capsys, extra, message):
    argv = [f"gold={files['gold']}", f"pred={files['a']}", *(arg.format(**files) for arg in extra)]
    assert evaluate_main(argv) == 2
    assert message.format(**files) in capsys.readouterr().err
