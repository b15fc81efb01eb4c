"""``POST /trees``, the page's endpoint, without a browser: the heads it lists are the tree
CRF's marginals (the written head's is the ``HeadProb`` the annotator writes), fixed arcs are
kept and condition the marginals, a cycle is a 400 naming the words, ``parse: false`` draws a
file as it is, and its refusals are ``/process``'s."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from parser import Pipeline
from parser.serve import ServeSettings, create_app
from tests.conftest import FIXTURES

PIPELINE = FIXTURES / "pre_layers" / "tiny.pipeline"


@pytest.fixture(scope="module")
def client():
    nlp = Pipeline.load(PIPELINE)
    app = create_app(ServeSettings({"tiny": str(PIPELINE)}, token="t"), models={"tiny": nlp})
    with TestClient(app, headers={"Authorization": "Bearer t"}) as client:
        yield client


def _columns(block: str) -> list[list[str]]:
    return [line.split("\t") for line in block.split("\n") if line[:1].isdigit()]


def _misc(columns: list[str], key: str) -> float:
    return float(dict(item.split("=") for item in columns[9].split("|") if "=" in item)[key])


def test_the_heads_listed_are_the_marginals_of_the_tree_written(client):
    answer = client.post("/trees", json={"data": "The dog barked loudly. It ran away.",
                                         "input": "raw"})
    assert answer.status_code == 200 and answer.json()["model"] == "tiny"
    sentences = answer.json()["sentences"]
    assert len(sentences) == 2
    for sentence in sentences:
        for columns in _columns(sentence["conllu"]):
            heads = sentence["heads"][columns[0]]
            marginals = [p for _, p in heads]
            assert marginals == sorted(marginals, reverse=True) and 0 < sum(marginals) <= 1.0001
            written = {h: p for h, p in heads}.get(int(columns[6]))
            if written is not None:
                assert written == pytest.approx(_misc(columns, "HeadProb"), abs=2e-4)
        assert sentence["svg"].startswith("<svg") and sentence["svg"].count('class="arc') >= 1


def test_fixed_arcs_are_kept_and_condition_the_marginals(client):
    data = ("1\tThe\t_\t_\t_\t_\t3\t_\t_\t_\n2\tdog\t_\t_\t_\t_\t_\t_\t_\t_\n"
            "3\tbarked\t_\t_\t_\t_\t_\t_\t_\t_\n4\tloudly\t_\t_\t_\t_\t2\tadvmod\t_\t_\n\n")
    answer = client.post("/trees", json={"data": data, "input": "conllu", "keep_heads": "given"})
    assert answer.status_code == 200
    [sentence] = answer.json()["sentences"]
    words = _columns(sentence["conllu"])
    assert (words[0][6], words[3][6], words[3][7]) == ("3", "2", "advmod")
    assert sentence["heads"]["1"] == [[3, 1.0]] and sentence["heads"]["4"] == [[2, 1.0]]
    assert _misc(words[0], "HeadProb") == 1.0


def test_a_cycle_of_fixed_arcs_is_refused_naming_the_words(client):
    data = ("1\tThe\t_\t_\t_\t_\t2\t_\t_\t_\n2\tdog\t_\t_\t_\t_\t1\t_\t_\t_\n"
            "3\tbarked\t_\t_\t_\t_\t_\t_\t_\t_\n\n")
    answer = client.post("/trees", json={"data": data, "input": "conllu", "keep_heads": "given"})
    assert answer.status_code == 400
    assert "cycle: words 1 -> 2 -> 1" in answer.text and answer.text.startswith("Sentence 1 ")


def test_a_file_drawn_as_it_is_without_a_model(client):
    data = ("# sent_id = a\n# selected_words = 2\n1\tThe\t_\t_\t_\t_\t2\tdet\t_\t_\n"
            "2\tdog\t_\t_\t_\t_\t_\t_\t_\tPredHead=0\n\n")
    answer = client.post("/trees", json={"data": data, "parse": False})
    assert answer.status_code == 200
    [sentence] = answer.json()["sentences"]
    assert sentence["conllu"] == data and sentence["heads"] == {}
    assert 'data-dep="1" data-head="2"' in sentence["svg"] and 'data-dep="2"' not in sentence["svg"]


@pytest.mark.parametrize(("body", "status", "first_line"), [
    ({"input": "raw"}, 400, "The parameter 'data' is required."),
    ({"data": "x", "model": "nope"}, 400, "The requested model 'nope' does not exist."),
    ({"data": "x", "input": "matxin"}, 400, "Cannot parse the input in 'matxin' format."),
    ({"data": "x y", "input": "raw", "keep_heads": "given"}, 400,
     "Bad parameter: keep_heads=given keeps the heads of a CoNLL-U input"),
    ({"data": "1\tx\n\n"}, 400, "Cannot parse the input in 'conllu' format."),
])
def test_refusals_are_those_of_process(client, body, status, first_line):
    answer = client.post("/trees", json=body)
    assert answer.status_code == status and answer.text.startswith(first_line)


def test_json_and_token_are_checked(client):
    assert client.post("/trees", content=b"[1]").text.startswith("Cannot parse the application/json")
    assert client.post("/trees", content=b"\xff").status_code == 400
    assert client.post("/trees", json={"data": "x"}, headers={"Authorization": ""}).status_code == 401
    assert client.get("/", headers={"Authorization": ""}).status_code == 200  # the page asks for it
