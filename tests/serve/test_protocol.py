"""parser-serve against UDPipe's REST protocol: the documented curl requests (GET and POST, form
and multipart), the answer's shape, UDPipe's error texts, every bad input of issue 61, batching
that answers each request with its own sentences, a full queue and the token. The pipeline is
the tiny fixture (tests/fixtures/pre_layers/tiny.pipeline): nothing is trained here."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from parser import Pipeline
from parser.serve import ServeSettings, create_app
from parser.serve.protocol import process_request
from parser.serve.worker import Batcher, QueueFull, model_paths
from tests.conftest import FIXTURES
from tests.serve import word_forms

PIPELINE = FIXTURES / "pre_layers" / "tiny.pipeline"
TEXT = "The dog barked loudly. It ran away."


@pytest.fixture(scope="module")
def nlp():
    return Pipeline.load(PIPELINE)


def _client(nlp, **settings) -> TestClient:
    return TestClient(create_app(ServeSettings({"tiny": str(PIPELINE)}, **settings),
                                 models={"tiny": nlp}))


@pytest.fixture(scope="module")
def client(nlp):
    with _client(nlp, max_body=20_000, max_words=50) as client:
        yield client


def test_models_as_udpipe_lists_them(client):
    for answer in (client.get("/models"), client.post("/models")):
        assert answer.status_code == 200
        assert answer.json() == {"models": {"tiny": ["tokenizer", "tagger", "parser"]},
                                 "default_model": "tiny"}


def test_the_documented_curl_requests(client, tmp_path):
    # curl -F data=@file -F model=tiny -F tokenizer= -F tagger= -F parser= URL/process
    multipart = client.post("/process", files={"data": ("in.txt", TEXT.encode())},
                            data={"model": "tiny", "tokenizer": "", "tagger": "", "parser": ""})
    # curl -d "tokenizer&tagger&parser" --data-urlencode "data=..." URL/process
    form = client.post("/process", data={"tokenizer": "", "tagger": "", "parser": "",
                                         "data": TEXT})
    # curl "URL/process?tokenizer&tagger&parser&data=..."
    query = client.get("/process", params={"tokenizer": "", "tagger": "", "parser": "",
                                           "data": TEXT})
    for answer in (multipart, form, query):
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("application/json")
        body = answer.json()
        assert set(body) == {"model", "acknowledgements", "result"}
        assert body["model"] == "tiny" and isinstance(body["acknowledgements"], list)
        assert body["result"].startswith("# generator = ")
        assert word_forms(body["result"]) == [["The", "dog", "barked", "loudly", "."],
                                          ["It", "ran", "away", "."]]
    assert multipart.json()["result"] == form.json()["result"] == query.json()["result"]


def test_inputs_components_and_the_tree_crf_parameters(client):
    horizontal = client.post("/process", data={"data": "The cat sleeps .\nI go .\n",
                                               "input": "horizontal", "parser": ""}).json()
    vertical = client.post("/process", data={"data": "The\ncat\nsleeps\n.\n\nI\ngo\n.\n",
                                             "input": "vertical", "parser": ""}).json()
    assert word_forms(horizontal["result"]) == word_forms(vertical["result"]) == [
        ["The", "cat", "sleeps", "."], ["I", "go", "."]]
    tagged = client.post("/process", data={"data": "The cat sleeps .", "input": "horizontal",
                                           "tagger": ""}).json()["result"]
    assert all(line.split("\t")[6] == "_" for line in tagged.split("\n") if "\t" in line)
    read = client.post("/process", data={"data": "The cat sleeps .",
                                         "input": "horizontal"}).json()["result"]
    assert "sleeps\t_\t_\t_\t_\t_\t_" in read  # no component asked: the input as read
    sure = client.get("/process", params={"data": "The cat sleeps .", "input": "horizontal",
                                          "parser": "", "confidence": "true"}).json()["result"]
    assert "HeadProb=" in sure and "# tree_entropy" in sure
    kbest = client.get("/process", params={"data": "The cat sleeps .", "input": "horizontal",
                                           "parser": "", "kbest": "2"}).json()["result"]
    assert kbest.count("# tree_rank") == 2
    given = ("1\tThe\t_\t_\t_\t_\t2\tdet\t_\t_\n2\tcat\t_\t_\t_\t_\t_\t_\t_\t_\n"
             "3\tsleeps\t_\t_\t_\t_\t_\t_\t_\t_\n\n")
    kept = client.post("/process", data={"data": given, "parser": "", "tagger": "",
                                         "keep_heads": "given"}).json()["result"]
    assert "1\tThe\t" in kept and "\t2\tdet\t" in kept


@pytest.mark.parametrize(("params", "status", "first_line"), [
    ({}, 400, "The parameter 'data' is required."),
    ({"data": "x", "model": "nope"}, 400, "The requested model 'nope' does not exist."),
    ({"data": "x", "output": "matxin"}, 400, "Unknown output format 'matxin'."),
    ({"data": "x", "input": "xml"}, 400, "Cannot parse the input in 'xml' format."),
    ({"data": "x", "colour": "red"}, 400, "Unknown parameter 'colour'."),
    ({"data": "x", "kbest": "-1"}, 400, "Bad parameter: kbest=-1: expected an integer >= 0"),
    ({"data": "1\tA\t_\t_\t_\t_\tX\t_\t_\t_\n\n", "parser": ""}, 400,
     "Cannot parse the input in 'conllu' format."),
])
def test_bad_requests_get_udpipes_texts(client, params, status, first_line):
    for answer in (client.get("/process", params=params), client.post("/process", data=params)):
        assert answer.status_code == status
        assert answer.headers["content-type"].startswith("text/plain")
        assert answer.text.split("\n")[0] == first_line
    assert client.get("/models").status_code == 200  # still serving


def test_malformed_conllu_names_the_line_of_data(client):
    data = "# sent_id = a\n1\tA\t_\t_\t_\t_\t0\troot\t_\t_\n\n1\tB\t_\t_\t_\t_\tX\t_\t_\t_\n\n"
    answer = client.post("/process", data={"data": data, "parser": ""})
    assert answer.status_code == 400 and answer.text.split("\n")[1].startswith("data:4: ")


def test_a_fixed_arc_that_makes_a_cycle_is_named(client):
    data = "1\tA\t_\t_\t_\t_\t2\t_\t_\t_\n2\tB\t_\t_\t_\t_\t1\t_\t_\t_\n3\tC\t_\t_\t_\t_\t_\t_\t_\t_\n\n"
    answer = client.post("/process", data={"data": data, "parser": "", "keep_heads": "given"})
    assert answer.status_code == 200  # as parser-predict: written as read, with the reason
    assert "# parse_error = " in answer.json()["result"]


def test_invalid_utf8_oversized_bodies_and_long_sentences(client):
    bad = client.post("/process", content=b"data=caf\xe9&parser=",
                      headers={"content-type": "application/x-www-form-urlencoded"})
    assert bad.status_code == 400
    assert bad.text.startswith("Cannot parse the application/x-www-form-urlencoded payload.")
    assert "not in UTF-8" in bad.text
    upload = client.post("/process", files={"data": ("in.txt", b"caf\xe9 .")},
                         data={"input": "horizontal"})
    assert upload.status_code == 400 and "not in UTF-8" in upload.text
    big = client.post("/process", data={"data": "word " * 5000, "input": "horizontal"})
    assert big.status_code == 413 and big.text.startswith("The payload size is too large.")
    sentence = client.post("/process", data={"data": "a .\n" + "word " * 60,
                                             "input": "horizontal", "parser": ""})
    assert sentence.status_code == 400
    assert sentence.text.startswith("Sentence longer than 50 words was found on input, aborting.")
    assert "Sentence 2 (line 2 of data) has 60 words." in sentence.text
    assert client.get("/models").status_code == 200


def test_two_thousand_words_in_one_sentence(nlp):
    with _client(nlp) as client:  # the default limits: 4 MiB, 1000 words
        answer = client.post("/process", data={"data": "word " * 2000, "input": "horizontal",
                                               "parser": ""})
        assert answer.status_code == 400
        assert "Sentence 1 (line 1 of data) has 2000 words." in answer.text


def test_requests_that_arrive_together_are_answered_with_their_own_sentences(nlp):
    texts = [" ".join([f"w{i}"] * (3 + i % 4)) + " ." for i in range(24)]
    alone = {}
    with _client(nlp, batch_words=10_000, queue_size=100) as client:
        for text in texts[:3]:
            alone[text] = client.post("/process", data={"data": text, "input": "horizontal",
                                                        "parser": "", "tagger": ""}).json()
        answers = {}
        start = threading.Barrier(len(texts))

        def ask(text):
            start.wait()
            answers[text] = client.post("/process", data={
                "data": text, "input": "horizontal", "parser": "", "tagger": ""})

        threads = [threading.Thread(target=ask, args=(t,)) for t in texts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for text in texts:
        answer = answers[text]
        assert answer.status_code == 200
        assert word_forms(answer.json()["result"]) == [text.split()]
    for text, expected in alone.items():  # batched == alone
        assert answers[text].json()["result"] == expected["result"]


def test_the_batcher_parses_waiting_requests_together(nlp):
    batcher = Batcher({"tiny": nlp}, batch_words=1000)
    requests = [process_request({"data": f"w{i} x{i} .", "input": "horizontal", "parser": ""},
                                models=["tiny"], default_model="tiny", max_words=1000)
                for i in range(10)]
    jobs = [batcher.submit(r, deadline=1e18) for r in requests]  # queued before the thread runs
    batcher.start()
    results = [job.future.result(timeout=60) for job in jobs]
    batcher.stop()
    assert batcher.batches == 1
    assert [word_forms(r) for r in results] == [[[f"w{i}", f"x{i}", "."]] for i in range(10)]


def test_a_full_queue_answers_503_with_retry_after(nlp):
    batcher = Batcher({"tiny": nlp}, queue_size=2)  # not started: nothing leaves the queue
    request = process_request({"data": "a ."}, models=["tiny"], default_model="tiny",
                              max_words=1000)
    batcher.submit(request, deadline=1e18)
    batcher.submit(request, deadline=1e18)
    with pytest.raises(QueueFull):
        batcher.submit(request, deadline=1e18)
    with _client(nlp, queue_size=1, retry_after=3) as client:
        # the app's own batcher is filled while its worker is held
        gate = threading.Event()
        original = Batcher._answer

        def slow(self, jobs):
            gate.wait(10)
            return original(self, jobs)

        Batcher._answer = slow
        try:
            answers = []
            threads = [threading.Thread(target=lambda: answers.append(client.post(
                "/process", data={"data": "a .", "input": "horizontal", "parser": ""})))
                for _ in range(4)]
            for thread in threads:
                thread.start()
            for _ in range(100):
                if any(a.status_code == 503 for a in answers):
                    break
                threading.Event().wait(0.05)
            gate.set()
            for thread in threads:
                thread.join()
        finally:
            Batcher._answer = original
    busy = [a for a in answers if a.status_code == 503]
    assert busy and all(a.headers["retry-after"] == "3" for a in busy)
    assert busy[0].text.startswith("The service is busy")
    assert all(a.status_code in (200, 503) for a in answers)


def test_a_deadline_answers_503(nlp):
    with _client(nlp, deadline=0.2) as client:
        original = Batcher._answer
        Batcher._answer = lambda self, jobs: (threading.Event().wait(1), original(self, jobs))
        try:
            answer = client.post("/process", data={"data": "a .", "input": "horizontal"})
        finally:
            Batcher._answer = original
    assert answer.status_code == 503 and "deadline" in answer.text


def test_a_token_is_required_when_set(nlp):
    with _client(nlp, token="s3cret") as client:
        assert client.get("/models").status_code == 401
        wrong = client.get("/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert client.get("/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.post("/process", data={"data": "a .", "input": "horizontal"},
                           headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_the_api_is_described(client):
    spec = client.get("/openapi.json").json()
    names = {p["name"] for p in spec["paths"]["/process"]["post"]["parameters"]}
    assert {"data", "model", "tokenizer", "tagger", "parser", "input", "output", "kbest"} <= names
    assert "parser-serve" in client.get("/api").text
    assert client.get("/nowhere").text == "No handler for the given URL '/nowhere'"


def test_models_are_named_by_their_files(tmp_path):
    (tmp_path / "b.pipeline").write_bytes(b"")
    (tmp_path / "a.pipeline").write_bytes(b"")
    assert list(model_paths(str(tmp_path))) == ["a", "b"]
    assert list(model_paths(f"{tmp_path / 'b.pipeline'},{tmp_path / 'a.pipeline'}")) == ["b", "a"]
    with pytest.raises(ValueError, match="no such file"):
        model_paths(str(tmp_path / "c.pipeline"))
