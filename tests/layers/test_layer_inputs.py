"""``model.layer_inputs``: the predicted UPOS/XPOS/FEATS classes embedded into the parser's input
(UDPipe 2's design; docs/layout.md, "Tags fed to the parser"). The heads of the fed layers read
the first BiLSTM layer; the embeddings of their argmax classes join its states as the input of the
layers above. The tags fed are the model's own in training as in prediction: never the batch's
gold classes, never the input file's columns."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import torch
from omegaconf import OmegaConf

from parser.cli.predict import main as predict_main
from parser.config import ModelConfig
from parser.data.batching import collate, encode_all
from parser.data.conllu_io import read_conllu
from parser.data.vocab import Vocabularies
from parser.inference import load_parser
from parser.models import build_parser
from parser.models.parser_model import check_layer_inputs
from parser.train.loop import Trainer
from tests.layers.helpers import train_layers
from tests.models.test_transformer_encoder import WORDS, sentence, transformer_config
from tests.train.helpers import tiny_config

FED = ("model.lstm_layers=2", "model.layers=[xpos,feats,lemma]", "model.upos_input=predicted",
       "model.tag_loss_weight=1", "model.layer_inputs=[upos,xpos,feats]")


@pytest.fixture(scope="module")
def fed_checkpoint(tmp_path_factory, morph_files):
    """A tiny parser whose UPOS, XPOS and FEATS feed its upper BiLSTM layer: trained, checkpointed."""
    train, dev = morph_files
    return train_layers(tmp_path_factory.mktemp("fed"), train, dev, *FED, steps=40)


def _sizes(**extra):
    return {"words": 20, "chars": 20, "upos": 10, "rels": 5, **extra}


def _model(*overrides: str, layer_sizes=None):
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig),
                          OmegaConf.from_dotlist(["lstm_hidden=8", "word_dim=8", "char_dim=4",
                                                  "char_hidden=8", "upos_dim=4", "arc_mlp=8",
                                                  "rel_mlp=4", *overrides]))
    return build_parser(cfg, _sizes(), layer_sizes=layer_sizes or {"xpos": 7, "feats": 6})


def test_without_the_option_the_modules_are_the_old_ones():
    plain, fed = _model("layers=[xpos,feats]"), _model("layers=[xpos,feats]", "layer_inputs=[xpos]")
    assert plain.scorer.lower_lstm is None and plain.scorer.tag_inputs is None
    assert not any(k.startswith(("lower_lstm.", "tag_inputs.")) for k in plain.state_dict())
    assert plain.scorer.lstm.num_layers == 3
    assert fed.scorer.lower_lstm.num_layers == 1 and fed.scorer.lstm.num_layers == 2
    assert fed.scorer.lstm.input_size == 2 * 8 + 4 and list(fed.scorer.tag_inputs) == ["xpos"]


def test_the_upos_head_is_fed_from_the_first_layer():
    own = ("layers=[xpos]", "upos_input=predicted", "tag_loss_weight=1")
    plain, fed = _model(*own), _model(*own, "layer_inputs=[upos]")
    assert fed.scorer.tagger.in_features == plain.scorer.tagger.in_features == 2 * 8
    assert list(fed.scorer.tag_inputs) == ["upos"] and fed.scorer.tag_inputs["upos"].num_embeddings == 10
    assert fed.scorer.lstm.input_size == 2 * 8 + 4


@pytest.mark.parametrize(("overrides", "error", "message"), [
    (["layers=[xpos]", "layer_inputs=[feats]"], ValueError, r"model.layer_inputs.*\['feats'\] not"),
    (["layers=[xpos]", "layer_inputs=[xpos,xpos]"], ValueError, "once"),
    (["layers=[xpos]", "layer_inputs=[upos]"], ValueError, "model.upos_input=predicted"),
    (["layers=[xpos]", "layer_inputs=[upos]", "upos_input=predicted", "tag_loss_weight=0"],
     ValueError, "model.tag_loss_weight > 0"),
    (["layers=[xpos]", "layer_inputs=[xpos]", "lstm_layers=1"], NotImplementedError,
     "model.lstm_layers=1"),
    (["layers=[xpos]", "layer_inputs=[xpos]", "encoder.kind=cnn"], NotImplementedError,
     "model/encoder=cnn"),
    (["layers=[xpos]", "layer_inputs=[xpos]", "encoder.kind=transformer"], NotImplementedError,
     "model.encoder.lstm_layers=0"),
    (["layers=[xpos]", "layer_inputs=[xpos]", "kind=loglinear"], NotImplementedError,
     "model.kind=loglinear"),
])
def test_an_impossible_combination_fails_naming_the_option(overrides, error, message):
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), OmegaConf.from_dotlist(overrides))
    with pytest.raises(error, match=message):
        check_layer_inputs(cfg)
    with pytest.raises(error, match=message):
        build_parser(cfg, _sizes(), layer_sizes={"xpos": 7})


def test_a_run_fails_before_reading_data(tmp_path):
    cfg = tiny_config("model.layers=[xpos]", "model.layer_inputs=[xpos]",
                      "data.train_file=/nonexistent/train.conllu")
    with pytest.raises(NotImplementedError, match="model.layer_inputs"):
        Trainer(cfg, run_dir=tmp_path)


def test_a_layer_without_classes_is_not_fed(caplog):
    model = _model("layers=[xpos,feats]", "layer_inputs=[xpos,feats]", layer_sizes={"feats": 6})
    assert list(model.scorer.tag_inputs) == ["feats"]
    assert "['xpos'] not predicted" in caplog.text


def _fed_ids(model, batch, *, grad: bool):
    """The class ids each fed layer's embedding read in one forward pass, and the output."""
    seen = {}
    hooks = [embed.register_forward_hook(lambda m, args, out, name=name: seen.__setitem__(name, args[0]))
             for name, embed in model.scorer.tag_inputs.items()]
    try:
        with torch.set_grad_enabled(grad):
            out = model(batch)
    finally:
        for hook in hooks:
            hook.remove()
    return seen, out


def test_training_embeds_the_heads_argmax_not_the_gold_classes(fed_checkpoint, morph_files):
    model, vocabs, _ = load_parser(fed_checkpoint)
    batch = collate(encode_all(read_conllu(morph_files[0]).sentences[:6], vocabs), labeled=True)
    model.train()
    torch.manual_seed(0)
    first, out = _fed_ids(model, batch, grad=True)
    assert set(first) == {"upos", "xpos", "feats"} and {"tags", "xpos"} <= set(out.auxiliary)
    golds = {}
    for name, ids in first.items():
        # gold classes that disagree with the head everywhere: the input does not move
        head = out.tag_scores if name == "upos" else out.layer_scores[name]
        best = head[..., 3:].argmax(-1) + 3
        words = batch.word_mask
        assert torch.equal(ids[words], best[words]) and (ids[:, 0] == 2).all()
        assert (ids[~words & (torch.arange(ids.shape[1]) > 0)] == 0).all()
        wrong = (batch.upos if name == "upos" else batch.layers[name]).clone()
        wrong[words] = torch.where(best[words] == 3, 4, 3)
        golds[name] = wrong
    batch = dataclasses.replace(batch, upos=golds.pop("upos"), layers={**batch.layers, **golds})
    torch.manual_seed(0)
    second, _ = _fed_ids(model, batch, grad=True)
    for name in first:
        gold = batch.upos if name == "upos" else batch.layers[name]
        assert torch.equal(first[name], second[name])
        assert not torch.equal(second[name][batch.word_mask], gold[batch.word_mask])


def test_prediction_never_reads_the_inputs_upos_xpos_and_feats(fed_checkpoint, morph_files, tmp_path):
    dev = morph_files[1]
    lines = dev.read_text(encoding="utf-8").split("\n")
    blank, garbage = [], []
    for k, line in enumerate(lines):
        cols = line.split("\t")
        if len(cols) == 10 and cols[0].isdigit():
            blank.append("\t".join(cols[:3] + ["_", "_", "_"] + cols[6:]))
            garbage.append("\t".join(cols[:3] + [("NOUN", "X")[k % 2], f"X{k}", f"Junk=Yes{k % 3}"]
                                      + cols[6:]))
        else:
            blank.append(line)
            garbage.append(line)
    outputs = []
    for name, text in (("blank", blank), ("garbage", garbage)):
        source, out = tmp_path / f"{name}.conllu", tmp_path / f"{name}.out.conllu"
        source.write_text("\n".join(text), encoding="utf-8")
        assert predict_main([f"checkpoint={fed_checkpoint}", f"input={source}", f"output={out}",
                             "confidence=true"]) == 0
        outputs.append(out.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1]  # trees, relations, predicted columns, confidence


def test_it_trains_checkpoints_reloads_and_predicts(fed_checkpoint, morph_files, tmp_path):
    model, vocabs, cfg = load_parser(fed_checkpoint)
    assert list(cfg["model"]["layer_inputs"]) == ["upos", "xpos", "feats"]
    assert model.scorer.lower_lstm is not None
    assert list(model.scorer.tag_inputs) == ["upos", "xpos", "feats"]
    batch = collate(encode_all(read_conllu(morph_files[1]).sentences, vocabs), labeled=False)
    model.eval()
    seen, out = _fed_ids(model, batch, grad=False)
    for name, ids in seen.items():  # prediction feeds the same argmax (no dictionary)
        words = batch.word_mask
        head = out.tag_scores if name == "upos" else out.layer_scores[name]
        assert torch.equal(ids[words], (head[..., 3:].argmax(-1) + 3)[words])
    out_file = tmp_path / "pred.conllu"
    assert predict_main([f"checkpoint={fed_checkpoint}", f"input={morph_files[1]}",
                         f"output={out_file}"]) == 0
    words = [cols for cols in (line.split("\t") for line in out_file.read_text(encoding="utf-8")
                               .split("\n")) if cols[0].isdigit()]
    assert words and all(cols[4] != "_" and cols[6].isdigit() for cols in words)


def test_a_transformer_with_two_bilstm_layers_feeds_them_and_restores_without_its_folder(
        minilm, tmp_path):
    folder = tmp_path / "minilm"
    shutil.copytree(minilm, folder)
    vocabs = Vocabularies.build([sentence(WORDS)])
    cfg = transformer_config(folder, layers=["xpos"], layer_inputs=["xpos"])
    cfg.encoder.lstm_layers = 2
    model = build_parser(cfg, vocabs.sizes(), chars=vocabs.chars, layer_sizes={"xpos": 6}).eval()
    assert model.scorer.lower_lstm is not None and model.scorer.lstm.num_layers == 1
    batch = collate(encode_all([sentence(WORDS)], vocabs), labeled=False)
    seen, before = _fed_ids(model, batch, grad=False)
    assert seen["xpos"].shape == batch.words.shape
    torch.save(model.state_dict(), tmp_path / "model.pt")
    shutil.rmtree(folder)  # rebuilt from the checkpoint: the layers after it too
    restored = build_parser(cfg, vocabs.sizes(), chars=vocabs.chars, layer_sizes={"xpos": 6})
    restored.load_state_dict(torch.load(tmp_path / "model.pt", weights_only=False))
    after = restored.eval()(batch)
    torch.testing.assert_close(after.dist.scores, before.dist.scores)
