"""parser-select end to end on a tiny parser: the scores are the tree distribution's (brute-force
enumeration), the annotation file holds what docs/annotation.md says, the budget and the cap are
obeyed, and an unreadable pool sentence is counted and skipped, named by file and line."""

from __future__ import annotations

from pathlib import Path

import conllu
import pytest
import torch

from parser.cli.predict import main as predict_main
from parser.cli.select import OPTIONS as SELECT_OPTIONS
from parser.cli.select import main as select_main
from parser.cli.select import selection_decoder
from parser.data.conllu_io import read_conllu
from parser.data.conllu_stream import stream_tokenized
from parser.inference import Annotator, load_parser
from parser.inference.loading import load_decoder
from parser.inference.options import PredictOptions
from parser.inference.selection import LENGTH_BINS, length_bin, quotas
from tests.inference.helpers import model_output
from tests.structs.brute import enumerate_distribution

SHORT = ["The dog barked .", "She saw him there", "Cats sleep .", "I like cold coffee", "Go !"]


def _select(checkpoint: Path, pool: Path, output: Path, *options: str) -> int:
    return select_main([f"checkpoint={checkpoint}", f"pool={pool}", f"output={output}", *options])


def _words(tokens: conllu.TokenList) -> list[conllu.Token]:
    return [t for t in tokens if isinstance(t["id"], int)]


def _misc(token: conllu.Token) -> dict:
    return dict(token["misc"] or {})


@pytest.mark.parametrize("strategy", ["entropy", "errors"])
def test_sentence_scores_are_the_enumerated_tree_distribution(select_checkpoint, tmp_path, strategy):
    pool = tmp_path / "short.txt"
    pool.write_text("\n".join(SHORT) + "\n", encoding="utf-8")
    out = tmp_path / "sel.conllu"
    assert _select(select_checkpoint, pool, out, f"strategy={strategy}", "unit=sentences",
                   f"budget={len(SHORT)}", "normalise=false") == 0
    model, vocabs, _ = load_parser(select_checkpoint)
    written = {t.metadata["pool_position"]: t for t in conllu.parse(out.read_text(encoding="utf-8"))}
    assert len(written) == len(SHORT)
    for position, sentence in enumerate(stream_tokenized(pool), start=1):
        tokens = written[str(position)]
        n = len(sentence)
        dist = model_output(model, vocabs, sentence).dist
        trees, log_weights, log_z = enumerate_distribution(dist.arc_scores[0].double(), n,
                                                           single_root=dist.single_root)
        probs = (log_weights - log_z).exp()
        shown = [int(_misc(t)["PredHead"]) for t in _words(tokens)]  # the tree the annotator sees
        right = torch.tensor([sum(h == s for h, s in zip(tree, shown)) for tree in trees],
                             dtype=probs.dtype)
        expected = {"entropy": float(-(probs * (log_weights - log_z)).sum()),
                    "errors": n - float((probs * right).sum())}[strategy]
        assert float(tokens.metadata["select_score"]) == pytest.approx(expected, abs=1e-4)
        # every word of a whole sentence is asked for; HeadProb is the marginal of its shown head
        assert all(t["head"] is None and t["deprel"] == "_" for t in _words(tokens))
        for t, head in zip(_words(tokens), shown):
            marginal = sum(p for tree, p in zip(trees, probs.tolist()) if tree[t["id"] - 1] == head)
            assert float(_misc(t)["HeadProb"]) == pytest.approx(marginal, abs=1e-4)


# strategy=words pre-fills (and scores) the model's own tree unless ud_rules= is given
@pytest.mark.parametrize("rules, parsed_with", [((), "ud_rules=none"), (("ud_rules=all",), "ud_rules=all")])
def test_word_selection_obeys_budget_and_cap_and_prefills_the_parse(select_checkpoint, fixtures,
                                                                    tmp_path, rules, parsed_with):
    pool = fixtures / "tiny-train.conllu"
    out, ranked = tmp_path / "sel.conllu", tmp_path / "ranked.tsv"
    assert _select(select_checkpoint, pool, out, "strategy=words", "budget=10", "cap=2", *rules,
                   f"ranked={ranked}", f"remainder={tmp_path / 'rest.conllu'}") == 0
    assert predict_main([f"checkpoint={select_checkpoint}", f"input={pool}", parsed_with,
                         f"output={tmp_path / 'parsed.conllu'}"]) == 0
    parsed = {t.metadata["sent_id"]: t for t in conllu.parse((tmp_path / "parsed.conllu").read_text())}
    chosen = conllu.parse(out.read_text(encoding="utf-8"))
    positions = [int(t.metadata["pool_position"]) for t in chosen]
    assert positions == sorted(positions)  # pool order
    asked, orders = [], []
    for tokens in chosen:
        words = [int(w) for w in tokens.metadata["selected_words"].split(",")]
        orders += [int(r) for r in tokens.metadata["select_order"].split(",")]
        assert 1 <= len(words) <= 2  # the cap
        for t, best in zip(_words(tokens), _words(parsed[tokens.metadata["sent_id"]])):
            assert "HeadProb" in _misc(t)
            if t["id"] in words:
                assert (t["head"], t["deprel"]) == (None, "_")
                assert (int(_misc(t)["PredHead"]), _misc(t)["PredDeprel"]) == (best["head"], best["deprel"])
                asked.append((tokens.metadata["sent_id"], t["id"], 1 - float(_misc(t)["HeadProb"])))
            else:
                assert (t["head"], t["deprel"]) == (best["head"], best["deprel"])
    assert len(asked) == 10 and sorted(orders) == list(range(1, 11))  # the budget, exactly
    rows = [line.split("\t") for line in ranked.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == ["rank", "sent_id", "word", "score", "pool_position"]
    assert [int(r[0]) for r in rows[1:]] == list(range(1, 11))
    scores = [float(r[3]) for r in rows[1:]]
    assert scores == sorted(scores, reverse=True)
    assert sorted((r[1], int(r[2])) for r in rows[1:]) == sorted((s, w) for s, w, _ in asked)
    shown = {(s, w): score for s, w, score in asked}  # the score is 1 - HeadProb of the shown head
    assert all(float(r[3]) == pytest.approx(shown[r[1], int(r[2])], abs=1e-4) for r in rows[1:])
    # the remainder: every pool sentence (single words leave the rest of each sentence unlabeled)
    assert len(conllu.parse((tmp_path / "rest.conllu").read_text())) == 32


def test_sentence_selection_fills_a_word_budget_without_a_sentence_over_the_cap(
        select_checkpoint, fixtures, tmp_path):
    out = tmp_path / "sel.conllu"
    assert _select(select_checkpoint, fixtures / "tiny-train.conllu", out, "strategy=errors",
                   "budget=30", "cap=6", f"remainder={tmp_path / 'rest.conllu'}") == 0
    chosen = conllu.parse(out.read_text(encoding="utf-8"))
    assert sum(len(_words(t)) for t in chosen) <= 30
    assert all(len(_words(t)) <= 6 and "selected_words" not in t.metadata for t in chosen)
    assert sorted(int(t.metadata["select_order"]) for t in chosen) == list(range(1, len(chosen) + 1))
    rest = conllu.parse((tmp_path / "rest.conllu").read_text())
    assert len(rest) + len(chosen) == 32
    assert not {t.metadata["sent_id"] for t in rest} & {t.metadata["sent_id"] for t in chosen}


def test_a_stratified_selection_shares_the_budget_among_lengths_as_the_pool(
        select_checkpoint, fixtures, tmp_path, capsys):
    pool = fixtures / "tiny-train.conllu"
    out = tmp_path / "sel.conllu"
    assert _select(select_checkpoint, pool, out, "strategy=words", "budget=12",
                   "stratify=length") == 0
    assert "stratify=length" in capsys.readouterr().out
    amounts = [0] * (len(LENGTH_BINS) + 1)
    for tokens in conllu.parse(pool.read_text(encoding="utf-8")):
        amounts[length_bin(len(_words(tokens)))] += len(_words(tokens))
    assert sum(a > 0 for a in amounts) >= 2  # the fixture has lengths in more than one bin
    taken = [0] * len(amounts)
    for tokens in conllu.parse(out.read_text(encoding="utf-8")):
        taken[length_bin(len(_words(tokens)))] += len(tokens.metadata["selected_words"].split(","))
    assert taken == quotas(12, amounts)


def test_random_selection_is_reproducible(select_checkpoint, fixtures, tmp_path):
    texts = []
    for run in ("a", "b"):
        out = tmp_path / f"{run}.conllu"
        assert _select(select_checkpoint, fixtures / "tiny-train.conllu", out, "strategy=random",
                       "unit=sentences", "budget=4", "seed=3") == 0
        texts.append(out.read_text(encoding="utf-8"))
    assert texts[0] == texts[1] and len(conllu.parse(texts[0])) == 4


def test_an_unreadable_pool_sentence_is_counted_and_skipped(select_checkpoint, fixtures, tmp_path,
                                                           capsys):
    good = (fixtures / "tiny-dev.conllu").read_text(encoding="utf-8")
    bad = "# sent_id = bad\n1\tOops\t_\t_\t_\t_\tx\t_\t_\t_\n\n"
    pool = tmp_path / "pool.conllu"
    pool.write_text(good + bad + good.replace("tiny-dev-", "again-"), encoding="utf-8")
    line = good.count("\n") + 2
    out = tmp_path / "sel.conllu"
    assert _select(select_checkpoint, pool, out, "strategy=entropy", "unit=sentences",
                   "budget=100") == 0
    summary = capsys.readouterr().out
    assert f"1 unreadable pool sentences skipped (first: {pool}:{line}: HEAD 'x'" in summary
    chosen = conllu.parse(out.read_text(encoding="utf-8"))
    assert len(chosen) == 2 * good.count("# sent_id")
    assert "bad" not in {t.metadata["sent_id"] for t in chosen}
    # over the limit: the command stops, naming the first
    assert _select(select_checkpoint, pool, tmp_path / "none.conllu", "strategy=entropy",
                   "budget=5", "max_invalid=0") == 2
    assert f"{pool}:{line}: HEAD 'x'" in capsys.readouterr().err
    assert not (tmp_path / "none.conllu").exists()


def test_bad_options_are_named(select_checkpoint, fixtures, tmp_path, capsys):
    pool = fixtures / "tiny-dev.conllu"
    for options, message in ((["strategy=words", "unit=sentences", "budget=3"], "budget is in words"),
                             (["strategy=margin", "budget=3"], "strategy=margin"),
                             (["budget=-1"], "budget=-1"),
                             (["budget=3", "stratify=genre"], "stratify=genre")):
        assert _select(select_checkpoint, pool, tmp_path / "x.conllu", *options) == 2
        assert message in capsys.readouterr().err


def test_ranking_reads_the_same_confidence_without_writing_blocks(select_checkpoint, fixtures):
    sentences = read_conllu(fixtures / "tiny-dev.conllu").sentences
    annotator = Annotator.load(select_checkpoint, PredictOptions(device="cpu", confidence=True))
    full, ranking = annotator.annotate(sentences), annotator.scoring_only().annotate(sentences)
    assert annotator.blocks and full.blocks[0].strip()  # the annotator itself is unchanged
    assert ranking.blocks == [""] * len(sentences)
    assert [c.head_probs for c in ranking.confidence] == [c.head_probs for c in full.confidence]
    assert [c.tree_entropy for c in ranking.confidence] == [c.tree_entropy for c in full.confidence]


@pytest.mark.parametrize("strategy, given, expected", [
    ("words", None, "none"), ("words", "all", "all"), ("entropy", None, None),
    ("errors", None, None), ("random_words", None, None)])
def test_only_word_selection_turns_the_ud_rules_off_by_default(strategy, given, expected):
    args = {**SELECT_OPTIONS, "strategy": strategy, "ud_rules": given}
    assert selection_decoder(args)["ud_rules"] == expected


GIVEN = {1: {1: (2, "det"), 4: (3, "punct")}, 2: {2: (0, "root")}}  # pool position -> word -> arc


def _pool_with_given_heads(path: Path) -> None:
    """SHORT as CoNLL-U, the heads of :data:`GIVEN` filled in (an annotation file put back)."""
    blocks = []
    for position, text in enumerate(SHORT, start=1):
        rows = []
        for word, form in enumerate(text.split(), start=1):
            head, deprel = GIVEN.get(position, {}).get(word, ("_", "_"))
            rows.append(f"{word}\t{form}\t_\t_\t_\t_\t{head}\t{deprel}\t_\t_")
        blocks.append(f"# sent_id = s{position}\n" + "\n".join(rows))
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")


def test_given_heads_are_kept_never_asked_and_condition_the_marginals(select_checkpoint, tmp_path):
    pool, out = tmp_path / "filled.conllu", tmp_path / "sel.conllu"
    _pool_with_given_heads(pool)
    assert _select(select_checkpoint, pool, out, "strategy=words", "budget=100",
                   "keep_heads=given") == 0
    # strategy=words reads the model's own distribution (ud_rules=none: no UD label masks)
    model, vocabs, _ = load_decoder(select_checkpoint, device="cpu", ud_rules="none")
    chosen = {int(t.metadata["pool_position"]): t for t in conllu.parse(out.read_text())}
    free = {p: [w for w in range(1, len(s.split()) + 1) if w not in GIVEN.get(p, {})]
            for p, s in enumerate(SHORT, start=1)}
    # every free word asked (the budget is larger than the pool), no given one
    assert {p: [int(w) for w in t.metadata["selected_words"].split(",")]
            for p, t in chosen.items()} == free
    text = tmp_path / "short.txt"
    text.write_text("\n".join(SHORT) + "\n", encoding="utf-8")
    sentences = list(stream_tokenized(text))
    for position, tokens in chosen.items():
        n = len(sentences[position - 1])
        dist = model_output(model, vocabs, sentences[position - 1]).dist
        trees, log_weights, log_z = enumerate_distribution(dist.arc_scores[0].double(), n,
                                                           single_root=dist.single_root)
        given = GIVEN.get(position, {})
        allowed = torch.tensor([all(tree[w - 1] == h for w, (h, _) in given.items())
                                for tree in trees])
        probs = (log_weights - log_z).exp() * allowed
        probs = probs / probs.sum()  # the tree CRF restricted to the given arcs
        for t in _words(tokens):
            if t["id"] in given:  # kept, pre-filled as given, with marginal 1
                assert (t["head"], t["deprel"]) == given[t["id"]]
                assert float(_misc(t)["HeadProb"]) == pytest.approx(1.0, abs=1e-4)
                continue
            shown = int(_misc(t)["PredHead"])
            marginal = sum(p for tree, p in zip(trees, probs.tolist()) if tree[t["id"] - 1] == shown)
            assert float(_misc(t)["HeadProb"]) == pytest.approx(marginal, abs=1e-4)
            assert float(tokens.metadata["select_score"].split(",")[
                tokens.metadata["selected_words"].split(",").index(str(t["id"]))]) == \
                pytest.approx(1 - marginal, abs=1e-4)


def test_random_words_never_draw_a_given_word(select_checkpoint, tmp_path):
    pool, out = tmp_path / "filled.conllu", tmp_path / "sel.conllu"
    _pool_with_given_heads(pool)
    assert _select(select_checkpoint, pool, out, "strategy=random_words", "budget=100",
                   "keep_heads=given", "seed=3") == 0
    asked = {(int(t.metadata["pool_position"]), int(w)) for t in conllu.parse(out.read_text())
             for w in t.metadata["selected_words"].split(",")}
    free = {(p, w) for p, s in enumerate(SHORT, start=1) for w in range(1, len(s.split()) + 1)
            if w not in GIVEN.get(p, {})}
    assert asked == free


def test_given_heads_go_with_word_strategies_only(select_checkpoint, tmp_path, capsys):
    pool = tmp_path / "filled.conllu"
    _pool_with_given_heads(pool)
    assert _select(select_checkpoint, pool, tmp_path / "x.conllu", "strategy=entropy",
                   "budget=5", "keep_heads=given") == 2
    assert "keep_heads=given" in capsys.readouterr().err
    assert _select(select_checkpoint, pool, tmp_path / "x.conllu", "strategy=words",
                   "budget=5", "keep_heads=some") == 2
    assert "keep_heads=some" in capsys.readouterr().err
