from __future__ import annotations

import pytest
import torch

from parser.config import DataConfig
from parser.data.conllu_io import read_conllu
from parser.data.streams import LABELED, UNLABELED, TrainingStream, split_labeled, strip_annotation
from parser.data.vocab import Vocabularies
from parser.train.loop import Trainer
from parser.train.training_data import load_training_data
from tests.train.helpers import tiny_config


def _data_config(fixtures, **options) -> DataConfig:
    return DataConfig(train_file=str(fixtures / "tiny-train.conllu"), dev_split=None, test_split=None,
                      min_freq=1, tokens_per_batch=60, **options)


def _draw(stream, n):
    return [(kind, batch.index.tolist(), batch.heads) for kind, batch in (stream.next() for _ in range(n))]


def test_split_sizes_fractions_and_errors():
    labeled, unlabeled = split_labeled(10, labeled_size=None, labeled_fraction=0.3, seed=1)
    assert len(labeled) == 3 and len(unlabeled) == 7 and sorted(labeled + unlabeled) == list(range(10))
    assert split_labeled(10, labeled_size=0, labeled_fraction=None, seed=1) == ([], list(range(10)))
    with pytest.raises(ValueError, match="set at most one"):
        split_labeled(10, labeled_size=2, labeled_fraction=0.5, seed=1)
    with pytest.raises(ValueError, match="labeled_size=11: the training file has 10"):
        split_labeled(10, labeled_size=11, labeled_fraction=None, seed=1)


def test_unlabeled_stream_never_exposes_trees(fixtures):
    data = load_training_data(_data_config(fixtures, labeled_size=5), seed=0)
    assert len(data.labeled) == 5 and len(data.unlabeled) > 0
    assert all(h == -1 for s in data.unlabeled for h in s.heads)
    assert all(r is None for s in data.unlabeled for r in s.deprels)
    assert all(e.heads is None and e.rels is None for e in data.stream.unlabeled.encoded)
    kinds = set()
    for kind, _, heads in _draw(data.stream, 30):
        kinds.add(kind)
        assert (heads is None) == (kind == UNLABELED)
    assert kinds == {LABELED, UNLABELED}


def test_unlabeled_size_keeps_a_nested_subset_and_the_full_vocabulary(fixtures):
    full = load_training_data(_data_config(fixtures, labeled_size=4), seed=0)
    small, large = (load_training_data(_data_config(fixtures, labeled_size=4, unlabeled_size=k), seed=0)
                    for k in (2, 5))
    assert [len(d.unlabeled) for d in (small, large)] == [2, 5] and len(full.unlabeled) > 5
    forms = [[s.forms for s in d.unlabeled] for d in (small, large, full)]
    assert all(f in forms[1] for f in forms[0]) and all(f in forms[2] for f in forms[1])
    assert [s.forms for s in small.labeled] == [s.forms for s in full.labeled]
    assert small.vocabs.state_dict() == full.vocabs.state_dict()  # the full run's teacher fits
    assert len(small.stream.unlabeled.encoded) == 2
    with pytest.raises(ValueError, match=f"unlabeled_size=99: expected 0 to {len(full.unlabeled)}, the unlabeled"):
        load_training_data(_data_config(fixtures, labeled_size=4, unlabeled_size=99), seed=0)
    with pytest.raises(ValueError, match="unlabeled_size=-1: expected 0 to"):
        load_training_data(_data_config(fixtures, labeled_size=4, unlabeled_size=-1), seed=0)


@pytest.mark.parametrize("ratio,pattern", [(2.0, "LUULUULUU"), (0.5, "LLULLULLU"), (0.0, "LLLLLLLLL")])
def test_interleaving_ratio(fixtures, ratio, pattern):
    data = load_training_data(_data_config(fixtures, labeled_size=8, unlabeled_ratio=ratio), seed=0)
    kinds = "".join("L" if kind == LABELED else "U" for kind, _, _ in _draw(data.stream, len(pattern)))
    assert kinds == pattern


def test_stream_state_restores_the_exact_place(fixtures):
    config = _data_config(fixtures, labeled_size=6, unlabeled_ratio=1.5)
    first = load_training_data(config, seed=3).stream
    _draw(first, 11)  # past the end of a labeled epoch
    state = first.state_dict()
    expected = [(kind, index) for kind, index, _ in _draw(first, 9)]
    second = load_training_data(config, seed=3).stream
    second.load_state_dict(state)
    assert [(kind, index) for kind, index, _ in _draw(second, 9)] == expected
    assert first.epoch >= 1


def test_no_trees_at_all_trains_on_the_unlabeled_stream(fixtures):
    data = load_training_data(_data_config(fixtures, labeled_size=0), seed=0)
    assert data.stream.labeled is None
    assert {kind for kind, _, _ in _draw(data.stream, 5)} == {UNLABELED}


def test_from_sentences_shards_by_rank_and_skips_empty_parts(fixtures):
    sentences = read_conllu(fixtures / "tiny-train.conllu").sentences
    vocabs = Vocabularies.build(sentences, min_freq=1)
    text = strip_annotation(sentences[8:])

    def stream(rank, labeled=sentences[:8]):
        return TrainingStream.from_sentences(
            labeled, text, vocabs, tokens_per_batch=60, max_length=None, unlabeled_ratio=1.0,
            seed=0, num_replicas=2, rank=rank,
        )

    shards = [stream(rank) for rank in (0, 1)]
    for part, size, seed in (("labeled", 8, 0), ("unlabeled", len(sentences) - 8, 1)):
        batchers = [getattr(shard, part) for shard in shards]
        assert [b.seed for b in batchers] == [seed, seed] and len(batchers[0].encoded) == size
        seen = [{i for batch in b.batch_indices(0) for i in batch} for b in batchers]
        assert seen[0] and seen[1] and not seen[0] & seen[1]  # each rank its own sentences
    assert shards[0].unlabeled.encoded[0].heads is None
    alone = stream(0, labeled=[])
    assert alone.labeled is None and alone.primary is alone.unlabeled


def test_unlabeled_text_file(fixtures, tmp_path):
    text = tmp_path / "raw.txt"
    text.write_text("The cat sleeps .\n\nDogs bark loudly .\n")
    data = load_training_data(_data_config(fixtures, unlabeled_file=str(text)), seed=0)
    assert [s.forms for s in data.unlabeled] == [["The", "cat", "sleeps", "."], ["Dogs", "bark", "loudly", "."]]
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty.txt"):
        load_training_data(_data_config(fixtures, unlabeled_file=str(empty)), seed=0)
    with pytest.raises(ValueError, match="unlabeled_file=.*missing.txt: no such file"):
        load_training_data(_data_config(fixtures, unlabeled_file=str(tmp_path / "missing.txt")), seed=0)


def test_semi_supervised_training_logs_every_term(tmp_path):
    cfg = tiny_config("objective=entropy", "data.labeled_size=8", "trainer.max_steps=6",
                      "trainer.eval_every=6", "trainer.log_every=1", quiet=False)
    cfg.trainer.progress = False
    trainer = Trainer(cfg, run_dir=tmp_path)
    state = trainer.fit()
    trainer.logger.close()
    assert state.step == 6 and state.nonfinite_total == 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb")).Reload()
    tags = set(events.Tags()["scalars"])
    for tag in ["train/likelihood/loss", "train/entropy/loss", "train/lr", "train/grad_norm",
                "train/sentences_per_s", "train/tokens_per_s", "dev/uas", "dev/las"]:
        assert tag in tags, (tag, sorted(tags))
    assert any(tag.startswith("train/arc_entropy") for tag in tags)
    assert torch.isfinite(torch.tensor(events.Scalars("train/lr")[-1].value))


def test_a_stream_no_term_reads_is_not_drawn(fixtures):
    data = load_training_data(_data_config(fixtures, labeled_size=8, unlabeled_ratio=1.0), seed=0)
    state_with_both = data.stream.state_dict()
    assert data.stream.keep_only({"labeled"}, names=["likelihood"]) == [UNLABELED]
    assert {kind for kind, _, _ in _draw(data.stream, 6)} == {LABELED}
    data.stream.load_state_dict(state_with_both)  # a checkpoint made before the drop still loads
    assert data.stream.keep_only({"labeled", "unlabeled"}, names=["likelihood", "entropy"]) == []
    no_trees = load_training_data(_data_config(fixtures, labeled_size=0), seed=0)
    with pytest.raises(ValueError, match=r"objective terms \['likelihood'\] read only \['labeled'\]"):
        no_trees.stream.keep_only({"labeled"}, names=["likelihood"])


def test_trainer_with_likelihood_only_draws_no_unlabeled_batch(tmp_path, caplog):
    cfg = tiny_config("data.labeled_size=6", "data.unlabeled_ratio=1.0", "objective=likelihood",
                      "trainer.max_steps=3", "trainer.eval_every=3", "trainer.final_eval=false")
    with caplog.at_level("INFO"):
        trainer = Trainer(cfg, run_dir=tmp_path)
    assert trainer.task.data.stream.unlabeled is None
    assert "no objective term reads unlabeled batches" in caplog.text
