"""The multiword splitter's affix rules: unseen forms split by their ending (or beginning), seen
forms by the lookup, rules counted over distinct forms, casing kept, checkpoints old and new."""

from __future__ import annotations

from parser.tokenize.affix_rules import SuffixRules
from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.text import Token


def _paragraphs(*tokens: tuple[str, tuple[str, ...]]) -> list:
    return [[[Token(form, True, words) for form, words in tokens]]]


# Marathi-like: a case marker written on its noun, the noun's last vowel changed before it
CLITICS = _paragraphs(("गावामुळे", ("गावा", "मुळे")), ("लाडामुळे", ("लाडा", "मुळे")),
                      ("घरामुळे", ("घरा", "मुळे")), ("हे", ("हे",)), ("मुळे", ("मुळे",)),
                      ("पाणी", ("पाणी",)), ("कामुळे", ("कामुळे",)), ("कामुळे", ("कामुळे",)))


def test_an_unseen_form_is_split_by_the_ending_its_training_forms_share():
    table = MultiwordTable.build(CLITICS)
    assert table.split("रामामुळे") == ("रामा", "मुळे")
    assert table.split("पाणी") == ("पाणी",) and table.split("नवे") == ("नवे",)


def test_a_seen_plain_form_stays_whole_although_a_rule_fits_it():
    table = MultiwordTable.build(CLITICS)
    assert table.suffixes.split("कामुळे") is not None  # the rule alone would split it
    assert table.split("कामुळे") == ("कामुळे",)
    assert "कामुळे" in table.whole


def test_the_first_word_may_change_before_the_clitic():
    # Tamil-like: "...ம்" + "உம்" is written "...மும்"
    table = MultiwordTable.build(_paragraphs(
        ("அறமும்", ("அறம்", "உம்")), ("நலமும்", ("நலம்", "உம்")), ("பலமும்", ("பலம்", "உம்")),
        ("மரம்", ("மரம்",))))
    assert table.split("வளமும்") == ("வளம்", "உம்")


def test_prefix_rules_split_a_proclitic():
    table = MultiwordTable.build(_paragraphs(
        ("wakataba", ("wa", "kataba")), ("waqala", ("wa", "qala")), ("wadahaba", ("wa", "dahaba")),
        ("kataba", ("kataba",)), ("qala", ("qala",))))
    assert len(table.prefixes) > 0 and len(table.suffixes) == 0
    assert table.split("warakaba") == ("wa", "rakaba")
    assert table.split("rakaba") == ("rakaba",)


def test_rules_count_forms_not_occurrences():
    # a frequent contraction does not make its first letters a proclitic (Greek "στο" = "σ το")
    frequent = [("στο", ("σ", "το"))] * 50 + [("στα", ("σ", "τα"))] * 50
    rare_plain = [("στόχος", ("στόχος",)), ("στοές", ("στοές",)), ("στάση", ("στάση",)),
                  ("στίχος", ("στίχος",))]
    table = MultiwordTable.build(_paragraphs(*frequent, *rare_plain))
    assert table.split("Στουρνάρας") == ("Στουρνάρας",)
    assert table.split("Στο") == ("Σ", "το")  # the lookup still splits the seen contraction


def test_casing_of_the_stem_is_the_forms_own():
    table = MultiwordTable.build(_paragraphs(
        ("company's", ("company", "'s")), ("john's", ("john", "'s")), ("mary's", ("mary", "'s")),
        ("is", ("is",))))
    assert table.split("ASCII's") == ("ASCII", "'s")
    assert table.split("Peter's") == ("Peter", "'s")
    assert table.split("PETER'S") == ("PETER", "'S")


def test_a_split_needs_min_count_forms_with_the_ending_and_more_than_share_of_them():
    tokens = [("dime", ("di", "me")), ("hazme", ("haz", "me")), ("come", ("come",))]
    assert SuffixRules.build(tokens, min_count=2).split("cuentame")[0] == ("cuenta", "me")  # 2 of 3
    assert SuffixRules.build(tokens, min_count=4).split("cuentame") is None  # "me": 3 forms only
    tokens.append(("tome", ("tome",)))
    assert SuffixRules.build(tokens, min_count=2).split("cuentame") is None  # 2 of 4 is not > 1/2


def test_the_longest_ending_seen_decides():
    # "-me" splits, but "-ome" was seen only on plain forms: "tome"-like forms stay whole
    tokens = [("dime", ("di", "me")), ("hazme", ("haz", "me")), ("dame", ("da", "me")),
              ("come", ("come",)), ("tome", ("tome",))]
    rules = SuffixRules.build(tokens, min_count=2)
    assert rules.split("cuentame")[0] == ("cuenta", "me")
    assert rules.split("asome") is None


def test_state_round_trip_and_a_lookup_only_checkpoint_loads():
    table = MultiwordTable.build(CLITICS)
    again = MultiwordTable.from_state_dict(table.state_dict())
    for form in ("रामामुळे", "कामुळे", "गावामुळे", "पाणी"):
        assert again.split(form) == table.split(form)
    old = MultiwordTable.from_state_dict({"splits": {"du": ["de", "le"]}})  # saved before the rules
    assert old.split("Du") == ("De", "le") and old.split("रामामुळे") == ("रामामुळे",)


def test_a_treebank_without_multiword_tokens_learns_no_rules():
    table = MultiwordTable.build(_paragraphs(("a", ("a",)), ("cat", ("cat",)), ("sat", ("sat",))))
    assert len(table) == len(table.suffixes) == len(table.prefixes) == 0
    assert table.split("hat") == ("hat",)
