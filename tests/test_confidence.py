"""parser-predict confidence=true: the MISC and comment values equal the tree CRF's marginals,
log-probability and entropy recomputed here from the model, one sentence at a time, at the heads
actually written; other MISC content is kept; without the option the output is unchanged."""

from __future__ import annotations

import math
from pathlib import Path

import conllu
import pytest
import torch

from parser.cli.predict import main as predict_main
from parser.data.batching import collate, encode
from parser.data.conllu_io import format_sentence, read_conllu
from parser.eval.validate import validate_conllu
from parser.inference import load_parser
from parser.inference.confidence import batch_confidence
from parser.models.decoder import N_SPECIAL_RELS
from parser.models.edge_scores import EdgeScores, to_output
from parser.train.loop import Trainer
from tests.structs.brute import all_trees
from tests.train.helpers import tiny_config

ROUNDING = 5e-5 + 1e-5  # 4 decimals written, plus float32 noise between batchings


@pytest.fixture(scope="module", params=["classifier", "joint"])
def checkpoint(request, tmp_path_factory) -> Path:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    run_dir = tmp_path_factory.mktemp(f"run-{request.param}")
    Trainer(tiny_config("trainer.max_steps=40", "trainer.eval_every=40",
                        f"model.labels={request.param}"), run_dir=run_dir).fit()
    torch.set_num_threads(previous)
    return run_dir / "checkpoints" / "best.pt"


def _predict(checkpoint: Path, source: Path, output: Path, *options: str) -> str:
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={output}",
                         *options]) == 0
    return output.read_text(encoding="utf-8")


def _recomputed(checkpoint: Path, source: Path, written: list[conllu.TokenList]) -> list[dict]:
    """Per sentence, from the model alone: the written tree's head / label probabilities,
    log-probability and the CRF's entropy."""
    model, vocabs, _ = load_parser(checkpoint)
    result = []
    for i, (sentence, parsed) in enumerate(zip(read_conllu(source).sentences, written)):
        words = [t for t in parsed if isinstance(t["id"], int)]
        batch = collate([encode(sentence, vocabs, index=i)], labeled=False)
        with torch.no_grad():
            out = model(batch)
        heads = torch.tensor([[0] + [t["head"] for t in words]])
        rels = [vocabs.rels.index(t["deprel"]) for t in words]
        dist, head_probs, label_probs = out.dist, [], []
        for dep, (head, rel) in enumerate(zip(heads[0, 1:].tolist(), rels), start=1):
            arc = float(dist.arc_marginals[0, dep, head])
            head_probs.append(arc)
            if out.label_scores is not None:
                scores = out.label_scores[0, dep, head].clone()
                scores[:N_SPECIAL_RELS] = float("-inf")
                label_probs.append(float(scores.softmax(-1)[rel]))
            else:
                label_probs.append(float(dist.marginals[0, dep, head, rel]) / arc)
        result.append({"head": head_probs, "label": label_probs,
                       "logprob": float(dist.log_prob(heads)[0]), "entropy": float(dist.entropy()[0])})
    return result


@pytest.mark.parametrize("decoder", [[], ["projective=true", "attach_to_units=PUNCT"]],
                         ids=["mst", "projective-units"])
def test_confidence_values_are_the_crf_marginals(checkpoint, fixtures, tmp_path, decoder):
    source = fixtures / "tiny-dev.conllu"
    text = _predict(checkpoint, source, tmp_path / "conf.conllu", "confidence=true", *decoder)
    written = conllu.parse(text)
    expected = _recomputed(checkpoint, source, written)
    assert len(written) == len(expected) > 0
    for parsed, want in zip(written, expected):
        words = [t for t in parsed if isinstance(t["id"], int)]
        head = [float(t["misc"]["HeadProb"]) for t in words]
        label = [float(t["misc"]["DeprelProb"]) for t in words]
        assert all(0.0 <= p <= 1.0 for p in head + label)
        assert head == pytest.approx(want["head"], abs=ROUNDING)
        assert label == pytest.approx(want["label"], abs=ROUNDING)
        meta = parsed.metadata
        assert float(meta["tree_logprob"]) == pytest.approx(want["logprob"], abs=ROUNDING)
        assert float(meta["tree_entropy"]) == pytest.approx(want["entropy"], abs=ROUNDING)
        assert float(meta["expected_correct"]) == pytest.approx(sum(want["head"]), abs=ROUNDING * len(words))
        assert float(meta["tree_logprob"]) <= 0.0 and float(meta["tree_entropy"]) >= 0.0
        assert math.isfinite(float(meta["tree_logprob"])) or decoder  # MST: a tree of the CRF


def test_confidence_keeps_other_misc_and_comments_and_validates(checkpoint, fixtures, tmp_path):
    source = fixtures / "tiny-dev.conllu"
    plain = _predict(checkpoint, source, tmp_path / "plain.conllu")
    text = _predict(checkpoint, source, tmp_path / "conf.conllu", "confidence=true")
    assert "SpaceAfter=No|HeadProb=" in text
    for before, after in zip(conllu.parse(plain), conllu.parse(text)):
        for key, value in before.metadata.items():
            assert after.metadata[key] == value
        for old, new in zip(before, after):
            kept = {k: v for k, v in (new["misc"] or {}).items() if k not in ("HeadProb", "DeprelProb")}
            assert kept == (old["misc"] or {})
            if isinstance(old["id"], int):
                assert "HeadProb" in new["misc"]
            assert {k: v for k, v in new.items() if k != "misc"} == {
                k: v for k, v in old.items() if k != "misc"}
    # Parsing the output again replaces the values instead of adding a second copy.
    again = _predict(checkpoint, tmp_path / "conf.conllu", tmp_path / "again.conllu", "confidence=true")
    assert again.count("# tree_entropy") == text.count("# tree_entropy") == len(conllu.parse(text))
    assert again.count("HeadProb=") == text.count("HeadProb=")
    assert validate_conllu(tmp_path / "conf.conllu", level=2) == []


def test_without_confidence_the_output_is_unchanged(checkpoint, fixtures, tmp_path):
    source = fixtures / "tiny-dev.conllu"
    default = _predict(checkpoint, source, tmp_path / "default.conllu")
    off = _predict(checkpoint, source, tmp_path / "off.conllu", "confidence=false")
    assert off == default
    assert "HeadProb" not in default and "tree_logprob" not in default
    # format_sentence without misc / comments: the same bytes as before the option existed.
    for sentence in read_conllu(source).sentences:
        assert format_sentence(sentence) == format_sentence(sentence, misc=None, comments=None)
        assert format_sentence(sentence) == "\n".join(sentence.lines) + "\n\n"


@pytest.mark.parametrize("labels", ["classifier", "joint"])
def test_batch_confidence_against_enumeration(labels):
    """Peaked random scores (unlike the tiny trained model's), every labeled tree enumerated;
    the written tree is not the best one, as after a re-attachment."""
    n, n_labels = 4, 5
    generator = torch.Generator().manual_seed(3)
    arcs = 3 * torch.randn(1, n + 1, n + 1, generator=generator)
    rel_scores = 3 * torch.randn(1, n + 1, n + 1, n_labels, generator=generator)
    rel_scores[..., :N_SPECIAL_RELS] -= 2.0  # special labels still carry mass in a joint CRF
    lengths = torch.tensor([n])
    out = to_output(EdgeScores(arcs=arcs, labels=rel_scores), lengths, labels=labels)
    trees = all_trees(n, single_root=True)
    written = trees[len(trees) // 2]
    heads = torch.tensor([[0, *written]])
    rels = torch.tensor([[0, 3, 4, 3, 4]])
    (got,) = batch_confidence(out, heads, rels)

    def arc(d, h):
        return float(arcs[0, d, h])

    if labels == "joint":  # labeled trees: arc + label scores, labels summed out per arc
        weight = {(d, h): math.log(sum(math.exp(arc(d, h) + float(rel_scores[0, d, h, label]))
                                       for label in range(n_labels)))
                  for d in range(1, n + 1) for h in range(n + 1)}
    else:
        weight = {(d, h): arc(d, h) for d in range(1, n + 1) for h in range(n + 1)}
    log_w = [sum(weight[d, h] for d, h in enumerate(t, start=1)) for t in trees]
    log_z = math.log(sum(math.exp(w) for w in log_w))
    probs = [math.exp(w - log_z) for w in log_w]
    head_probs = [sum(p for p, t in zip(probs, trees) if t[d - 1] == written[d - 1])
                  for d in range(1, n + 1)]
    entropy = -sum(p * math.log(p) for p in probs)
    if labels == "joint":
        label_probs, label_entropy = [], 0.0
        for d in range(1, n + 1):
            for h in range(n + 1):
                row = torch.softmax(arcs[0, d, h] + rel_scores[0, d, h].double(), -1)
                p_arc = sum(p for p, t in zip(probs, trees) if t[d - 1] == h)
                label_entropy -= p_arc * float((row * row.clamp(min=1e-300).log()).sum())
            row = torch.softmax(rel_scores[0, d, written[d - 1]].double(), -1)
            label_probs.append(float(row[rels[0, d]]))
        entropy += label_entropy  # over labeled trees
    else:
        scores = rel_scores[0].clone()
        scores[..., :N_SPECIAL_RELS] = float("-inf")
        label_probs = [float(scores[d, written[d - 1]].softmax(-1)[rels[0, d]])
                       for d in range(1, n + 1)]
    assert got.head_probs == pytest.approx(head_probs, abs=1e-5)
    assert got.deprel_probs == pytest.approx(label_probs, abs=1e-5)
    assert got.tree_logprob == pytest.approx(log_w[len(trees) // 2] - log_z, abs=1e-4)
    assert got.tree_entropy == pytest.approx(entropy, abs=1e-4)
    assert got.expected_correct == pytest.approx(sum(head_probs), abs=1e-5)
    assert max(head_probs) - min(head_probs) > 0.05  # peaked enough to tell heads apart
