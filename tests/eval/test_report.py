"""Reports from lists and from files, JSON written atomically."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from parser.eval.report import (
    evaluation_report,
    file_report,
    format_report,
    metrics_path_for,
    read_trees,
    write_metrics_json,
)


def test_evaluation_report_hand_checked():
    # Sentence 1: '.' attached to the wrong word (punctuation counts); 'dog' relabelled with a
    # subtype only (right for LAS). Sentence 2: word 3 unannotated (None), word 2 wrong label.
    gold_heads = [[2, 3, 0, 3], [0, 1, None]]
    gold_rels = [["det", "nsubj", "root", "punct"], ["root", "obj", None]]
    pred_heads = [[2, 3, 0, 2], [0, 1, 1]]
    pred_rels = [["det", "nsubj:pass", "root", "punct"], ["root", "nmod", "det"]]
    report = evaluation_report(gold_heads, gold_rels, pred_heads, pred_rels, batch_size=1)
    assert report["n_words"] == 6 and report["n_sentences"] == 2
    assert report["uas"] == 100 * (5 / 6)
    assert report["las"] == 100 * (4 / 6)
    assert report["label_acc"] == 100 * (5 / 6)
    assert report["by_length"]["1-10"]["n_sentences"] == 2
    assert report["by_relation"]["nsubj"] == {"count": 1, "uas": 100.0, "las": 100.0,
                                              "precision": 100.0, "recall": 100.0, "f1": 100.0}
    assert report["by_relation"]["punct"]["uas"] == 0.0 and report["by_relation"]["punct"]["las"] == 0.0
    assert "nsubj:pass" not in report["by_relation"]
    batched = evaluation_report(gold_heads, gold_rels, pred_heads, pred_rels)
    assert json.dumps(batched, sort_keys=True) == json.dumps(report, sort_keys=True)  # NaN-safe
    unlabeled = evaluation_report(gold_heads, gold_rels, pred_heads)
    assert unlabeled["uas"] == report["uas"] and unlabeled["las"] is None


def test_evaluation_report_errors_name_the_sentence():
    with pytest.raises(ValueError, match="pred_heads: sentence 1 has 2 words, gold_heads has 3"):
        evaluation_report([[0], [0, 1, 1]], [["root"], ["root", "dep", "dep"]], [[0], [0, 1]])
    with pytest.raises(ValueError, match=r"sentences from 2 on .*pred_heads\[0, 1\] = 5"):
        evaluation_report([[0], [0], [0]], [["root"]] * 3, [[0], [0], [5]], batch_size=2)


@pytest.fixture(scope="module")
def small_files(corrupted_dev, tmp_path_factory):
    """The first 300 sentences of the corrupted EWT dev, gold and prediction."""
    folder = tmp_path_factory.mktemp("report")
    paths = []
    for name, sentences in (("gold", corrupted_dev.gold_sentences), ("pred", corrupted_dev.pred_sentences)):
        path = folder / f"{name}.conllu"
        path.write_text("".join(s.serialize() for s in sentences[:300]), encoding="utf-8")
        paths.append(path)
    return tuple(paths)


def test_file_report_matches_plain_count_and_official(small_files):
    gold_path, pred_path = small_files
    gold, pred = read_trees(gold_path), read_trees(pred_path)
    assert len(gold) == 300 and all(len(g["heads"]) == len(g["forms"]) for g in gold)
    words = head = labeled = 0
    for g, p in zip(gold, pred):
        for gh, gr, ph, pr in zip(g["heads"], g["rels"], p["heads"], p["rels"]):
            words += 1
            head += gh == ph
            labeled += gh == ph and gr.split(":")[0] == pr.split(":")[0]
    report = file_report(gold_path, pred_path)
    assert report["n_words"] == words and report["n_sentences"] == 300
    assert report["uas"] == 100 * (head / words) == report["official"]["UAS"]
    assert report["las"] == 100 * (labeled / words) == report["official"]["LAS"]
    assert report["las"] < report["uas"] < 100
    assert sum(row["count"] for row in report["by_relation"].values()) == words
    assert sum(row["n_sentences"] for row in report["by_length"].values()) == 300
    assert all(":" not in name for name in report["by_relation"])
    assert report["gold"] == str(gold_path) and report["prediction"] == str(pred_path)
    text = format_report(report)
    assert f"UAS {report['uas']:6.2f}" in text and f"LAS {report['official']['LAS']:.2f}" in text


def test_file_report_rejects_different_tokenisation(small_files, tmp_path):
    gold_path, pred_path = small_files
    lines = pred_path.read_text(encoding="utf-8").split("\n\n")
    short = tmp_path / "short.conllu"
    short.write_text("\n\n".join(lines[:10]) + "\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{short} has 10 sentences, gold {gold_path} has 300")):
        file_report(gold_path, short, official=False)
    first, *rest = lines
    changed = tmp_path / "changed.conllu"
    changed.write_text("\n\n".join([first.replace("\tFrom\t", "\tfrom\t", 1), *rest]), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(changed)) + r": sentence 1 .*" + re.escape(str(gold_path))):
        file_report(gold_path, changed, official=False)


def test_read_trees_reports_malformed_file(tmp_path):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\ta\ta\tX\t_\t_\tzero\troot\t_\t_\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        read_trees(bad)


def test_write_metrics_json_atomic_and_plain(tmp_path):
    pred = tmp_path / "out" / "en_ewt-dev.pred.conllu"
    path = metrics_path_for(pred)
    assert path == tmp_path / "out" / "en_ewt-dev.pred.metrics.json"
    metrics = {"uas": torch.tensor(91.5), "las": math.nan, "n_words": 3, "by_length": {"1-10": {"uas": 50.0}}}
    assert write_metrics_json(metrics, path) == path
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "uas": 91.5, "las": None, "n_words": 3, "by_length": {"1-10": {"uas": 50.0}}}
    write_metrics_json({"uas": 1.0}, path)  # replaces the old file
    assert json.loads(path.read_text(encoding="utf-8")) == {"uas": 1.0}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    with pytest.raises(ValueError, match=r"metrics\.bad"):
        write_metrics_json({"bad": object()}, path)
    assert json.loads(path.read_text(encoding="utf-8")) == {"uas": 1.0}  # untouched by the failure
    assert [p.name for p in path.parent.iterdir()] == [path.name]
