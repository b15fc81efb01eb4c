"""The character tags of a treebank's text, its paragraphs, the multiword table and the check of
tokenised input."""

from __future__ import annotations

import pytest

from parser.tokenize.check import first_untokenised_line, untokenised_word
from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.segment import _decode, to_sentence
from parser.tokenize.text import TAGS, Token, paragraph_tags, read_paragraphs, spans, write_raw_text
from tests.tokenize.helpers import FIXTURES

CONLLU = """# newdoc id = d1
# newpar
# text = Hi! Go.
1\tHi\t_\t_\t_\t_\t0\troot\t_\tSpaceAfter=No
2\t!\t_\t_\t_\t_\t1\tpunct\t_\t_

# text = Go.
1\tGo\t_\t_\t_\t_\t0\troot\t_\tSpaceAfter=No
2\t.\t_\t_\t_\t_\t1\tpunct\t_\t_

# newpar
# text = Il va au parc.
1\tIl\t_\t_\t_\t_\t2\tnsubj\t_\t_
2\tva\t_\t_\t_\t_\t0\troot\t_\t_
3-4\tau\t_\t_\t_\t_\t_\t_\t_\t_
3\tà\t_\t_\t_\t_\t5\tcase\t_\t_
4\tle\t_\t_\t_\t_\t5\tdet\t_\t_
5\tparc\t_\t_\t_\t_\t2\tobl\t_\tSpaceAfter=No
6\t.\t_\t_\t_\t_\t2\tpunct\t_\t_

"""


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    return path


def test_paragraphs_tokens_and_multiword_words(small):
    paragraphs = list(read_paragraphs(small))
    assert [len(p) for p in paragraphs] == [2, 1]
    first = paragraphs[0][0]
    assert first == [Token("Hi", False, ("Hi",)), Token("!", True, ("!",))]
    au = paragraphs[1][0][2]
    assert au == Token("au", True, ("à", "le"))
    text, tags = paragraph_tags(paragraphs[0])
    assert text == "Hi! Go."
    assert "".join(TAGS[t] for t in tags) == "BISOBIS"
    text, tags = paragraph_tags(paragraphs[1])
    assert text == "Il va au parc."
    assert "".join(TAGS[t] for t in tags) == "BIOBIOBIOBIIIS"


def test_tags_decode_back_to_the_same_tokens_and_sentences(small):
    table = MultiwordTable.build(read_paragraphs(small))
    for paragraph in read_paragraphs(small):
        text, tags = paragraph_tags(paragraph)
        decoded = _decode(text, tags, table)
        assert decoded == paragraph
        assert spans([decoded]) == spans([paragraph])


def test_raw_text_has_one_paragraph_per_block(small, tmp_path):
    out = tmp_path / "raw.txt"
    assert write_raw_text(small, out) == 2
    assert out.read_text(encoding="utf-8") == "Hi! Go.\n\nIl va au parc.\n"
    # the fixture has only # newdoc: one paragraph, its sentences' # text joined by spaces
    write_raw_text(FIXTURES / "tiny-dev.conllu", out)
    texts = [line[len("# text = "):] for line in (FIXTURES / "tiny-dev.conllu").read_text(
        encoding="utf-8").splitlines() if line.startswith("# text = ")]
    assert out.read_text(encoding="utf-8") == " ".join(texts) + "\n"


def test_multiword_table_keeps_the_majority_and_the_casing():
    def sentence(*tokens):
        return [Token(form, True, words) for form, words in tokens]

    paragraphs = [[sentence(("des", ("de", "les")), ("des", ("de", "les")), ("des", ("des",)),
                            ("du", ("de", "le")), ("en", ("en",)), ("en", ("en",)))]]
    table = MultiwordTable.build(paragraphs)
    assert table.split("des") == ("de", "les")  # 2 splits against 1 plain use
    assert table.split("Du") == ("De", "le") and table.split("DU") == ("DE", "LE")
    assert table.split("en") == ("en",) and table.split("inconnu") == ("inconnu",)
    assert MultiwordTable.from_state_dict(table.state_dict()).splits == table.splits
    paragraphs[0][0] += sentence(("des", ("des",)), ("des", ("des",)))
    assert MultiwordTable.build(paragraphs).split("des") == ("des",)  # now 2 against 3


def test_to_sentence_writes_multiword_lines_and_space_after():
    tokens = [Token("Il", True, ("Il",)), Token("au", False, ("à", "le")), Token(".", False, (".",))]
    sentence = to_sentence(tokens, sent_id="7", comments=("# newpar",))
    assert sentence.forms == ["Il", "à", "le", "."]
    assert sentence.lines[:3] == ["# newpar", "# sent_id = 7", "# text = Il au."]
    assert sentence.lines[4].split("\t")[:2] == ["2-3", "au"]
    assert sentence.lines[4].endswith("SpaceAfter=No")
    assert sentence.heads == [-1] * 4


@pytest.mark.parametrize("line, word", [
    ("It was good.", "good."), ("See you on Tuesday!", "Tuesday!"), ("I can't go .", "can't"),
    ("Hello , world", None), ("Mr. Smith met the U.S. team .", None), ("yes , well", None),
    ("it 's fine , really", None), ("She said \"hi", '"hi'), ("wait, what ?", "wait,"),
])
def test_untokenised_words_are_found(line, word):
    assert untokenised_word(line.split()) == word


def test_first_untokenised_line_names_the_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("The cat sleeps .\n\nI like it , really .\nThat was good.\n", encoding="utf-8")
    assert first_untokenised_line(path) == (4, "good.")
    path.write_text("The cat sleeps .\n", encoding="utf-8")
    assert first_untokenised_line(path) is None
