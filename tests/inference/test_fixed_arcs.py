"""keep_heads=given and the API's required / forbidden arcs: the given arcs are kept, the other
words get the argmax of the restricted tree CRF (recomputed here with an explicit mask), the
marginals of kept arcs are 1, k-best trees and samples keep them too; a sentence whose arcs admit
no tree is reported and written as read while the others are parsed."""

from __future__ import annotations

import logging
import math

import conllu
import pytest
import torch

from parser.cli.predict import PARTIAL
from parser.cli.predict import main as predict_main
from parser.data.conllu_io import read_conllu
from parser.inference import load_decoder, load_parser
from parser.inference.fixed_arcs import ArcConstraints, constrain_output
from parser.models.decoder import N_SPECIAL_RELS
from parser.pipeline import Pipeline
from parser.structs import ParserOutput, TreeCRF
from tests.inference.helpers import model_output
from tests.structs.brute import all_trees

REFUSED = {"tiny-dev-02": "1 -> 4 -> 1", "tiny-dev-03": "words 2, 6", "tiny-dev-05": "out of range"}


def _partial(source, target) -> None:
    """Odd words lose HEAD and DEPREL; three sentences get heads that admit no tree."""
    blocks = source.read_text(encoding="utf-8").strip("\n").split("\n\n")
    out = []
    for block in blocks:
        sent_id = next(line.split("= ", 1)[1] for line in block.splitlines() if "sent_id" in line)
        lines = []
        for line in block.splitlines():
            cols = line.split("\t")
            if len(cols) == 10 and cols[0].isdigit():
                word = int(cols[0])
                if word % 2:
                    cols[6] = cols[7] = "_"
                if sent_id == "tiny-dev-02" and word in (1, 4):
                    cols[6] = "4" if word == 1 else "1"
                if sent_id == "tiny-dev-03" and word in (2, 6):
                    cols[6], cols[7] = "0", "root"
                if sent_id == "tiny-dev-05" and word == 2:
                    cols[6] = "99"
            lines.append("\t".join(cols))
        out.append("\n".join(lines))
    target.write_text("\n\n".join(out) + "\n\n", encoding="utf-8")


def _words(tokens):
    return [t for t in tokens if isinstance(t["id"], int)]


def _restricted_best(model, out, kept: dict[int, tuple[int, str | None]], vocabs) -> list[int]:
    """The argmax of the model's CRF over trees with the kept arcs (and kept relations), from an
    explicit mask."""
    dist = out.dist
    size = dist.scores.shape[1]
    allowed = torch.ones(1, size, size, dtype=torch.bool)
    for dep, (head, _) in kept.items():
        allowed[0, dep] = False
        allowed[0, dep, head] = True
    if not dist.labeled:
        best = dist.restrict(allowed).argmax()
    else:
        scores = dist.scores.clone()
        for dep, (head, rel) in kept.items():
            rel_id = vocabs.rels.index(rel)
            if rel is not None and rel_id >= N_SPECIAL_RELS and math.isfinite(scores[0, dep, head, rel_id]):
                keep = scores[0, dep, head, rel_id].clone()
                scores[0, dep, head] = float("-inf")
                scores[0, dep, head, rel_id] = keep
        scores = scores.masked_fill(~allowed[..., None], float("-inf"))
        best = TreeCRF(scores, dist.lengths, single_root=dist.single_root).argmax()[0]
    return best[0, 1:].tolist()


def test_keep_heads_given(tiny_checkpoint, fixtures, tmp_path, caplog):
    source = tmp_path / "partial.conllu"
    _partial(fixtures / "tiny-dev.conllu", source)
    output = tmp_path / "kept.conllu"
    with caplog.at_level(logging.WARNING):
        assert predict_main([f"checkpoint={tiny_checkpoint}", f"input={source}", f"output={output}",
                             "keep_heads=given", "confidence=true"]) == PARTIAL
    messages = "\n".join(r.getMessage() for r in caplog.records)
    for sent_id, words in REFUSED.items():
        assert f"sentence {sent_id}" in messages and words in messages
    assert f"{len(REFUSED)} of 12 sentences failed" in messages
    written = conllu.parse(output.read_text(encoding="utf-8"))
    blocks = output.read_text(encoding="utf-8").strip("\n").split("\n\n")
    model, vocabs, _ = load_parser(tiny_checkpoint)
    sentences = read_conllu(source, require_trees=False, check_heads=False).sentences
    assert len(written) == len(sentences) == 12
    for sentence, tokens, block in zip(sentences, written, blocks):
        if sentence.sent_id in REFUSED:  # written as read, with the reason
            assert REFUSED[sentence.sent_id] in tokens.metadata["parse_error"]
            assert [line for line in block.splitlines() if "parse_error" not in line] == sentence.lines
            continue
        words = _words(tokens)
        kept = {dep: (head, rel) for dep, (head, rel) in
                enumerate(zip(sentence.heads, sentence.deprels), start=1) if head >= 0}
        assert kept  # every sentence keeps some heads
        for dep, (head, rel) in kept.items():
            assert words[dep - 1]["head"] == head and words[dep - 1]["deprel"] == rel
            assert words[dep - 1]["misc"]["HeadProb"] == "1.0000"
        out = model_output(model, vocabs, sentence)
        assert [w["head"] for w in words] == _restricted_best(model, out, kept, vocabs)


def test_keep_heads_with_kbest_and_samples_keeps_the_arcs(tiny_checkpoint, fixtures, tmp_path):
    source = tmp_path / "partial.conllu"
    _partial(fixtures / "tiny-dev.conllu", source)
    sentences = {s.sent_id: s for s in read_conllu(source, require_trees=False, check_heads=False)}
    for option in ("kbest=3", "samples=4"):
        output = tmp_path / f"{option[:5]}.conllu"
        assert predict_main([f"checkpoint={tiny_checkpoint}", f"input={source}", f"output={output}",
                             "keep_heads=given", option, "seed=2"]) == PARTIAL
        written = conllu.parse(output.read_text(encoding="utf-8"))
        totals: dict[str, float] = {}
        for tokens in written:
            sent_id = tokens.metadata["sent_id"].rsplit("/", 1)[0]
            if sent_id in REFUSED:
                assert "parse_error" in tokens.metadata
                continue
            sentence = sentences[sent_id]
            for word, head in zip(_words(tokens), sentence.heads):
                assert head < 0 or word["head"] == head
            totals[sent_id] = totals.get(sent_id, 0.0) + float(tokens.metadata["tree_prob"])
        assert len(totals) == 12 - len(REFUSED)
        if option.startswith("kbest"):  # probabilities conditional on the kept arcs
            assert all(0 < total <= 1 + 1e-4 for total in totals.values())


@pytest.mark.parametrize("labeled", [False, True])
def test_restriction_against_enumeration(labeled):
    n = 4
    generator = torch.Generator().manual_seed(7)
    shape = (1, n + 1, n + 1, 3) if labeled else (1, n + 1, n + 1)
    scores = 2 * torch.randn(*shape, generator=generator, dtype=torch.float64)
    dist = TreeCRF(scores, torch.tensor([n]))
    arc = dist.arc_scores[0]
    constraints = ArcConstraints.of(required=[(2, 1)], forbidden=[(3, 0), (1, 3), (4, 2)])
    restricted, problems = constrain_output(ParserOutput(dist=dist), [constraints], None)
    assert problems == [None]
    trees = [t for t in all_trees(n, single_root=True) if t[1] == 1 and t[2] != 0 and t[0] != 3 and t[3] != 2]
    weights = {tuple(t): sum(float(arc[d, h]) for d, h in enumerate(t, start=1)) for t in trees}
    log_z = math.log(sum(math.exp(w) for w in weights.values()))
    assert float(restricted.dist.log_partition[0]) == pytest.approx(log_z, abs=1e-9)
    best = max(weights, key=weights.get)
    heads = restricted.dist.argmax()
    heads = heads[0] if isinstance(heads, tuple) else heads
    if not labeled:  # the labeled argmax maximises over labels, not their sum
        assert tuple(heads[0, 1:].tolist()) == best
    crf = TreeCRF(restricted.dist.arc_scores, restricted.dist.lengths)
    ranked = crf.kbest(len(trees) + 2).heads[:, 0, 1:]
    assert [tuple(t) for t in ranked[: len(trees)].tolist()] == sorted(weights, key=lambda t: -weights[t])
    assert (ranked[len(trees):] == -1).all()
    marginal = restricted.dist.arc_marginals[0]
    assert float(marginal[2, 1]) == pytest.approx(1.0) and float(marginal[3, 0]) == 0.0


def test_infeasible_constraints_are_found():
    n = 3
    dist = TreeCRF(torch.zeros(2, n + 1, n + 1), torch.tensor([n, n]))
    every_head_of_1 = ArcConstraints.of(forbidden=[(1, 0), (1, 2), (1, 3)])
    cycle = ArcConstraints.of(required=[(1, 2), (2, 3), (3, 1)])
    restricted, problems = constrain_output(ParserOutput(dist=dist), [every_head_of_1, cycle], None)
    assert "words 1" in problems[0] and "1 -> 2 -> 3 -> 1" in problems[1]
    assert torch.isfinite(restricted.dist.log_partition).all()  # refused rows left unconstrained


def test_api_required_and_forbidden(tiny_checkpoint):
    model, vocabs, config = load_decoder(tiny_checkpoint, device="cpu")
    nlp = Pipeline(parser=(model, vocabs, config), batch_size=50)
    words = [["The", "cat", "sleeps", "on", "the", "sofa", "."], ["I", "want", "to", "go", "."],
             ["Dogs", "bark", "."]]
    required = [{(1, 2), (3, 0)}, {(4, 2)}, set()]
    forbidden = [{(7, 3)}, set(), {(1, 0), (1, 2), (1, 3)}]  # sentence 3: word 1 has no head left
    parsed = nlp.parse(words, required=required, forbidden=forbidden)
    assert len(parsed) == 3
    for tokens, must, never in zip(parsed[:2], required, forbidden):
        arcs = {(w["id"], w["head"]) for w in _words(tokens)}
        assert must <= arcs and not never & arcs
    assert "words 1" in parsed[2].metadata["parse_error"]
    assert all(w["head"] is None for w in _words(parsed[2]))
    kbest = nlp.parse(words, kbest=2)
    assert [t.metadata["sent_id"] for t in kbest] == ["1/1", "1/2", "2/1", "2/2", "3/1", "3/2"]
    assert all(float(t.metadata["tree_prob"]) > 0 for t in kbest)
    samples = nlp.parse(words, samples=3, seed=1)
    again = Pipeline(parser=(model, vocabs, config), batch_size=4).parse(words, samples=3, seed=1)
    assert [[(w["head"], w["deprel"]) for w in _words(t)] for t in samples] == [
        [(w["head"], w["deprel"]) for w in _words(t)] for t in again]
    with pytest.raises(ValueError, match="pre-tokenised"):
        nlp.parse("The cat sleeps.", required=[set()])
