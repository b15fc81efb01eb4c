"""The SVG of one sentence, read back with xml.etree: one arc per word, labels, classes,
escaping, confidence, gold marks, non-projective arcs, multiword tokens, right to left, bytes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import conllu as conllu_lib
import pytest

from parser.data.conllu_io import read_conllu
from parser.view import sentence_svg
from parser.view.layout import arc_levels, nonprojective
from tests.view.conftest import conllu

NS = {"s": "http://www.w3.org/2000/svg"}


def _svg(text: str, **kwargs) -> ET.Element:
    return ET.fromstring(sentence_svg(text, **kwargs))


def _arcs(root: ET.Element, kind: str = "arc") -> list[ET.Element]:
    return [p for p in root.iterfind(".//s:path", NS) if kind in p.get("class", "").split()]


def test_one_arc_per_word_root_included(simple):
    root = _svg(simple)
    words = root.findall(".//s:g[@class='word']", NS)
    assert [w.get("data-id") for w in words] == ["1", "2", "3", "4"]
    arcs = _arcs(root)
    assert sorted((a.get("data-dep"), a.get("data-head")) for a in arcs) == [
        ("1", "2"), ("2", "3"), ("3", "0"), ("4", "3")]
    [root_arc] = [a for a in arcs if "root-arc" in a.get("class")]
    assert root_arc.get("data-dep") == "3" and root_arc.get("data-deprel") == "root"
    labels = [t.text for t in root.iterfind(".//s:text[@class='label']", NS)]
    assert sorted(labels) == ["det", "nsubj", "punct", "root"]
    assert [t.text for t in root.iterfind(".//s:text[@class='upos']", NS)] == ["X"] * 4
    assert root.get("data-direction") == "ltr" and root.get("data-sent-id") == "t1"


def test_words_in_order_left_to_right(simple):
    root = _svg(simple)
    xs = [float(t.get("x")) for t in root.iterfind(".//s:text[@class='form']", NS)]
    assert xs == sorted(xs) and len(set(xs)) == 4


def test_text_is_escaped_and_inert():
    nasty = '<script>&"'
    text = conllu([f"{nasty} 0 root", "x 1 dep"], sent_id='a"<b>').replace(
        "\tX\t", "\t<b>\t", 1)
    svg = sentence_svg(text)
    assert "<script>" not in svg and "<b>" not in svg
    root = ET.fromstring(svg)  # well-formed
    forms = [t.text for t in root.iterfind(".//s:text[@class='form']", NS)]
    assert forms[0] == nasty and root.get("data-sent-id") == 'a"<b>'
    assert not root.findall(".//s:script", NS) and not root.findall(".//script")


def test_same_input_same_bytes(simple):
    assert sentence_svg(simple) == sentence_svg(simple)
    tokens = conllu_lib.parse(simple)[0]
    assert sentence_svg(tokens) == sentence_svg(simple)  # a TokenList draws the same


def test_confidence_styles_arcs_and_shows_the_runner_up():
    text = conllu(["I 2 nsubj HeadProb=0.9700|DeprelProb=0.9900",
                   "saw 0 root HeadProb=1.0000|DeprelProb=1.0000",
                   "it 2 obj HeadProb=0.4000|DeprelProb=0.8000|AltHead=1|AltHeadProb=0.3500"])
    root = _svg(text)
    arcs = {a.get("data-dep"): a for a in _arcs(root)}
    assert arcs["1"].get("data-marginal") == "0.9700" and "conf-4" in arcs["1"].get("class")
    assert arcs["3"].get("data-marginal") == "0.4000" and "conf-0" in arcs["3"].get("class")
    assert float(arcs["3"].get("stroke-width")) < float(arcs["1"].get("stroke-width"))
    assert arcs["3"].get("data-alt-head") == "1" and arcs["3"].get("data-alt-marginal") == "0.3500"
    [alt] = _arcs(root, "alt-arc")
    assert (alt.get("data-dep"), alt.get("data-head")) == ("3", "1") and alt.get("stroke-dasharray")
    tips = [t.text for t in root.iterfind(".//s:g[@class='dependency arc-group']/s:title", NS)]
    assert any("head marginal 0.4000" in tip and "runner-up head I (1) p=0.3500" in tip
               for tip in tips)
    assert root.find(".//s:g[@class='legend']", NS) is not None


def test_no_confidence_no_marginal(simple):
    root = _svg(simple)
    assert all(a.get("data-marginal") is None for a in _arcs(root))
    assert root.find(".//s:g[@class='legend']", NS) is None


def test_wrong_heads_and_labels_against_gold(simple):
    predicted = simple.replace("\t2\tdet\t", "\t3\tdet\t").replace("\tpunct\t", "\tdep\t")
    root = _svg(predicted, gold=simple)
    arcs = {a.get("data-dep"): a for a in _arcs(root)}
    assert "wrong-head" in arcs["1"].get("class") and arcs["1"].get("data-gold-head") == "2"
    assert "wrong-label" in arcs["4"].get("class") and arcs["4"].get("data-gold-deprel") == "punct"
    assert "wrong" not in arcs["2"].get("class")
    [gold] = _arcs(root, "gold-arc")
    assert (gold.get("data-dep"), gold.get("data-head"), gold.get("data-deprel")) == ("1", "2", "det")
    assert [t.text for t in root.iterfind(".//s:tspan[@class='gold-label']", NS)] == ["/punct"]
    with pytest.raises(ValueError, match="other words"):
        sentence_svg(simple, gold=conllu(["A 0 root"]))


def test_nonprojective_arcs_are_dashed():
    text = conllu(["A 3 dep", "B 0 root", "C 2 dep", "D 2 dep"])  # 1<-3 passes over 2
    arcs = {a.get("data-dep"): a for a in _arcs(_svg(text))}
    assert "nonprojective" in arcs["1"].get("class") and arcs["1"].get("stroke-dasharray")
    assert all("nonprojective" not in arcs[d].get("class") for d in "234")


def test_levels_keep_arc_tops_apart():
    spans = [(0, 4), (1, 2), (2, 3), (1, 3), (3, 5)]
    levels = arc_levels(spans)
    for i, (a, b) in enumerate(spans):
        for j, (c, d) in enumerate(spans):
            if i != j and max(a, c) < min(b, d):
                assert levels[i] != levels[j]
            if i != j and a <= c and d <= b:
                assert levels[i] > levels[j]


def test_unattached_words_have_no_arc():
    root = _svg(conllu(["A _ _", "B 0 root"]).replace("\t_\t_\t_\t_\n", "\t_\t_\t_\t_\n"))
    assert [a.get("data-dep") for a in _arcs(root)] == ["2"]


def test_nonprojective_sentence_of_ewt(ud_root):
    treebank = read_conllu(ud_root / "en_ewt" / "en_ewt-ud-test.conllu")
    sentence = next(s for s in treebank if nonprojective(s.heads))
    root = ET.fromstring(sentence_svg(sentence))
    arcs = _arcs(root)
    assert len(arcs) == len(sentence)
    dashed = {int(a.get("data-dep")) for a in arcs if "nonprojective" in a.get("class")}
    assert dashed == nonprojective(sentence.heads)


def test_arabic_is_laid_out_right_to_left(ud_root):
    treebank = read_conllu(ud_root / "ar_padt" / "ar_padt-ud-test.conllu")
    sentence = next(s for s in treebank if 5 <= len(s) <= 15)
    root = ET.fromstring(sentence_svg(sentence))
    assert root.get("data-direction") == "rtl"
    xs = [float(t.get("x")) for t in root.iterfind(".//s:text[@class='form']", NS)]
    assert xs == sorted(xs, reverse=True)  # word 1 rightmost
    forms = root.findall(".//s:text[@class='form']", NS)
    assert all(t.get("direction") == "rtl" and t.get("unicode-bidi") for t in forms)
    assert len(_arcs(root)) == len(sentence)


@pytest.mark.parametrize("treebank", ["fr_gsd", "de_gsd"])
def test_multiword_tokens_span_their_words(ud_root, treebank):
    sentences = read_conllu(ud_root / treebank / f"{treebank}-ud-test.conllu")
    sentence = next(s for s in sentences if any("-" in raw.split("\t")[0] for raw in s.lines
                                                 if not raw.startswith("#")))
    root = ET.fromstring(sentence_svg(sentence))
    tokens = root.findall(".//s:g[@class='multiword']", NS)
    expected = [raw.split("\t") for raw in sentence.lines
                if not raw.startswith("#") and "-" in raw.split("\t")[0]]
    assert [(g.get("data-first") + "-" + g.get("data-last"), g.get("data-form")) for g in tokens] \
        == [(cols[0], cols[1]) for cols in expected]
    xs = {w.get("data-id"): float(w.find("s:text[@class='form']", NS).get("x"))
          for w in root.iterfind(".//s:g[@class='word']", NS)}
    for g in tokens:
        bracket = g.find("s:path", NS).get("d")
        left = float(bracket.split(",")[0][1:])
        assert left < xs[g.get("data-first")] < xs[g.get("data-last")]


def test_a_long_sentence_grows_wide_and_nothing_is_clipped():
    words = 120
    text = conllu([f"w{i} {0 if i == 1 else (1 if i % 7 else i - 3)} {'root' if i == 1 else 'dep'}"
                   for i in range(1, words + 1)])
    svg = sentence_svg(text)
    root = ET.fromstring(svg)
    width, height = float(root.get("width")), float(root.get("height"))
    assert width > words * 30 and root.get("viewBox") == f"0 0 {width:.0f} {height:.0f}"
    points = [float(n) for path in root.iterfind(".//s:path", NS)
              for n in re.findall(r"-?\d+\.\d+", path.get("d"))]
    xs = [float(t.get("x")) for t in root.iterfind(".//s:text", NS)]
    assert min(points + xs) >= 0 and max(xs) <= width
    assert len(_arcs(root)) == words
