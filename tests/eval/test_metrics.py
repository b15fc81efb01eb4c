"""AttachmentMetric on hand-checked batches, against a plain Python count on random batches, and
padding invariance."""

from __future__ import annotations

import math

import pytest
import torch

from parser.eval.metrics import AttachmentMetric, universal_relations

NAMES = ["det", "nsubj", "nsubj:pass", "root", "punct", "obj", "nmod"]
REL = {name: i for i, name in enumerate(NAMES)}
PAD = 0


def hand_batch():
    """Two sentences, N = 4.

    0: The(det) dog(nsubj) barks(root) .(punct); the prediction attaches '.' to 'dog' (wrong head,
       right label) and calls 'dog' nsubj:pass (a subtype-only change: right for LAS).
    1: three words; word 3 unannotated (gold -1); word 2 gets head right, label wrong (nmod for obj);
       position 4 is padding holding garbage.
    """
    gold_heads = torch.tensor([[0, 2, 3, 0, 3], [0, 0, 1, -1, PAD]])
    gold_rels = torch.tensor([[0, REL["det"], REL["nsubj"], REL["root"], REL["punct"]],
                              [0, REL["root"], REL["obj"], -1, PAD]])
    pred_heads = torch.tensor([[0, 2, 3, 0, 2], [0, 0, 1, 1, 99]])
    pred_rels = torch.tensor([[0, REL["det"], REL["nsubj:pass"], REL["root"], REL["punct"]],
                              [0, REL["root"], REL["nmod"], REL["det"], 99]])
    lengths = torch.tensor([4, 3])
    return pred_heads, pred_rels, gold_heads, gold_rels, lengths


def test_hand_checked_scores_ignore_subtypes_count_punctuation_skip_unannotated():
    rel_universal, _ = universal_relations(NAMES)
    metric = AttachmentMetric()
    metric.update(*hand_batch(), rel_universal=rel_universal)
    scores = metric.compute()
    # 6 annotated words; heads wrong: '.' only -> 5; labeled right: det, nsubj:pass~nsubj, root, root.
    assert scores["n_words"] == 6
    assert scores["uas"] == pytest.approx(100 * 5 / 6)
    assert scores["las"] == pytest.approx(100 * 4 / 6)
    assert scores["label_acc"] == pytest.approx(100 * 5 / 6)  # punct label right, obj/nmod wrong


def test_without_universal_map_subtypes_count_as_errors():
    metric = AttachmentMetric()
    metric.update(*hand_batch())
    scores = metric.compute()
    assert scores["las"] == pytest.approx(100 * 3 / 6)
    assert scores["label_acc"] == pytest.approx(100 * 4 / 6)


def test_inputs_are_not_modified():
    batch = hand_batch()
    copies = [t.clone() for t in batch]
    AttachmentMetric().update(*batch, rel_universal=universal_relations(NAMES)[0])
    assert all(torch.equal(a, b) for a, b in zip(batch, copies))


def test_unlabeled_update_gives_uas_only():
    pred_heads, _, gold_heads, _, lengths = hand_batch()
    metric = AttachmentMetric()
    metric.update(pred_heads, None, gold_heads, None, lengths)
    scores = metric.compute()
    assert scores["uas"] == pytest.approx(100 * 5 / 6)
    assert scores["las"] is None and scores["label_acc"] is None
    assert metric.by_relation() == {}
    with pytest.raises(ValueError, match="pred_rels"):
        metric.update(*hand_batch())


def test_by_relation_hand_checked():
    rel_universal, universal = universal_relations(NAMES)
    metric = AttachmentMetric()
    metric.update(*hand_batch(), rel_universal=rel_universal)
    table = metric.by_relation(universal)
    assert set(table) == {"det", "nsubj", "root", "punct", "obj", "nmod"}
    assert table["root"] == {"count": 2, "uas": 100.0, "las": 100.0, "precision": 100.0,
                             "recall": 100.0, "f1": 100.0}
    assert table["nsubj"]["las"] == 100.0  # nsubj:pass predicted: same universal relation
    assert table["punct"]["count"] == 1 and table["punct"]["uas"] == 0.0
    assert table["punct"]["precision"] == 0.0 and table["punct"]["f1"] == 0.0
    assert table["obj"]["uas"] == 100.0 and table["obj"]["las"] == 0.0
    assert math.isnan(table["obj"]["precision"]) and table["obj"]["f1"] == 0.0
    assert table["nmod"]["count"] == 0 and table["nmod"]["precision"] == 0.0
    assert math.isnan(table["nmod"]["uas"])


def test_by_length_bucket_boundaries():
    lengths = torch.tensor([10, 11, 20, 21, 40, 41, 1])
    width = 42
    gold = torch.zeros(7, width, dtype=torch.long)
    pred = gold.clone()
    pred[1, 1] = 3  # one head error in the 11-word sentence
    metric = AttachmentMetric()
    metric.update(pred, None, gold, None, lengths)
    table = metric.by_length()
    assert list(table) == ["1-10", "11-20", "21-30", "31-40", "41+"]
    assert [row["n_sentences"] for row in table.values()] == [2, 2, 1, 1, 1]
    assert [row["n_words"] for row in table.values()] == [11, 31, 21, 40, 41]
    assert table["11-20"]["uas"] == pytest.approx(100 * 30 / 31)
    assert table["1-10"]["uas"] == 100.0 and table["1-10"]["las"] is None


def random_batch(seed: int, batch: int = 7, max_len: int = 12, n_rels: int = 7):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (batch,), generator=g)
    width = int(lengths.max()) + 1
    gold_heads = torch.randint(0, max_len + 1, (batch, width), generator=g) % (lengths[:, None] + 1)
    gold_heads[torch.rand(batch, width, generator=g) < 0.1] = -1
    pred_heads = torch.where(torch.rand(batch, width, generator=g) < 0.7, gold_heads.clamp(min=0),
                             torch.randint(0, max_len + 1, (batch, width), generator=g) % (lengths[:, None] + 1))
    gold_rels = torch.randint(0, n_rels, (batch, width), generator=g)
    gold_rels[gold_heads < 0] = -1
    pred_rels = torch.where(torch.rand(batch, width, generator=g) < 0.6, gold_rels.clamp(min=0),
                            torch.randint(0, n_rels, (batch, width), generator=g))
    positions = torch.arange(width)
    padding = positions[None] > lengths[:, None]  # garbage in padding must be ignored
    pred_heads = pred_heads.masked_fill(padding, 77)
    gold_heads = gold_heads.masked_fill(padding, -5)
    return pred_heads, pred_rels, gold_heads, gold_rels, lengths


def no_nan(table):
    """NaN != NaN; compare tables with NaN replaced by a marker."""
    return {k: {f: "nan" if isinstance(v, float) and math.isnan(v) else v for f, v in row.items()}
            for k, row in table.items()}


def brute_counts(pred_heads, pred_rels, gold_heads, gold_rels, lengths, universal):
    words = head = labeled = label = 0
    for b in range(len(lengths)):
        for d in range(1, int(lengths[b]) + 1):
            if gold_heads[b, d] < 0:
                continue
            words += 1
            head_ok = bool(pred_heads[b, d] == gold_heads[b, d])
            label_ok = universal[int(pred_rels[b, d])] == universal[int(gold_rels[b, d])]
            head += head_ok
            label += label_ok
            labeled += head_ok and label_ok
    return words, head, labeled, label


@pytest.mark.parametrize("seed", range(4))
def test_random_batches_match_python_count_and_padding_invariance(seed):
    batch = random_batch(seed)
    rel_universal, universal = universal_relations(NAMES)
    words, head, labeled, label = brute_counts(*batch, rel_universal.tolist())
    together = AttachmentMetric()
    together.update(*batch, rel_universal=rel_universal)
    scores = together.compute()
    assert scores["n_words"] == words
    assert scores["uas"] == 100 * (head / words)
    assert scores["las"] == 100 * (labeled / words)
    assert scores["label_acc"] == 100 * (label / words)

    alone = AttachmentMetric()
    pred_heads, pred_rels, gold_heads, gold_rels, lengths = batch
    for b in range(len(lengths)):
        n = int(lengths[b]) + 1  # trim each sentence to its own width
        alone.update(pred_heads[b : b + 1, :n], pred_rels[b : b + 1, :n], gold_heads[b : b + 1, :n],
                     gold_rels[b : b + 1, :n], lengths[b : b + 1], rel_universal=rel_universal)
    assert alone.compute() == scores
    assert alone.by_length() == together.by_length()
    assert no_nan(alone.by_relation(universal)) == no_nan(together.by_relation(universal))


def test_reset_starts_over():
    metric = AttachmentMetric()
    metric.update(*hand_batch())
    metric.reset()
    assert metric.compute()["n_words"] == 0 and math.isnan(metric.compute()["uas"])
    metric.update(hand_batch()[0], None, hand_batch()[2], None, hand_batch()[4])
    assert metric.compute()["las"] is None


def test_universal_relations():
    rel_universal, universal = universal_relations(["obl:tmod", "nmod", "obl", "nmod:poss", "acl:relcl"])
    assert rel_universal.dtype == torch.long
    assert rel_universal.tolist() == [0, 1, 0, 1, 2]
    assert universal == ["obl", "nmod", "acl"]


def test_bad_input_names_tensor_and_position():
    pred_heads, pred_rels, gold_heads, gold_rels, lengths = hand_batch()
    metric = AttachmentMetric()
    bad = pred_heads.clone()
    bad[1, 2] = 7
    with pytest.raises(ValueError, match=r"pred_heads\[1, 2\] = 7"):
        metric.update(bad, pred_rels, gold_heads, gold_rels, lengths)
    bad = gold_heads.clone()
    bad[0, 3] = 9
    with pytest.raises(ValueError, match=r"gold_heads\[0, 3\] = 9"):
        metric.update(pred_heads, pred_rels, bad, gold_rels, lengths)
    bad = gold_rels.clone()
    bad[0, 1] = -1  # head annotated, relation not
    with pytest.raises(ValueError, match=r"gold_rels\[0, 1\] = -1"):
        metric.update(pred_heads, pred_rels, gold_heads, bad, lengths)
    with pytest.raises(ValueError, match=r"gold_rels\[0, 2\] = 1: outside 0..0"):
        metric.update(pred_heads, pred_rels, gold_heads, gold_rels, lengths,
                      rel_universal=torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match="pred_heads: shape"):
        metric.update(pred_heads[:, :3], pred_rels, gold_heads, gold_rels, lengths)
    with pytest.raises(ValueError, match="lengths"):
        metric.update(pred_heads, pred_rels, gold_heads, gold_rels, torch.tensor([4, 5]))
    with pytest.raises(ValueError, match="gold_rels: None"):
        metric.update(pred_heads, pred_rels, gold_heads, None, lengths)
    assert metric.compute()["n_words"] == 0  # failed updates add nothing
