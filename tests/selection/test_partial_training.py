"""The annotation file comes back into training: only the selected words' heads (and relations)
are annotation, a partially annotated sentence's likelihood is the restricted partition function
(brute-force enumeration), and training runs on it, with confident-arc self-training on the pool."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from parser.cli.select import main as select_main
from parser.data.batching import collate, encode
from parser.data.conllu_io import read_conllu
from parser.data.partial_trees import fill_selected, read_partial_trees
from parser.data.validate import ConlluError
from parser.inference import load_parser
from parser.objectives import Likelihood
from parser.train.loop import Trainer
from parser.train.training_data import load_training_data
from tests.structs.brute import enumerate_distribution
from tests.train.helpers import tiny_config

STEPS = ["trainer.max_steps=4", "trainer.eval_every=4", "trainer.final_eval=false",
         "model.use_upos=false", "model.labels=classifier"]


def _annotated(checkpoint: Path, pool: Path, folder: Path) -> Path:
    """parser-select's file for ``pool`` (12 words, at most 2 per sentence), filled from gold."""
    selected = folder / "batch.conllu"
    assert select_main([f"checkpoint={checkpoint}", f"pool={pool}", f"output={selected}",
                        "strategy=words", "budget=12", "cap=2",
                        f"remainder={folder / 'rest.conllu'}"]) == 0
    filled = folder / "filled.conllu"
    assert fill_selected(selected, pool, filled) == 12
    return filled


def test_the_annotators_file_trains_on_the_selected_gold_heads_and_nothing_else(
        select_checkpoint, fixtures, tmp_path):
    pool = fixtures / "tiny-train.conllu"
    filled = _annotated(select_checkpoint, pool, tmp_path)
    gold = {s.sent_id: s for s in read_conllu(pool)}
    read = read_partial_trees(filled)
    kept = 0
    for sentence in read:
        chosen = {int(w) for w in _comment(sentence, "selected_words").split(",")}
        truth = gold[sentence.sent_id]
        for word in range(1, len(sentence) + 1):
            expected = ((truth.heads[word - 1], truth.deprels[word - 1]) if word in chosen
                        else (-1, None))
            assert (sentence.heads[word - 1], sentence.deprels[word - 1]) == expected
        kept += len(chosen)
    assert kept == 12
    # The trainer's data: the same heads; without data.partial_trees the file is refused
    data = load_training_data(tiny_config(f"data.train_file={filled}", "data.partial_trees=true").data,
                              seed=0)
    assert sum(h >= 0 for s in data.labeled for h in s.heads) == 12
    with pytest.raises(ValueError, match="data.partial_trees=true"):
        load_training_data(tiny_config(f"data.train_file={filled}").data, seed=0)


def test_words_left_unannotated_and_missing_relations(select_checkpoint, fixtures, tmp_path):
    filled = _annotated(select_checkpoint, fixtures / "tiny-train.conllu", tmp_path)
    blocks = filled.read_text(encoding="utf-8").split("\n\n")
    first = blocks[0].split("\n")
    chosen = [int(w) for w in next(line for line in first if line.startswith("# selected_words"))
              .split("=")[1].split(",")]
    edited = []
    for line in first:  # the annotator gave the first word a head but no relation
        cols = line.split("\t")
        if not line.startswith("#") and cols[0] == str(chosen[0]):
            cols[7] = "_"
        edited.append("\t".join(cols))
    second = blocks[1].split("\n")  # and left every asked-for word of the second sentence '_'
    second = ["\t".join(c[:6] + ["_", "_"] + c[8:]) if not line.startswith("#") and
              (c := line.split("\t"))[0].isdigit() else line for line in second]
    filled.write_text("\n\n".join(["\n".join(edited), "\n".join(second), *blocks[2:]]),
                      encoding="utf-8")
    read = read_partial_trees(filled)
    assert read[0].heads[chosen[0] - 1] >= 0 and read[0].deprels[chosen[0] - 1] is None
    assert all(h == -1 for h in read[1].heads)
    _, vocabs, _ = load_parser(select_checkpoint)
    assert int(encode(read[0], vocabs, index=0).rels[chosen[0]]) == -1
    data = load_training_data(tiny_config(f"data.train_file={filled}", "data.partial_trees=true").data,
                              seed=0)
    assert len(data.labeled) == len(read) - 1 and len(data.unlabeled) == 1  # no head: text


def test_a_cycle_among_the_annotated_heads_names_its_line(tmp_path):
    path = tmp_path / "a.conllu"
    path.write_text("# selected_words = 1,2\n1\ta\t_\t_\t_\t_\t2\tdep\t_\t_\n"
                    "2\tb\t_\t_\t_\t_\t1\tdep\t_\t_\n3\tc\t_\t_\t_\t_\t0\troot\t_\t_\n\n")
    with pytest.raises(ConlluError, match=f"{path}:2: cycle"):
        read_partial_trees(path)
    path.write_text("# selected_words = 3\n1\ta\t_\t_\t_\t_\t2\tdep\t_\t_\n"
                    "2\tb\t_\t_\t_\t_\t1\tdep\t_\t_\n3\tc\t_\t_\t_\t_\t0\troot\t_\t_\n\n")
    assert read_partial_trees(path)[0].heads == [-1, -1, 0]  # the cycle was the parser's guess


def test_partial_likelihood_is_the_restricted_partition_function(select_checkpoint, tmp_path):
    path = tmp_path / "four.conllu"  # words 1 and 3 annotated (3 without a relation); 2, 4 guessed
    path.write_text("# selected_words = 1,3\n1\tShe\t_\t_\t_\t_\t2\tnsubj\t_\t_\n"
                    "2\tsaw\t_\t_\t_\t_\t0\troot\t_\t_\n3\thim\t_\t_\t_\t_\t2\t_\t_\t_\n"
                    "4\tthere\t_\t_\t_\t_\t2\tadvmod\t_\t_\n\n", encoding="utf-8")
    [sentence] = read_partial_trees(path)
    assert sentence.heads == [2, -1, 2, -1]
    model, vocabs, _ = load_parser(select_checkpoint)
    batch = collate([encode(sentence, vocabs, index=0)], labeled=True)
    model.eval()
    with torch.no_grad():
        out = model(batch)
        result = Likelihood()(out, batch)
    trees, log_weights, log_z = enumerate_distribution(out.dist.arc_scores[0].double(), 4,
                                                       single_root=out.dist.single_root)
    consistent = torch.tensor([tree[0] == 2 and tree[2] == 2 for tree in trees])
    expected = -(torch.logsumexp(log_weights[consistent], 0) - log_z)
    assert float(result.logs["tree_nll"]) * 4 == pytest.approx(float(expected), rel=1e-5)
    label = out.label_scores[0, 1, 2].log_softmax(-1)[vocabs.rels.index("nsubj")]
    assert float(result.logs["label_nll"]) * 4 == pytest.approx(-float(label), rel=1e-5)


def test_training_on_the_file_with_confident_arcs_on_the_pool(select_checkpoint, fixtures, tmp_path):
    filled = _annotated(select_checkpoint, fixtures / "tiny-train.conllu", tmp_path)
    data = [f"data.train_file={filled}", "data.partial_trees=true",
            f"data.unlabeled_file={tmp_path / 'rest.conllu'}"]
    # the teacher: likelihood on the same data (a teacher shares the student's vocabularies)
    Trainer(tiny_config(*STEPS, *data, "objective=likelihood"), run_dir=tmp_path / "teacher").fit()
    cfg = tiny_config(*STEPS, *data, "objective=confident_arcs", "objective.terms.confident_arcs.warmup=0",
                      f"objective.terms.confident_arcs.checkpoint={tmp_path / 'teacher/checkpoints/best.pt'}")
    assert cfg.data.partial_trees and list(cfg.objective.terms) == ["likelihood", "confident_arcs"]
    trainer = Trainer(cfg, run_dir=tmp_path / "run")
    assert trainer.fit().nonfinite_total == 0
    assert trainer.task.objective.names == ["likelihood", "confident_arcs"]


def _comment(sentence, key: str) -> str:
    return next(line.split("=", 1)[1].strip() for line in sentence.lines
                if line.startswith(f"# {key} "))
