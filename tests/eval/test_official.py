"""The tensor metric and the official CoNLL 2018 script agree exactly on a real prediction file;
the wrapper's errors name both files."""

from __future__ import annotations

import re

import pytest
import torch
from udtools import udeval

from parser.eval.metrics import AttachmentMetric, universal_relations
from parser.eval.official import (
    METRICS,
    format_official_table,
    official_evaluation,
    official_scores,
)


def tensor_metric(gold, pred, *, batch_size: int = 100) -> AttachmentMetric:
    """Score parsed files through tensors the way the training loop does: relation ids from a
    vocabulary of full names, subtypes folded by `universal_relations`."""
    def words(sentence):
        return [t for t in sentence if isinstance(t["id"], int)]

    names = sorted({t["deprel"] for s in gold + pred for t in words(s)})
    ids = {name: i for i, name in enumerate(names)}
    rel_universal, _ = universal_relations(names)
    metric = AttachmentMetric()
    for start in range(0, len(gold), batch_size):
        g_part, p_part = gold[start : start + batch_size], pred[start : start + batch_size]
        lengths = torch.tensor([len(words(s)) for s in g_part])
        shape = (len(g_part), int(lengths.max()) + 1)
        tensors = {key: torch.zeros(shape, dtype=torch.long) for key in ("ph", "pr", "gh", "gr")}
        for b, (g, p) in enumerate(zip(g_part, p_part)):
            n = len(words(g))
            tensors["gh"][b, 1 : n + 1] = torch.tensor([t["head"] for t in words(g)])
            tensors["gr"][b, 1 : n + 1] = torch.tensor([ids[t["deprel"]] for t in words(g)])
            tensors["ph"][b, 1 : n + 1] = torch.tensor([t["head"] for t in words(p)])
            tensors["pr"][b, 1 : n + 1] = torch.tensor([ids[t["deprel"]] for t in words(p)])
        metric.update(tensors["ph"], tensors["pr"], tensors["gh"], tensors["gr"], lengths,
                      rel_universal=rel_universal)
    return metric


def printed(table: str, metric: str) -> str:
    """The F1 column the official script prints for one metric."""
    row = next(line for line in table.splitlines() if line.startswith(metric + " "))
    return row.split("|")[3].strip()


@pytest.fixture(scope="module")
def official(corrupted_dev):
    return official_evaluation(corrupted_dev.gold, corrupted_dev.pred)


def test_tensor_metric_equals_official_script_on_corrupted_ewt_dev(corrupted_dev, official):
    c = corrupted_dev
    scores = tensor_metric(c.gold_sentences, c.pred_sentences).compute()

    # The corruption did something, and the subtype-only changes did not cost LAS.
    assert c.subtype_changes > 1000
    assert 80 < scores["uas"] < 95 and scores["las"] < scores["uas"] - 3
    assert scores["n_words"] == c.words == official["UAS"].gold_total == official["LAS"].system_total
    assert official["UAS"].correct == c.head_correct
    assert official["LAS"].correct == c.labeled_correct
    assert scores["label_acc"] == 100 * (c.label_correct / c.words)

    # Exactly equal floats (the script prints 100 * f1 to 2 decimals, so the printed values agree).
    assert scores["uas"] == official["UAS"].f1 == official["UAS"].aligned_accuracy
    assert scores["las"] == official["LAS"].f1 == official["LAS"].aligned_accuracy
    assert f"{scores['las']:.2f}" == f"{official['LAS'].f1:.2f}"


def test_official_scores_are_f1_percentages(official):
    assert tuple(official) == METRICS
    for name in ("UPOS", "Words", "Tokens", "Lemmas"):  # only HEAD/DEPREL were changed
        assert official[name].f1 == 100.0
    assert 0 < official["MLAS"].f1 <= official["CLAS"].f1 < 100
    assert official["CLAS"].gold_total < official["LAS"].gold_total  # content relations only


SENTENCE = """# sent_id = s1
# text = a b c
1	a	a	X	_	_	2	dep	_	_
2	b	b	X	_	_	0	root	_	_
3	c	c	X	_	_	2	dep	_	_

"""


def test_small_file_scores_and_table_match_the_script(tmp_path):
    gold = tmp_path / "gold.conllu"
    gold.write_text(SENTENCE, encoding="utf-8")
    pred = tmp_path / "pred.conllu"
    # word 3 re-attached to word 1 (head wrong), word 1 relabelled dep:sub (subtype only: LAS right)
    pred.write_text(SENTENCE.replace("3\tc\tc\tX\t_\t_\t2", "3\tc\tc\tX\t_\t_\t1")
                    .replace("2\tdep\t", "2\tdep:sub\t"), encoding="utf-8")
    scores = official_scores(gold, pred)
    assert scores["UAS"] == scores["LAS"] == 100 * (2 / 3)
    with open(gold, encoding="utf-8") as g, open(pred, encoding="utf-8") as p:
        raw = udeval.evaluate(udeval.load_conllu(g, str(gold), {}), udeval.load_conllu(p, str(pred), {}))
    table = udeval.build_evaluation_table(raw, verbose=True)
    assert format_official_table(official_evaluation(gold, pred)) == table
    assert printed(table, "LAS") == "66.67"


def test_errors_name_both_files(tmp_path):
    gold = tmp_path / "gold.conllu"
    gold.write_text(SENTENCE, encoding="utf-8")
    other_words = tmp_path / "tokens.conllu"
    other_words.write_text(SENTENCE.replace("\tc\tc\t", "\td\td\t"), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(other_words)) + ".*" + re.escape(str(gold))):
        official_scores(gold, other_words)

    cycle = tmp_path / "cycle.conllu"
    cycle.write_text(SENTENCE.replace("2\tb\tb\tX\t_\t_\t0\troot", "2\tb\tb\tX\t_\t_\t1\troot"), encoding="utf-8")
    with pytest.raises(ValueError) as error:
        official_scores(gold, cycle)
    assert str(cycle) in str(error.value) and str(gold) in str(error.value)

    no_final_blank = tmp_path / "truncated.conllu"
    no_final_blank.write_text(SENTENCE.rstrip("\n") + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="does not end with empty line"):
        official_scores(gold, no_final_blank)
    with pytest.raises(FileNotFoundError):
        official_scores(gold, tmp_path / "missing.conllu")
