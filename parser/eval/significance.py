"""Is the UAS/LAS difference of two parses of the same gold file significant?

Both tests take sentences as the unit (the test set is a sample of sentences; words of one
sentence are not independent) and score every resample at the corpus level, summing the counts
of `parser.eval.report.sentence_counts`: UAS = heads correct / words, LAS = heads and universal
relations correct / words, punctuation included, multiword tokens and empty nodes left out,
exactly as ``parser-evaluate`` and the official CoNLL 2018 script score gold-tokenised files.

- ``bootstrap``: the paired bootstrap (Koehn 2004, "Statistical significance tests for machine
  translation evaluation"; Berg-Kirkpatrick, Burkett & Klein 2012, "An empirical investigation of
  statistical significance in NLP", section 2). Draw ``samples`` resamples of the sentences with
  replacement, score both systems on each. ``p`` is the share of resamples in which the system
  that is better on the whole file is not better (``delta <= 0`` in the observed direction):
  Koehn's plain convention, one-sided. (Berg-Kirkpatrick et al. count ``delta* > 2 delta``
  instead, the same test after centring the bootstrap distribution; the two agree when it is
  symmetric, and the plain one gives p = 1, not 0, for identical systems.)
- ``randomization``: approximate randomisation (Noreen 1989; Riezler & Maxwell 2005): swap the two
  systems' counts of each sentence with probability 1/2, ``samples`` times; two-sided
  ``p = (r + 1) / (samples + 1)`` with ``r`` the shuffles whose ``|delta|`` reaches the observed one.

Every result carries the 95% percentile interval of the delta from the paired bootstrap (for
``randomization`` too, drawn with the same seed). Random numbers come from
``numpy.random.default_rng(seed)``, one uniform per sentence and resample, row by row, so results
are reproducible and do not depend on how the work is chunked. Scores are percentages 0..100.

>>> words = np.array([10, 10, 10]); a = np.array([9, 8, 10]); b = np.array([7, 6, 9])
>>> p, ci = paired_bootstrap(words, a[:, None], b[:, None], samples=200, seed=1)
>>> float(p[0]), bool(ci[0, 0] > 0)
(0.0, True)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from parser.eval.report import sentence_counts

__all__ = [
    "METHODS", "Significance", "approximate_randomization", "compare_counts", "compare_files",
    "compare_runs", "comparison_report", "format_comparison", "paired_bootstrap",
]

METHODS = ("bootstrap", "randomization")
_METRICS = ("UAS", "LAS")  # columns 1 and 2 of the sentence counts; column 0 is words
_CHUNK = 2_000_000  # random numbers drawn at a time (16 MB of float64)


@dataclass(frozen=True)
class Significance:
    """One metric of a comparison: scores of systems ``a`` and ``b``, ``delta = a - b``
    (percentage points), the ``p_value`` of ``method`` (``bootstrap``: one-sided, that the better
    system is better; ``randomization``: two-sided), the ``samples`` and ``seed`` that drew it, and
    ``ci``, the 95% paired-bootstrap interval of ``delta``."""

    metric: str
    a: float
    b: float
    delta: float
    p_value: float
    method: str
    samples: int
    seed: int
    ci: tuple[float, float]


def paired_bootstrap(words: np.ndarray, correct_a: np.ndarray, correct_b: np.ndarray, *,
                     samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(p [M], ci [M, 2])`` of the paired bootstrap over sentences.

    words: ``[S]`` words per sentence; correct_a, correct_b: ``[S, M]`` correct words of M metrics.
    Resample ``r`` takes sentence ``min(floor(u * S), S - 1)`` for each of its S uniforms ``u``.
    """
    words, diff = _check(words, correct_a, correct_b, samples=samples, seed=seed)
    observed = diff.sum(0)  # [M]
    direction = np.where(observed >= 0, 1, -1)
    n = len(words)
    rng = np.random.default_rng(seed)
    deltas = np.empty((samples, diff.shape[1]))
    not_better = np.zeros(diff.shape[1], dtype=np.int64)
    # [S, 1 + M] as float64 for BLAS; every sum stays an integer far below 2**53, so exact.
    columns = np.column_stack([words, diff]).astype(np.float64)
    for start, rows in _chunks(samples, n):
        picked = np.minimum((rng.random((rows, n)) * n).astype(np.int64), n - 1)  # [rows, S]
        # times each sentence is drawn, [rows, S]: a matrix product then sums the resamples
        drawn = np.bincount((picked + n * np.arange(rows)[:, None]).ravel(), minlength=rows * n)
        sums = np.rint(drawn.reshape(rows, n).astype(np.float64) @ columns).astype(np.int64)
        resampled_words, resampled_diff = sums[:, 0], sums[:, 1:]  # [rows], [rows, M]
        not_better += (resampled_diff * direction <= 0).sum(0)  # integers: the sign test is exact
        deltas[start : start + rows] = _percent(resampled_diff, resampled_words[:, None])
    ci = np.percentile(deltas, [2.5, 97.5], axis=0).T
    return not_better / samples, ci


def approximate_randomization(words: np.ndarray, correct_a: np.ndarray, correct_b: np.ndarray, *,
                              samples: int, seed: int) -> np.ndarray:
    """``p [M]``, two-sided, of approximate randomisation over sentences (shapes as
    `paired_bootstrap`); sentence ``i`` of shuffle ``r`` is swapped when its uniform is < 1/2."""
    words, diff = _check(words, correct_a, correct_b, samples=samples, seed=seed)
    observed = np.abs(diff.sum(0))  # the word total is fixed, so |delta| compares as |diff sum|
    n = len(words)
    rng = np.random.default_rng(seed)
    reached = np.zeros(diff.shape[1], dtype=np.int64)
    diff_float = diff.astype(np.float64)  # for BLAS; integer sums far below 2**53 stay exact
    for _, rows in _chunks(samples, n):
        swapped = (rng.random((rows, n)) < 0.5).astype(np.float64)  # [rows, S]
        shuffled = diff.sum(0) - 2 * np.rint(swapped @ diff_float).astype(np.int64)  # [rows, M]
        reached += (np.abs(shuffled) >= observed).sum(0)
    return (reached + 1) / (samples + 1)


def compare_counts(counts_a: np.ndarray, counts_b: np.ndarray, *, method: str = "bootstrap",
                   samples: int = 10_000, seed: int = 1) -> dict[str, Significance]:
    """UAS and LAS `Significance` of two systems' sentence counts ``[S, 3]`` (words, heads correct,
    heads and relations correct; see `parser.eval.report.sentence_counts`), sentence i of one
    paired with sentence i of the other."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}: expected one of {', '.join(METHODS)}")
    counts_a, counts_b = np.asarray(counts_a, dtype=np.int64), np.asarray(counts_b, dtype=np.int64)
    if counts_a.shape != counts_b.shape or counts_a.ndim != 2 or counts_a.shape[1] != 3:
        raise ValueError(f"counts: expected two [S, 3] arrays, got {counts_a.shape} and {counts_b.shape}")
    if not np.array_equal(counts_a[:, 0], counts_b[:, 0]):
        raise ValueError("counts: the two systems scored different words (not the same gold file?)")
    words, correct_a, correct_b = counts_a[:, 0], counts_a[:, 1:], counts_b[:, 1:]
    p, ci = paired_bootstrap(words, correct_a, correct_b, samples=samples, seed=seed)
    if method == "randomization":
        p = approximate_randomization(words, correct_a, correct_b, samples=samples, seed=seed)
    total = int(words.sum())
    results = {}
    for m, name in enumerate(_METRICS):
        a, b = _percent(correct_a[:, m].sum(), total), _percent(correct_b[:, m].sum(), total)
        results[name] = Significance(
            metric=name, a=a, b=b, delta=_percent(correct_a[:, m].sum() - correct_b[:, m].sum(), total),
            p_value=float(p[m]), method=method, samples=samples, seed=seed,
            ci=(float(ci[m, 0]), float(ci[m, 1])),
        )
    return results


def compare_files(gold: str | os.PathLike, pred_a: str | os.PathLike, pred_b: str | os.PathLike, *,
                  method: str = "bootstrap", samples: int = 10_000, seed: int = 1) -> dict[str, Significance]:
    """``{"UAS": Significance, "LAS": Significance}`` of prediction files ``pred_a`` and ``pred_b``
    of the ``gold`` file (gold tokenisation). A prediction whose sentences or words differ from the
    gold file's raises ValueError naming it and the sentence."""
    return compare_counts(sentence_counts(gold, pred_a).numpy(), sentence_counts(gold, pred_b).numpy(),
                          method=method, samples=samples, seed=seed)


def compare_runs(gold: str | os.PathLike, preds_a: Sequence[str | os.PathLike],
                 preds_b: Sequence[str | os.PathLike], *, method: str = "bootstrap",
                 samples: int = 10_000, seed: int = 1) -> dict[str, Significance]:
    """Two arms trained with several seeds each (``preds_a[s]``, ``preds_b[s]``: the prediction
    files of seed s, all of the same ``gold`` file); ``a`` and ``b`` are the arms' mean scores over
    seeds (every seed scores the same words).

    Each gold sentence stays one unit: its counts are summed over the seeds of an arm before
    resampling or swapping. Concatenating the seeds' sentences as if they were different sentences
    would treat the K parses of one sentence as K independent draws from the population of
    sentences and shrink the interval about sqrt(K)-fold; testing each seed and combining the
    p-values (Fisher, Stouffer) assumes independent tests, which seeds scored on the same
    sentences are not. The test conditions on the trained models: it asks whether the arms' mean
    scores differ beyond the sampling of test sentences, not how the seeds vary.
    """
    if len(preds_a) != len(preds_b) or not preds_a:
        raise ValueError(f"compare_runs: needs the same number of runs per arm (one per seed), "
                         f"got {len(preds_a)} and {len(preds_b)}")
    counts_a = sum(sentence_counts(gold, path).numpy() for path in preds_a)
    counts_b = sum(sentence_counts(gold, path).numpy() for path in preds_b)
    return compare_counts(counts_a, counts_b, method=method, samples=samples, seed=seed)


def comparison_report(gold: str | os.PathLike, pred_a: str | os.PathLike, pred_b: str | os.PathLike,
                      *, method: str, samples: int, seed: int) -> dict:
    """`compare_files` as a JSON-ready dict: the three paths, sentence and word counts, and per
    metric the fields of `Significance`."""
    counts_a, counts_b = sentence_counts(gold, pred_a).numpy(), sentence_counts(gold, pred_b).numpy()
    results = compare_counts(counts_a, counts_b, method=method, samples=samples, seed=seed)
    return {
        "gold": str(gold), "a": str(pred_a), "b": str(pred_b), "method": method, "samples": samples,
        "seed": seed, "n_sentences": len(counts_a), "n_words": int(counts_a[:, 0].sum()),
        **{name: asdict(result) for name, result in results.items()},
    }


def format_comparison(report: dict) -> str:
    """The table ``parser-evaluate ... compare=`` prints for a `comparison_report`."""
    sided = "one-sided" if report["method"] == "bootstrap" else "two-sided"
    lines = [f"A: {report['a']}", f"B: {report['b']}",
             f"gold: {report['gold']} ({report['n_sentences']} sentences, {report['n_words']} words)",
             f"metric       A        B    A-B   95% CI (bootstrap)   p ({report['method']}, {sided})"]
    for name in _METRICS:
        r = report[name]
        lines.append(f"{name:6} {r['a']:7.2f}  {r['b']:7.2f}  {r['delta']:+6.2f}   "
                     f"[{r['ci'][0]:+6.2f}, {r['ci'][1]:+6.2f}]    {r['p_value']:.4f}")
    lines.append(f"{report['samples']} samples, seed {report['seed']}, sentences resampled as units")
    return "\n".join(lines)


# -- helpers ------------------------------------------------------------------------------------

def _check(words, correct_a, correct_b, *, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(words [S], correct_a - correct_b [S, M])`` as int64, after checking shapes and options."""
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples={samples!r}: expected a positive integer")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r}: expected a non-negative integer")
    words, correct_a, correct_b = (np.asarray(x, dtype=np.int64) for x in (words, correct_a, correct_b))
    if words.ndim != 1 or correct_a.ndim != 2 or correct_a.shape != correct_b.shape or correct_a.shape[:1] != words.shape:
        raise ValueError(f"counts: words {words.shape}, correct_a {correct_a.shape} and correct_b "
                         f"{correct_b.shape} must be [S], [S, M], [S, M]")
    if len(words) == 0 or int(words.sum()) == 0:
        raise ValueError("counts: no scored words; nothing to compare")
    return words, correct_a - correct_b


def _chunks(samples: int, n: int):
    """``(first resample, rows)`` blocks of at most about `_CHUNK` random numbers."""
    step = max(1, _CHUNK // n)
    for start in range(0, samples, step):
        yield start, min(step, samples - start)


def _percent(part, whole):
    """``100 * (part / whole)`` elementwise (the official script's order); 0 where ``whole`` is 0."""
    part, whole = np.asarray(part, dtype=np.float64), np.asarray(whole, dtype=np.float64)
    out = 100 * np.divide(part, whole, out=np.zeros(np.broadcast(part, whole).shape), where=whole > 0)
    return float(out) if out.ndim == 0 else out
