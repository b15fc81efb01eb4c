"""``experiments/ud_release_table.py`` and :mod:`parser.eval.release_table`: a sweep's
``result.json`` files beside UDPipe 1's json and UDPipe 2's published figures, a table per group
of metrics, the differences with UDPipe 1, blanks for what an older json lacks."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from parser.eval.official import METRICS
from parser.eval.release_table import (
    DIFFERENCE_METRICS,
    METRIC_GROUPS,
    comparison_tables,
    difference_table,
    release_table,
)

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location(
    "ud_release_table", REPO / "experiments" / "ud_release_table.py")
ud_release_table = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ud_release_table)


def _every_metric(base: float) -> dict[str, float]:
    """A raw-text row of every official metric: Tokens base, Sentences base + 1, ..."""
    return {metric: base + i for i, metric in enumerate(METRICS)}


def _ours(code: str, sentences: int, raw: dict, gold: dict | None = None) -> dict:
    return {"treebank": code, "language": "X", "recipe": "release_cpu",
            "train_sentences": sentences, "raw": raw,
            "gold_tokens": gold or {"UAS": 70.0, "LAS": 60.0}, "train_seconds": 600,
            "pipeline": f"{code}.pipeline"}


def _cells(table: str, label: str) -> list[str]:
    """The cells after the first of the row whose first cell is ``label``."""
    [row] = [line for line in table.splitlines() if line.startswith(f"| {label} |")]
    return [cell.strip() for cell in row.strip().strip("|").split("|")][1:]


def _headings(table: str) -> list[str]:
    return _cells(table, "treebank")


def _section(text: str, title: str) -> str:
    """The markdown table under the line ``title``."""
    return text.split(title, 1)[1].strip().split("\n\n", 1)[0]


def test_every_metric_has_a_column_per_system_and_groups_cover_the_official_rows():
    grouped = [metric for _, metrics in METRIC_GROUPS for metric in metrics]
    assert sorted(grouped) == sorted(METRICS[METRICS.index("UPOS"):])  # each once, UPOS on
    systems = {"ours": {"xx_a": _every_metric(50.0)}, "UDPipe 1": {"xx_a": _every_metric(40.0)},
               "UDPipe 2": {}}
    text = comparison_tables(systems, train_sentences={"xx_a": 500})
    for title, metrics in METRIC_GROUPS:
        table = _section(text, f"{title[:1].upper()}{title[1:]}, from raw text (F1):")
        assert _headings(table) == ["train sentences"] + [
            f"{m} {s}" for m in metrics for s in ("ours", "UDPipe 1", "UDPipe 2")]
        cells = _cells(table, "xx_a")
        for i, metric in enumerate(metrics):
            index = METRICS.index(metric)
            assert cells[1 + 3 * i: 4 + 3 * i] == [f"{50.0 + index:.2f}", f"{40.0 + index:.2f}", ""]


def test_the_macro_average_takes_treebanks_of_400_sentences_and_is_blank_when_one_lacks_it():
    systems = {"ours": {"xx_a": {"LAS": 80.0, "MLAS": 70.0}, "xx_b": {"LAS": 60.0, "MLAS": 50.0},
                        "xx_small": {"LAS": 10.0, "MLAS": 5.0}},
               "base": {"xx_a": {"LAS": 70.0, "MLAS": 65.0}, "xx_b": {"LAS": 50.0},
                        "xx_small": {"LAS": 20.0}}}
    sentences = {"xx_a": 400, "xx_b": 1_200, "xx_small": 399}
    table = comparison_tables(systems, train_sentences=sentences, groups=[("x", ["LAS", "MLAS"])])
    average = "macro average, >= 400 training sentences (2)"
    assert _cells(table, "xx_b") == ["1,200", "60.00", "50.00", "50.00", ""]
    assert _cells(table, average) == ["", "70.00", "60.00", "60.00", ""]  # xx_small left out
    differences = difference_table(systems["ours"], systems["base"], train_sentences=sentences,
                                   baseline_name="base", metrics=["LAS", "MLAS"])
    assert _headings(differences) == ["train sentences", "LAS, ours - base", "MLAS, ours - base"]
    assert _cells(differences, "xx_small") == ["399", "-10.00", ""]
    assert _cells(differences, average) == ["", "+10.00", ""]  # xx_b has no base MLAS
    assert _cells(comparison_tables(systems, train_sentences=sentences, groups=[("x", ["LAS"])],
                                    min_sentences=1), "macro average, >= 1 training sentences (3)") \
        == ["", "50.00", "46.67"]


def test_the_script_reads_new_and_old_json_and_places_udpipe_2_beside_each_row(tmp_path):
    sweep, udpipe = tmp_path / "release", tmp_path / "udpipe"
    old_rows = ("Tokens", "Sentences", "Words", "UPOS", "UAS", "LAS")  # before every metric
    results = [_ours("hu_szeged", 910, _every_metric(60.0),
                     {m: 70.0 for m in METRICS[3:]}),
               _ours("el_gdt", 1_662, {m: 80.0 for m in old_rows}),
               _ours("kk_ktb", 31, _every_metric(20.0))]
    baselines = [{"code": "hu_szeged", "train_seconds": 1, "raw": _every_metric(50.0),
                  "gold_tokens": {m: 55.0 for m in METRICS[3:]}},
                 {"code": "el_gdt", "train_seconds": 1, "raw": {m: 75.0 for m in old_rows},
                  "gold_tokens": {"UPOS": 90.0, "UAS": 80.0, "LAS": 76.0}},
                 {"code": "en_pud", "skipped": "no train file"}]
    for result in results:
        (sweep / result["treebank"]).mkdir(parents=True)
        (sweep / result["treebank"] / "result.json").write_text(json.dumps(result))
    udpipe.mkdir()
    for baseline in baselines:
        (udpipe / f"{baseline['code']}.json").write_text(json.dumps(baseline))
    text = ud_release_table.table([sweep], udpipe)
    # the sweep's own table comes first, as before, with UDPipe 1's and CoNLL 2018's LAS
    first = text.split("\n\n", 1)[0]
    assert first.splitlines()[0] == release_table(results, skipped={}).splitlines()[0][:-2] + (
        " | UDPipe 1 raw LAS | UDPipe 1 gold-token LAS | CoNLL 2018 best LAS (UD 2.2) |")
    assert _cells(first, "hu_szeged")[-3:] == [f"{50.0 + METRICS.index('LAS'):.2f}", "55.00",
                                               "82.66"]
    published = ud_release_table.UDPIPE2_RAW
    lemmas = _section(text, "Features and lemmas, from raw text (F1):")
    # hu_szeged: ours, UDPipe 1 and UDPipe 2's published Lemmas (95.11, UD 2.17)
    index = METRICS.index("Lemmas")
    assert _cells(lemmas, "hu_szeged")[4:7] == [f"{60.0 + index:.2f}", f"{50.0 + index:.2f}",
                                                f"{published['hu_szeged']['Lemmas']:.2f}"]
    assert _cells(lemmas, "el_gdt")[4:7] == ["", "", "96.08"]  # old json: blank
    assert _cells(lemmas, "kk_ktb")[4:7] == [f"{20.0 + index:.2f}", "", ""]  # no UDPipe 1, 2
    tags = _section(text, "Tags, from raw text (F1):")
    assert _cells(tags, "hu_szeged")[4:7] == ["64.00", "54.00", ""]  # XPOS: UDPipe 2 publishes —
    # averaged: el_gdt and hu_szeged (kk_ktb has 31 sentences); el_gdt's old json has no Lemmas
    average = "macro average, >= 400 training sentences (2)"
    assert _cells(lemmas, average)[4:7] == ["", "", f"{(95.11 + 96.08) / 2:.2f}"]
    attachment = _section(text, "Attachment, from raw text (F1):")
    las = METRICS.index("LAS")
    assert _cells(attachment, average)[4:7] == [
        f"{(60.0 + las + 80.0) / 2:.2f}", f"{(50.0 + las + 75.0) / 2:.2f}",
        f"{(84.56 + 91.38) / 2:.2f}"]
    differences = _section(text, "Differences with UDPipe 1, from raw text (F1 points):")
    assert _headings(differences) == ["train sentences", *(f"{m}, ours - UDPipe 1"
                                                           for m in DIFFERENCE_METRICS)]
    assert _cells(differences, "hu_szeged") == ["910"] + ["+10.00"] * len(DIFFERENCE_METRICS)
    assert _cells(differences, "el_gdt") == ["1,662", "", "", "", "", "+5.00"]
    assert _cells(differences, "kk_ktb") == ["31"] + [""] * len(DIFFERENCE_METRICS)
    assert _cells(differences, average) == ["", "", "", "", "", "+7.50"]


def test_udpipe_2_figures_are_rows_of_its_published_table():
    assert set(ud_release_table.UDPIPE2_RAW) == {"af_afribooms", "el_gdt", "en_ewt", "hu_szeged",
                                                 "mr_ufal", "mt_mudt", "ta_ttb"}  # no kk_ktb
    for code, row in ud_release_table.UDPIPE2_RAW.items():
        assert set(row) <= set(METRICS) - {"Tokens", "CLAS"}, code  # not published
        assert all(0 < value <= 100 for value in row.values()), code
        assert row["LAS"] <= row["UAS"] and row["MLAS"] <= row["LAS"], code
    assert "XPOS" not in ud_release_table.UDPIPE2_RAW["hu_szeged"]  # published as —
    assert "Lemmas" not in ud_release_table.UDPIPE2_RAW["mt_mudt"]


def test_sweeps_are_merged_and_a_rescored_treebank_replaces_its_raw_scores(tmp_path):
    first, second, rescore = tmp_path / "one", tmp_path / "two", tmp_path / "rescored"
    for sweep, code, base in ((first, "hu_szeged", 60.0), (second, "ta_ttb", 30.0)):
        (sweep / code).mkdir(parents=True)
        (sweep / code / "result.json").write_text(json.dumps(
            _ours(code, 910, _every_metric(base), {m: base for m in METRICS[3:]})))
    (second / "skipped.json").write_text(json.dumps({"hu_szeged": "killed", "en_pud": "no train"}))
    (rescore / "ta_ttb-eval").mkdir(parents=True)
    (rescore / "ta_ttb-eval" / "ta_ttb-test.raw.metrics.json").write_text(json.dumps(
        {"f1": _every_metric(40.0)}))
    udpipe = tmp_path / "udpipe"
    udpipe.mkdir()
    text = ud_release_table.table([first, second], udpipe, rescore)
    lemmas = _section(text, "Features and lemmas, from raw text (F1):")
    index = METRICS.index("Lemmas")
    assert _cells(lemmas, "hu_szeged")[4] == f"{60.0 + index:.2f}"  # as the sweep scored it
    assert _cells(lemmas, "ta_ttb")[4] == f"{40.0 + index:.2f}"  # the rescored figure
    assert "en_pud" in text and "killed" not in text  # hu_szeged ran in the other sweep


def test_two_recipes_are_compared_treebank_by_treebank_with_their_parser_minutes(tmp_path):
    lean, grid = tmp_path / "lean", tmp_path / "grid"
    for sweep, base, seconds in ((lean, 61.0, 600), (grid, 60.0, 1500)):
        for code in ("hu_szeged", "kk_ktb"):
            (sweep / code / "parser").mkdir(parents=True)
            result = {**_ours(code, 910 if code == "hu_szeged" else 31, _every_metric(base)),
                      "pipeline": str(sweep / code / f"{code}.pipeline")}
            (sweep / code / "result.json").write_text(json.dumps(result))
            (sweep / code / "parser" / "done.json").write_text(json.dumps({"seconds": seconds}))
    text = ud_release_table.against_table([lean], [grid], rescore=None, other_rescore=None,
                                          name="release_cpu")
    differences, minutes = text.split("| treebank | parser training min", 1)
    assert _cells(differences, "hu_szeged")[0] == "910"
    assert _cells(differences, "hu_szeged")[1:] == ["+1.00"] * 7  # UPOS ... BLEX, ours - theirs
    assert _cells(differences, "macro average, >= 400 training sentences (1)")[1:] == ["+1.00"] * 7
    assert _cells(minutes, "kk_ktb") == ["10.0", "25.0"]


def test_udpipe_figures_read_back_from_a_table_it_wrote(tmp_path):
    """A table re-made after UDPipe 1's run folder is gone reads its figures from the results file
    (every ``<metric> UDPipe 1`` column, the raw and gold-token LAS of the first table), and makes
    the same comparison as from the jsons."""
    sweep, udpipe = tmp_path / "sweep", tmp_path / "udpipe"
    results = [_ours("hu_szeged", 910, _every_metric(60.0))]
    baseline = {"code": "hu_szeged", "train_seconds": 1, "raw": _every_metric(50.0),
                "gold_tokens": {m: 55.0 for m in METRICS[3:]}}
    (sweep / "hu_szeged").mkdir(parents=True)
    (sweep / "hu_szeged" / "result.json").write_text(json.dumps(results[0]))
    udpipe.mkdir()
    (udpipe / "hu_szeged.json").write_text(json.dumps(baseline))
    written = tmp_path / "table.md"
    written.write_text(ud_release_table.table([sweep], udpipe))
    [read] = ud_release_table.udpipe_results(written)
    # every metric but the segmentation ones (no UDPipe 1 column for them), the gold-token LAS
    assert read["raw"] == {m: v for m, v in baseline["raw"].items()
                           if m not in ("Tokens", "Sentences", "Words")}
    assert read["gold_tokens"] == {"LAS": 55.0}
    assert ud_release_table.table([sweep], written) == written.read_text()


def test_the_committed_release_table_reads_back():
    rows = {r["code"]: r for r in ud_release_table.udpipe_results(
        REPO / "experiments" / "results" / "ud_release_layers.md")}
    assert set(rows) == {"hu_szeged", "ta_ttb", "af_afribooms", "el_gdt", "kk_ktb", "mr_ufal", "mt_mudt"}
    assert rows["mt_mudt"]["raw"]["MLAS"] == 55.70 and rows["el_gdt"]["gold_tokens"]["LAS"] == 80.34
