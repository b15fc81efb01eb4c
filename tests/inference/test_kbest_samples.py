"""parser-predict kbest= and samples=: the trees written are TreeCRF.kbest's (and exact samples),
with their relations from ParserModel.relations and tree_prob = exp(log_prob) recomputed here one
sentence at a time; rank 1 is the normal output; samples do not depend on the batching."""

from __future__ import annotations

import math
from pathlib import Path

import conllu
import pytest
import torch

from parser.cli.predict import main as predict_main
from parser.data.batching import collate, encode
from parser.data.conllu_io import read_conllu
from parser.eval.validate import validate_conllu
from parser.inference import load_parser
from parser.structs import TreeCRF
from tests.inference.helpers import model_output

K = 4


def _predict(checkpoint: Path, source: Path, output: Path, *options: str) -> str:
    assert predict_main([f"checkpoint={checkpoint}", f"input={source}", f"output={output}",
                         *options]) == 0
    return output.read_text(encoding="utf-8")


def _heads(tokens: conllu.TokenList) -> list[int]:
    return [t["head"] for t in tokens if isinstance(t["id"], int)]


def _deprels(tokens: conllu.TokenList) -> list[str]:
    return [t["deprel"] for t in tokens if isinstance(t["id"], int)]


def _without_probs(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("# tree_prob"))


def _upos(sentence, vocabs) -> torch.Tensor:
    return collate([encode(sentence, vocabs, index=0)], labeled=False).upos


def _arc_crf(dist) -> TreeCRF:
    return TreeCRF(dist.arc_scores, dist.lengths, single_root=dist.single_root)


def test_kbest_trees_are_the_crf_kbest_and_rank_one_the_normal_output(tiny_checkpoint, fixtures,
                                                                     tmp_path):
    source = fixtures / "tiny-dev.conllu"
    written = conllu.parse(_predict(tiny_checkpoint, source, tmp_path / "k.conllu", f"kbest={K}"))
    plain = conllu.parse(_predict(tiny_checkpoint, source, tmp_path / "plain.conllu"))
    model, vocabs, _ = load_parser(tiny_checkpoint)
    sentences = read_conllu(source).sentences
    ids = [t.metadata["sent_id"] for t in written]
    assert len(ids) == len(set(ids))
    at = same = 0
    for sentence, best in zip(sentences, plain):
        out = model_output(model, vocabs, sentence)
        kbest = _arc_crf(out.dist).kbest(K).heads
        ranks = [r for r in range(K) if int(kbest[r, 0, 0]) >= 0]
        assert len(ranks) == K  # the fixture's sentences have at least K trees
        mine = written[at : at + len(ranks)]
        at += len(ranks)
        probs = []
        for rank, tokens in zip(ranks, mine):
            assert tokens.metadata["tree_rank"] == str(rank + 1)
            assert tokens.metadata["sent_id"] == f"{sentence.sent_id}/{rank + 1}"
            heads = kbest[rank]
            assert _heads(tokens) == heads[0, 1:].tolist()
            rels = model.decoder.relations(out, heads, upos=_upos(sentence, vocabs))
            assert _deprels(tokens) == [vocabs.rels.token(r) for r in rels[0, 1:].tolist()]
            log_prob = float(out.dist.log_prob(heads)[0])
            prob = float(tokens.metadata["tree_prob"])
            assert prob == pytest.approx(math.exp(log_prob), rel=1e-4)
            probs.append(prob)
        assert probs == sorted(probs, reverse=True)
        mst = out.dist.argmax()
        mst = mst[0] if isinstance(mst, tuple) else mst
        if model.labels != "classifier":
            continue  # a joint model's argmax maximises over labels, k-best sums them out
        assert _heads(mine[0]) == mst[0, 1:].tolist()
        if _heads(best) == mst[0, 1:].tolist():  # no decoder rule (UD punct) moved an arc
            assert _deprels(mine[0]) == _deprels(best)
            same += 1
    assert same or model.labels != "classifier"
    assert at == len(written)
    assert validate_conllu(tmp_path / "k.conllu", level=2) == []


@pytest.mark.parametrize("rules", ["ud_rules=none", "ud_rules=root,left_to_right,one_subject,one_object"])
def test_rank_one_is_the_normal_output_without_a_decoding_rule(tiny_checkpoint, fixtures, tmp_path,
                                                                rules):
    """Without the UD punct rule (which moves PUNCT arcs after decoding, as attach_to_units does),
    a classifier model's rank 1 is exactly what parser-predict writes."""
    source = fixtures / "tiny-dev.conllu"
    kbest = conllu.parse(_predict(tiny_checkpoint, source, tmp_path / "k.conllu", "kbest=2", rules))
    plain = conllu.parse(_predict(tiny_checkpoint, source, tmp_path / "p.conllu", rules))
    first = [t for t in kbest if t.metadata["tree_rank"] == "1"]
    assert len(first) == len(plain) == 12
    model, _, _ = load_parser(tiny_checkpoint)
    if model.labels == "classifier":
        assert [(_heads(a), _deprels(a)) for a in first] == [(_heads(b), _deprels(b)) for b in plain]


def test_kbest_writes_fewer_trees_for_short_sentences(tiny_checkpoint, tmp_path):
    source = tmp_path / "short.conllu"
    source.write_text("# sent_id = two\n1\tHi\thi\tINTJ\t_\t_\t_\t_\t_\t_\n"
                      "2\tthere\tthere\tADV\t_\t_\t_\t_\t_\t_\n\n", encoding="utf-8")
    written = conllu.parse(_predict(tiny_checkpoint, source, tmp_path / "k.conllu", "kbest=5"))
    assert [t.metadata["tree_rank"] for t in written] == ["1", "2"]  # two words: two trees
    assert sorted(_heads(t) for t in written) == [[0, 1], [2, 0]]
    total = sum(float(t.metadata["tree_prob"]) for t in written)
    assert total == pytest.approx(1.0, abs=1e-5)


def test_samples_are_reproducible_whatever_the_batching(tiny_checkpoint, fixtures, tmp_path):
    source = fixtures / "tiny-dev.conllu"
    base = _predict(tiny_checkpoint, source, tmp_path / "a.conllu", "samples=6", "seed=11")
    small = _predict(tiny_checkpoint, source, tmp_path / "b.conllu", "samples=6", "seed=11",
                     "tokens_per_batch=15", "chunk_size=3")
    # The same trees; the probabilities only up to float32 noise between batchings.
    assert _without_probs(small) == _without_probs(base)
    for one, two in zip(conllu.parse(small), conllu.parse(base)):
        assert float(one.metadata["tree_prob"]) == pytest.approx(float(two.metadata["tree_prob"]),
                                                                 rel=1e-4)
    other = _predict(tiny_checkpoint, source, tmp_path / "c.conllu", "samples=6", "seed=12")
    assert other != base
    written = conllu.parse(base)
    sentences = read_conllu(source).sentences
    assert len(written) == 6 * len(sentences)
    model, vocabs, _ = load_parser(tiny_checkpoint)
    for i, sentence in enumerate(sentences):
        out = model_output(model, vocabs, sentence)
        for draw, tokens in enumerate(written[6 * i : 6 * i + 6], start=1):
            assert tokens.metadata["sample"] == str(draw)
            assert tokens.metadata["sent_id"] == f"{sentence.sent_id}/{draw}"
            heads = torch.tensor([[0, *_heads(tokens)]])
            assert float(tokens.metadata["tree_prob"]) == pytest.approx(
                math.exp(float(out.dist.log_prob(heads)[0])), rel=1e-4)
            rels = model.decoder.relations(out, heads, upos=_upos(sentence, vocabs))
            assert _deprels(tokens) == [vocabs.rels.token(r) for r in rels[0, 1:].tolist()]
    assert validate_conllu(tmp_path / "a.conllu", level=2) == []


def test_sample_frequencies_follow_the_tree_probabilities(tiny_checkpoint, tmp_path):
    """Three words (9 single-root trees): the frequencies of 3000 samples against the written
    probabilities, within 4 standard deviations."""
    source = tmp_path / "three.conllu"
    source.write_text("# sent_id = s\n" + "".join(
        f"{i}\t{w}\t{w}\tX\t_\t_\t_\t_\t_\t_\n" for i, w in enumerate(["the", "dog", "runs"], 1))
        + "\n", encoding="utf-8")
    written = conllu.parse(_predict(tiny_checkpoint, source, tmp_path / "s.conllu",
                                    "samples=3000", "seed=5"))
    counts: dict[tuple, int] = {}
    probs: dict[tuple, float] = {}
    for tokens in written:
        key = tuple(_heads(tokens))
        counts[key] = counts.get(key, 0) + 1
        probs[key] = float(tokens.metadata["tree_prob"])
    for key, count in counts.items():
        p = probs[key]
        assert abs(count / 3000 - p) <= 4 * math.sqrt(p * (1 - p) / 3000) + 1e-3


def test_kbest_and_samples_exclude_each_other(tiny_checkpoint, fixtures, tmp_path, capsys):
    code = predict_main([f"checkpoint={tiny_checkpoint}", f"input={fixtures / 'tiny-dev.conllu'}",
                         f"output={tmp_path / 'x.conllu'}", "kbest=2", "samples=2"])
    assert code != 0
    assert "kbest=2, samples=2" in capsys.readouterr().err
    assert not (tmp_path / "x.conllu").exists()
