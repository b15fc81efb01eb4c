"""``feats_factored``: FEATS with whole-string classes scored as the sum of their features
(:class:`parser.data.layers.tags.FactoredLinear`), trained, checkpointed and predicted as
``feats`` is."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from parser.cli.predict import main as predict_main
from parser.config import ModelConfig
from parser.data.layers import layer_of
from parser.data.layers.tags import FactoredLinear, feature_pairs
from parser.data.vocab import Vocab
from parser.inference import load_parser
from parser.models import build_parser
from parser.models.layers import LinearScores
from parser.models.parser_model import layers_of
from tests.layers.helpers import FEATS, train_layers

CLASSES = Vocab(["Number=Sing", "_", "Gender=Masc|Number=Sing", "Case=Acc,Nom|Number=Plur"]).tokens


def test_feature_pairs_of_a_string():
    assert feature_pairs("Gender=Masc|Number=Sing") == [("Gender", "Masc"), ("Number", "Sing")]
    assert feature_pairs("Case=Acc,Nom") == [("Case", "Acc,Nom")]
    assert feature_pairs("_") == [] and feature_pairs("<unk>") == []


def test_each_class_row_is_the_sum_of_its_features_rows():
    torch.manual_seed(0)
    head = FactoredLinear(6, CLASSES)
    # features Case, Gender, Number: (absent, Acc,Nom), (absent, Masc), (absent, Plur, Sing)
    assert head.pairs.shape == (len(CLASSES), 2 + 2 + 3)
    assert (head.pairs.sum(1) == 3).all()  # one value (or "absent") per feature, every class
    w = dict(zip(CLASSES, head.weight))
    # Gender=Masc|Number=Sing - Number=Sing = Gender:Masc - Gender:absent, the same for "_" vs Number=Sing
    gender = head.factor_weight[3] - head.factor_weight[2]
    torch.testing.assert_close(w["Gender=Masc|Number=Sing"] - w["Number=Sing"], gender)
    number_sing = head.factor_weight[6] - head.factor_weight[4]
    torch.testing.assert_close(w["Number=Sing"] - w["_"], number_sing)
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(head(x), x @ head.weight.T + head.bias)


def test_the_lazy_prediction_path_reads_it_as_a_linear_head():
    torch.manual_seed(1)
    head = FactoredLinear(6, CLASSES)
    states = torch.randn(2, 4, 6)
    lazy = LinearScores(head, states)
    full = head(states)
    b, t, c = torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([4, 6])
    torch.testing.assert_close(lazy.cells(b, t, c), full[b, t, c])
    torch.testing.assert_close(lazy.full(), full)


def test_gradients_reach_the_shared_feature_rows():
    head = FactoredLinear(4, CLASSES)
    loss = torch.nn.functional.cross_entropy(head(torch.randn(3, 4)), torch.tensor([3, 5, 5]))
    loss.backward()
    assert head.factor_weight.grad.abs().sum() > 0 and head.class_bias.grad.abs().sum() > 0


def test_the_head_needs_the_class_strings():
    with pytest.raises(ValueError, match="class strings"):
        layer_of("feats_factored").head(8, 7)


def test_two_layers_of_one_column_are_refused():
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig),
                          OmegaConf.from_dotlist(["layers=[xpos,feats,feats_factored]"]))
    with pytest.raises(ValueError, match=r"\['feats', 'feats_factored'\] all predict the FEATS"):
        layers_of(cfg)


def test_it_trains_checkpoints_reloads_and_predicts(morph_files, tmp_path):
    train, dev = morph_files
    checkpoint = train_layers(tmp_path / "run", train, dev, "model.layers=[xpos,feats_factored]",
                              steps=40)
    model, vocabs, cfg = load_parser(checkpoint)
    assert isinstance(model.scorer.layer_heads["feats_factored"], FactoredLinear)
    assert list(cfg["model"]["layers"]) == ["xpos", "feats_factored"]
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.conllu"
        assert predict_main([f"checkpoint={checkpoint}", f"input={dev}", f"output={out}"]) == 0
        outputs.append(out.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1]
    feats = [line.split("\t")[5] for line in outputs[0].split("\n")
             if line and line.split("\t")[0].isdigit()]
    assert feats and set(feats) <= {*FEATS.values(), "_"} and set(feats) != {"_"}


def test_a_fresh_model_without_the_vocabularies_fails_naming_the_option():
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig),
                          OmegaConf.from_dotlist(["layers=[feats_factored]", "lstm_hidden=8"]))
    sizes = {"words": 20, "chars": 20, "upos": 10, "rels": 5}
    with pytest.raises(ValueError, match="layer_vocabs"):
        build_parser(cfg, sizes, layer_sizes={"feats_factored": len(CLASSES)})
    model = build_parser(cfg, sizes, layer_sizes={"feats_factored": len(CLASSES)},
                         layer_vocabs={"feats_factored": Vocab(CLASSES[3:])})
    assert model.scorer.layer_heads["feats_factored"].pairs.shape[0] == len(CLASSES)
