"""parser-serve's page in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``)
driven by Playwright, against the app under uvicorn on 127.0.0.1 (a free port, a background
thread, stopped at teardown) with the tiny pipeline fixture. A text is parsed into one arc per
word; a click fixes an arc and the rest is re-decoded exactly as ``/trees`` with
``keep_heads=given`` answers; a cycle is refused on the page; the token is asked for once; an
annotation file of ``parser-select`` is walked with the keyboard, saved, and trained on with
``data.partial_trees=true``.

In CI (``$CI`` set, as tests/conftest.py reads it) a missing browser or Playwright fails these
tests; elsewhere they skip, naming what is missing.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from parser import Pipeline
from parser.cli.select import main as select_main
from parser.data.partial_trees import read_partial_trees
from parser.serve import ServeSettings, create_app
from parser.train.loop import Trainer
from tests.conftest import FIXTURES
from tests.train.helpers import tiny_config

PIPELINE = FIXTURES / "pre_layers" / "tiny.pipeline"
CHROMIUM = Path(os.environ.get("PARSER_CHROMIUM", "/usr/bin/chromium"))
TEXT = "The dog barked loudly. It ran away."
WAIT_MS = 20_000  # every wait of the page is bounded


def _playwright():
    """Playwright's sync API, or a skip (a failure in CI) naming what is missing."""
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the playwright package (pip install playwright; make install has it)"
    if missing is None and not CHROMIUM.exists():
        missing = f"Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run installs it)"
    if missing is not None:
        if os.environ.get("CI"):  # as tests/conftest.py: in CI a missing dependency fails
            pytest.fail(f"the browser tests need {missing}")
        pytest.skip(f"the browser tests need {missing}")
    return sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """The app under uvicorn in a thread: ``url``; ``stop()`` ends it (bounded)."""

    def __init__(self, nlp, **settings) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        app = create_app(ServeSettings({"tiny": str(PIPELINE)}, **settings), models={"tiny": nlp})
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start within 30 s")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "uvicorn did not stop within 30 s"


@pytest.fixture(scope="module")
def nlp():
    return Pipeline.load(PIPELINE)


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _playwright()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def served(nlp):
    server = Served(nlp)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def page(browser, served):
    context = browser.new_context(viewport={"width": 1200, "height": 800}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(served.url)
    page.wait_for_selector("#model option[value=tiny]", state="attached")
    yield page
    context.close()
    assert not errors, f"the page's scripts failed: {errors}"


def _parse(page, text: str = TEXT) -> None:
    page.fill("#text", text)
    page.click("#parse")
    page.wait_for_selector("figure.tree svg.dependency-tree")


def _arcs(page, figure: int = 0) -> dict[int, dict]:
    """Word id -> its arc's attributes (dep, head, deprel, marginal) in figure ``figure``."""
    return {int(a["dep"]): a for a in page.eval_on_selector_all(
        f"figure.tree[data-index='{figure}'] path.arc",
        "els => els.map(e => ({dep: e.dataset.dep, head: Number(e.dataset.head),"
        " deprel: e.dataset.deprel, marginal: e.dataset.marginal,"
        " fixed: e.parentElement.classList.contains('fixed')}))")}


def _words(page, figure: int = 0) -> list[int]:
    return [int(i) for i in page.eval_on_selector_all(
        f"figure.tree[data-index='{figure}'] g.word", "els => els.map(e => e.dataset.id)")]


def _is_tree(heads: dict[int, int]) -> bool:
    if sorted(heads) != list(range(1, len(heads) + 1)) or list(heads.values()).count(0) != 1:
        return False
    for start in heads:
        seen, node = set(), start
        while node != 0:
            if node in seen:
                return False
            seen.add(node)
            node = heads[node]
    return True


def test_page_and_its_assets_come_from_the_package(served):
    index = httpx.get(served.url, timeout=10)
    assert index.status_code == 200 and "static/page.js" in index.text
    assert "http" not in index.text.split("<body>")[1].replace('href="api"', "")  # no CDN
    for name, kind in (("page.js", "javascript"), ("page.css", "css")):
        answer = httpx.get(served.url + "static/" + name, timeout=10)
        assert answer.status_code == 200 and kind in answer.headers["content-type"]
        assert "://" not in answer.text.replace("http://www.w3.org/2000/svg", "")
    assert httpx.get(served.url + "static/../app.py", timeout=10).status_code == 404


def test_a_parsed_text_has_one_arc_per_word_and_its_marginals_on_hover(page):
    _parse(page)
    assert page.locator("figure.tree").count() == 2
    for figure in (0, 1):
        words, arcs = _words(page, figure), _arcs(page, figure)
        assert words and sorted(arcs) == words  # exactly one arc per word
        assert _is_tree({dep: arc["head"] for dep, arc in arcs.items()})
        assert all(0 <= float(arc["marginal"]) <= 1 for arc in arcs.values())
    page.hover("figure.tree[data-index='0'] g.arc-group[data-dep='2'] text.label")
    info = page.locator("#info")
    info.wait_for(state="visible")
    assert "head marginal" in info.inner_text()
    rows = info.locator("tr")
    assert rows.count() >= 2  # the head shown and the alternatives, most probable first
    probs = [float(rows.nth(i).locator("td.prob").inner_text()) for i in range(rows.count())]
    assert probs == sorted(probs, reverse=True)
    with page.expect_download() as download:
        page.click("#download")
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert text.count("HeadProb=") == 9 and "# tree_entropy" in text


def test_a_clicked_arc_is_kept_and_the_rest_redecoded(page, served):
    _parse(page)
    before = _arcs(page)
    dep = 2
    head = next(h for h in (4, 3, 1) if h != before[dep]["head"])
    page.click(f"figure.tree[data-index='0'] g.word[data-id='{dep}'] text.form")
    page.wait_for_selector("#edit:not([hidden])")
    page.click(f"figure.tree[data-index='0'] g.word[data-id='{head}'] text.form")
    page.wait_for_selector(f"g.arc-group.fixed path.arc[data-dep='{dep}'][data-head='{head}']")
    after = _arcs(page)
    assert after[dep]["head"] == head and after[dep]["fixed"]
    assert after[dep]["marginal"] == "1.0000"  # conditioned on the fixed arc
    assert _is_tree({d: arc["head"] for d, arc in after.items()})
    # the rest is the exact re-decoding: what /trees answers for the same fixed arc
    block = page.evaluate("state.sentences[0].conllu")
    fixed = "".join(
        "\t".join(c[:6] + ([str(head), after[dep]["deprel"]] if c[0] == str(dep) else ["_", "_"])
                  + ["_", c[9]]) + "\n"
        for c in (line.split("\t") for line in block.split("\n") if line[:1].isdigit()))
    answer = httpx.post(served.url + "trees", json={"data": fixed + "\n", "input": "conllu",
                                                    "keep_heads": "given"}, timeout=30)
    expected = {int(c[0]): int(c[6]) for c in (line.split("\t") for line in
                answer.json()["sentences"][0]["conllu"].split("\n") if line[:1].isdigit())}
    assert {d: arc["head"] for d, arc in after.items()} == expected
    # a second fixed arc that closes a cycle: a message, and the tree stays
    page.click(f"figure.tree[data-index='0'] g.word[data-id='{head}'] text.form")
    page.click(f"figure.tree[data-index='0'] g.word[data-id='{dep}'] text.form")
    message = page.locator("#message")
    message.wait_for(state="visible")
    assert "cycle" in message.inner_text() and f"{dep} -> {head}" in message.inner_text() \
        or f"{head} -> {dep}" in message.inner_text()
    assert _arcs(page) == after
    # u undoes the fixed arc
    page.keyboard.press("u")
    page.wait_for_function(f"!document.querySelector(\"g.arc-group.fixed[data-dep='{dep}']\")")


def test_the_token_is_asked_for_once_and_sent(browser, nlp):
    server = Served(nlp, token="s3cret")
    try:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        sent: list[str | None] = []
        page.on("request", lambda r: sent.append(r.headers.get("authorization"))
                if r.url.endswith(("/models", "/trees")) else None)
        page.goto(server.url)
        page.wait_for_selector("#token-dialog[open]")
        page.fill("#token", "s3cret")
        page.click("#token-form button[type=submit]")
        page.wait_for_selector("#model option[value=tiny]", state="attached")
        _parse(page)
        assert page.locator("#token-dialog[open]").count() == 0
        assert sent[0] is None and sent[1:] == ["Bearer s3cret"] * (len(sent) - 1)
        assert len(sent) >= 3  # /models refused, /models, /trees
        context.close()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def annotation_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("page-select")
    output = folder / "batch.conllu"
    assert select_main([f"pipeline={PIPELINE}", f"pool={FIXTURES / 'tiny-train.conllu'}",
                        f"output={output}", "strategy=words", "budget=6", "cap=2"]) == 0
    return output


def test_an_annotation_file_walked_with_the_keyboard_saved_and_trained_on(
        page, annotation_file, tmp_path):
    text = annotation_file.read_text(encoding="utf-8")
    asked = _asked(text)  # (sentence, word) in select_order
    page.set_input_files("#file", str(annotation_file))
    page.wait_for_selector("#walk:not([hidden])")
    page.wait_for_selector("figure.tree.current g.word.current")
    assert "Word 1 of 6" in page.inner_text("#walk-progress")
    assert _current(page) == asked[0]
    page.keyboard.press("j")
    page.wait_for_function("document.querySelector('#walk-progress').textContent"
                           ".startsWith('Word 2 of')")
    assert _current(page) == asked[1]
    page.keyboard.press("k")
    page.wait_for_function("document.querySelector('#walk-progress').textContent"
                           ".startsWith('Word 1 of')")
    # Enter accepts the head shown; the walk moves on to the next word
    shown = _shown_head(page, asked[0][1])
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('#walk-progress').textContent"
                           ".includes('1 annotated')")
    assert _current(page) == asked[1]
    # 2 takes the word's second most probable head
    second = page.evaluate(f"state.sentences[{_index(page)}].heads['{asked[1][1]}'][1][0]")
    page.keyboard.press("2")
    page.wait_for_function("document.querySelector('#walk-progress').textContent"
                           ".includes('2 annotated')")
    # u undoes it, and the same key again redoes it
    page.keyboard.press("u")
    page.wait_for_function("document.querySelector('#walk-progress').textContent"
                           ".includes('1 annotated')")
    assert _current(page) == asked[1]
    page.keyboard.press("2")
    page.wait_for_function("document.querySelector('#walk-progress').textContent"
                           ".includes('2 annotated')")
    with page.expect_download() as download:
        page.keyboard.press("s")
    saved = tmp_path / "batch-done.conllu"
    download.value.save_as(saved)
    assert download.value.suggested_filename == "batch-done.conllu"
    assert "2 of 6 words annotated" in page.inner_text("#message")

    filled = _filled(saved.read_text(encoding="utf-8"))
    assert set(filled) == {asked[0], asked[1]}
    assert filled[asked[0]][0] == shown and filled[asked[1]][0] == second
    assert all(deprel != "_" for _, deprel in filled.values())
    assert _changed(text, saved.read_text(encoding="utf-8")) == {asked[0], asked[1]}
    # the trainer reads it: the two annotated words and nothing else
    trees = read_partial_trees(saved)
    kept = {(s.sent_id, dep) for s in trees for dep, h in enumerate(s.heads, start=1) if h >= 0}
    assert kept == {asked[0], asked[1]}
    cfg = tiny_config(f"data.train_file={saved}", "data.partial_trees=true",
                      "trainer.max_steps=2", "trainer.eval_every=2", "trainer.final_eval=false",
                      "model.use_upos=false", "model.labels=classifier")
    result = Trainer(cfg, run_dir=tmp_path / "run").fit()
    assert result.nonfinite_total == 0 and (tmp_path / "run/checkpoints/best.pt").exists()


def _asked(text: str) -> list[tuple[str, int]]:
    """(sent_id, word) of every asked-for word, in select_order."""
    ranked = []
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        value = {line[2:].split(" = ")[0]: line.split(" = ", 1)[1]
                 for line in lines if line.startswith("# ") and " = " in line}
        for word, order in zip(value["selected_words"].split(","),
                               value["select_order"].split(",")):
            ranked.append((int(order), value["sent_id"], int(word)))
    return [(sent_id, word) for _, sent_id, word in sorted(ranked)]


def _index(page) -> int:
    return int(page.get_attribute("figure.tree.current", "data-index"))


def _current(page) -> tuple[str, int]:
    index = _index(page)
    sent_id = page.evaluate(f"comment(state.walk.original[{index}], 'sent_id')")
    return sent_id, int(page.get_attribute("figure.tree.current g.word.current", "data-id"))


def _shown_head(page, dep: int) -> int:
    return int(page.get_attribute(f"figure.tree.current path.arc[data-dep='{dep}']", "data-head"))


def _filled(text: str) -> dict[tuple[str, int], tuple[int, str]]:
    """(sent_id, word) -> (HEAD, DEPREL) of the asked-for words that hold a head."""
    filled = {}
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        sent_id = next(line.split(" = ", 1)[1] for line in lines if line.startswith("# sent_id"))
        asked = next(line.split(" = ", 1)[1] for line in lines
                     if line.startswith("# selected_words")).split(",")
        for line in lines:
            columns = line.split("\t")
            if columns[0] in asked and columns[6] != "_":
                filled[(sent_id, int(columns[0]))] = (int(columns[6]), columns[7])
    return filled


def _changed(before: str, after: str) -> set[tuple[str, int]]:
    """(sent_id, word) of the lines that differ; only their HEAD and DEPREL may."""
    old, new = before.split("\n"), after.split("\n")
    assert len(old) == len(new) and after.endswith("\n\n")
    changed, sent_id = set(), None
    for a, b in zip(old, new):
        if a.startswith("# sent_id = "):
            sent_id = a.split(" = ", 1)[1]
        if a != b:
            x, y = a.split("\t"), b.split("\t")
            assert x[:6] + x[8:] == y[:6] + y[8:] and x[6:8] == ["_", "_"], (a, b)
            changed.add((sent_id, int(x[0])))
    return changed
