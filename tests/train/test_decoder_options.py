"""Decoder options end to end: ``model.projective`` (Eisner), ``model.attach_to_units`` (the UD
punct/cc rule) and ``model.crf=projective`` through a trainer run, its checkpoint and the
``parser-evaluate`` / ``parser-predict`` overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from parser.cli.predict import tag_list
from parser.data.conllu_io import read_conllu
from parser.inference import predict_file
from parser.inference.options import PredictOptions
from parser.structs import attach_to_units, is_projective
from parser.train.loop import Trainer
from parser.train.training_data import projective_only
from tests.train.helpers import tiny_config

FIXTURE = "tests/fixtures/tiny-dev.conllu"


def read_heads(path) -> list[list[int]]:
    sentences, current = [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
        elif not line.startswith("#") and line.split("\t")[0].isdigit():
            current.append(int(line.split("\t")[6]))
    return sentences + ([current] if current else [])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    # gold UPOS input: the re-attachment rule reads the input's tags, which the test checks against
    cfg = tiny_config("model.projective=true", "model.attach_to_units=[PUNCT,CCONJ]",
                      "model.upos_input=gold", "model.tag_loss_weight=0",
                      "trainer.max_steps=2", "trainer.eval_every=2")
    trainer = Trainer(cfg, run_dir=run)
    upos = trainer.task.vocabs.upos
    assert trainer.model.decoder.projective and trainer.model.decoder.unit_tags == (upos.index("PUNCT"), upos.index("CCONJ"))
    trainer.fit()
    return run / "checkpoints" / "best.pt"


def test_checkpoint_keeps_the_decoder_and_overrides_change_it(checkpoint, tmp_path):
    from parser.inference import load_parser

    model, _, _ = load_parser(checkpoint)
    assert model.decoder.projective and model.decoder.unit_tags
    plain, both = tmp_path / "plain.conllu", tmp_path / "both.conllu"
    predict_file(checkpoint, FIXTURE, plain, PredictOptions(projective=False, attach_to_units=[]))
    predict_file(checkpoint, FIXTURE, both)
    plain_heads, both_heads = read_heads(plain), read_heads(both)
    tags = [[line.split("\t")[3] for line in block.splitlines() if line and line.split("\t")[0].isdigit()]
            for block in Path(FIXTURE).read_text(encoding="utf-8").split("\n\n") if block.strip()]
    for heads, upos in zip(both_heads, tags):
        tensor = torch.tensor([[0, *heads]])
        assert bool(is_projective(tensor, torch.tensor([len(heads)]))[0])
        marked = torch.tensor([[False] + [t in ("PUNCT", "CCONJ") for t in upos]])
        if not marked[0, heads.index(0) + 1]:  # the rule's fixed point: applying it again changes nothing
            assert attach_to_units(tensor, torch.tensor([len(heads)]), marked)[0, 1:].tolist() == heads
    assert len(plain_heads) == len(both_heads)
    with pytest.raises(ValueError, match=r"attach_to_units: \['PUNC'\] not UD UPOS tags"):
        predict_file(checkpoint, FIXTURE, tmp_path / "bad.conllu",
                     PredictOptions(attach_to_units=["PUNC"]))


def test_tag_list():
    assert tag_list(None) is None and tag_list("none") == [] and tag_list("PUNCT, CCONJ") == ["PUNCT", "CCONJ"]


def test_projective_crf_trains_with_ge(tmp_path):
    from parser.inference import load_parser

    cfg = tiny_config("model=loglinear_unlexicalized", "model.crf=projective", "model.n_buckets=4096",
                      "model.n_label_buckets=1024", "objective=ge", "data.labeled_size=0",
                      "trainer.max_steps=2", "trainer.eval_every=2")
    trainer = Trainer(cfg, run_dir=tmp_path)
    assert trainer.model.crf == "projective"
    trainer.fit()
    model, _, _ = load_parser(tmp_path / "checkpoints" / "best.pt")
    assert model.crf == "projective"
    predicted = tmp_path / "pred.conllu"
    predict_file(tmp_path / "checkpoints" / "best.pt", FIXTURE, predicted)
    for heads in read_heads(predicted):
        assert bool(is_projective(torch.tensor([[0, *heads]]), torch.tensor([len(heads)]))[0])


def test_joint_labels_follow_re_attached_arcs():
    from parser.models.decoder import Decoder
    from parser.structs import ParserOutput, TreeCRF

    gen = torch.Generator().manual_seed(2)
    lengths = torch.tensor([6, 4])
    scores = torch.randn(2, 7, 7, 5, generator=gen)
    upos = torch.tensor([[2, 3, 9, 3, 3, 9, 3], [2, 3, 3, 9, 3, 0, 0]])  # 9: the re-attached tag
    decoder = Decoder(labels="joint", projective=True, unit_tags=(9,))
    dist = TreeCRF(scores, lengths)
    heads, labels = decoder.decode(ParserOutput(dist=dist), upos=upos)
    plain, _ = dist.argmax(projective=True)
    assert torch.equal(heads, attach_to_units(plain, lengths, upos == 9))
    assert not torch.equal(heads, plain)  # the rule moved some arc, so the labels had to follow
    for b, n in enumerate(lengths.tolist()):
        for d in range(1, n + 1):
            # The best relation on the arc moved to, among the real ones (ids 0..2, PAD, UNK,
            # ROOT, are never predicted: Decoder.relations).
            assert labels[b, d] == scores[b, d, heads[b, d], 3:].argmax() + 3
    assert (labels[1, 5:] == 0).all()


def test_bad_decoder_options_fail_at_start_up(tmp_path, checkpoint):
    from parser.cli.predict import main as predict_main

    with pytest.raises(ValueError, match="model.crf='eisner': expected one of matrix_tree, projective"):
        Trainer(tiny_config("model.crf=eisner"), run_dir=tmp_path / "a")
    with pytest.raises(ValueError, match="model.crf=projective models unlabeled arcs"):
        Trainer(tiny_config("model.crf=projective", "model.labels=joint"), run_dir=tmp_path / "b")
    output = tmp_path / "never.conllu"
    code = predict_main([f"checkpoint={checkpoint}", f"input={FIXTURE}", f"output={output}", "projective=maybe"])
    assert code != 0 and not output.exists()


# "A hearing is scheduled on the issue today .": hearing <- issue crosses scheduled's root arc.
NON_PROJECTIVE = """# sent_id = crossing
1\tA\ta\tDET\t_\t_\t2\tdet\t_\t_
2\thearing\thearing\tNOUN\t_\t_\t4\tnsubj\t_\t_
3\tis\tbe\tAUX\t_\t_\t4\taux\t_\t_
4\tscheduled\tschedule\tVERB\t_\t_\t0\troot\t_\t_
5\ton\ton\tADP\t_\t_\t7\tcase\t_\t_
6\tthe\tthe\tDET\t_\t_\t7\tdet\t_\t_
7\tissue\tissue\tNOUN\t_\t_\t2\tnmod\t_\t_
8\ttoday\ttoday\tNOUN\t_\t_\t4\tobl\t_\t_
9\t.\t.\tPUNCT\t_\t_\t4\tpunct\t_\t_

"""


def test_projective_crf_leaves_out_non_projective_training_trees(tmp_path, caplog):
    train = tmp_path / "train.conllu"
    train.write_text(Path("tests/fixtures/tiny-train.conllu").read_text(encoding="utf-8") + NON_PROJECTIVE,
                     encoding="utf-8")
    cfg = tiny_config("model.crf=projective", "objective=likelihood", f"data.train_file={train}",
                      "trainer.max_steps=4", "trainer.eval_every=4", "trainer.final_eval=false")
    with caplog.at_level("WARNING"):
        trainer = Trainer(cfg, run_dir=tmp_path / "run")
        trainer.fit()
    assert "1 of 33 labeled training trees are not projective and are left out" in caplog.text
    assert len(trainer.task.data.labeled) == 32
    assert "step skipped" not in caplog.text  # no infinite likelihood reached a step


def test_projective_only_keeps_projective_and_partial_trees(tmp_path):
    path = tmp_path / "mixed.conllu"
    partial = NON_PROJECTIVE.replace("crossing", "partial").replace("\t2\tnmod", "\t_\tnmod")
    path.write_text(NON_PROJECTIVE + Path(FIXTURE).read_text(encoding="utf-8") + partial, encoding="utf-8")
    sentences = read_conllu(path, require_trees=False).sentences
    kept = projective_only(sentences)
    assert [s.sent_id for s in kept] == [s.sent_id for s in sentences[1:]]
    assert kept[-1].sent_id == "partial" and not kept[-1].is_annotated
