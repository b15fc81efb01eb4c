"""The screenshots of docs/service.md's "The page": parser-serve's page in headless Chromium
(Debian's, through Playwright) with a parser checkpoint, (1) a parsed sentence showing confidence
with an arc hovered, (2) the walk of an annotation file that parser-select wrote for a few
en_ewt dev sentences, after one word accepted.

    python experiments/page_screenshots.py checkpoint=runs/quickstart/checkpoints/best.pt

The figures in docs/img/page_*.png came from a quickstart parser without UPOS input
(``parser-train experiment=quickstart model.use_upos=false trainer.max_steps=300``: dev UAS
72.6, LAS 63.9), on a 2-core CPU machine. Options: ``checkpoint=`` (required), ``pool=`` (a
CoNLL-U file; default en_ewt dev under data/ud), ``pool_sentences=`` (its first 40 of 6 to 14
words), ``out=`` (docs/img).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SENTENCE = "I saw the man with the telescope in the park yesterday ."


def main(argv: list[str]) -> int:
    options = dict(arg.split("=", 1) for arg in argv)
    checkpoint = Path(options["checkpoint"])
    pool = Path(options.get("pool", REPO / "data/ud/en_ewt/en_ewt-ud-dev.conllu"))
    out = Path(options.get("out", REPO / "docs/img"))
    count = int(options.get("pool_sentences", 40))

    import uvicorn
    from playwright.sync_api import sync_playwright

    from parser import Pipeline
    from parser.cli.pipeline import build_pipeline
    from parser.cli.select import main as select_main
    from parser.serve import ServeSettings, create_app

    work = Path(tempfile.mkdtemp(prefix="page-shots-"))
    pipeline = work / "en.pipeline"
    build_pipeline(tokenizer=None, parser=checkpoint, tagger=None, output=pipeline)
    small_pool = work / "pool.conllu"
    blocks = [b for b in pool.read_text(encoding="utf-8").split("\n\n")  # short ones: a
              if 6 <= sum(line[:1].isdigit() for line in b.split("\n")) <= 14][:count]  # picture
    small_pool.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    annotation = work / "batch1.conllu"
    assert select_main([f"pipeline={pipeline}", f"pool={small_pool}", f"output={annotation}",
                        "strategy=words", "budget=12", "cap=2"]) == 0

    app = create_app(ServeSettings({"en": str(pipeline)}), models={"en": Pipeline.load(pipeline)})
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1100, "height": 600})
            page.set_default_timeout(30_000)
            page.goto(url)
            page.wait_for_selector("#model option[value=en]", state="attached")
            page.fill("#text", SENTENCE)
            page.click("#parse")
            page.wait_for_selector("figure.tree svg")
            arcs = page.eval_on_selector_all(
                "path.arc[data-marginal]", "els => els.map(e => [e.dataset.dep, e.dataset.marginal])")
            doubtful = min(arcs, key=lambda a: float(a[1]))[0]
            page.hover(f"g.arc-group[data-dep='{doubtful}'] text.label")
            page.wait_for_selector("#info:not([hidden])")
            page.screenshot(path=str(out / "page_confidence.png"), full_page=False)

            page.set_viewport_size({"width": 1100, "height": 660})
            page.set_input_files("#file", str(annotation))
            page.wait_for_selector("figure.tree.current g.word.current")
            page.keyboard.press("Enter")
            page.wait_for_function("document.querySelector('#walk-progress').textContent"
                                   ".includes('1 annotated')")
            page.wait_for_selector("figure.tree.current g.word.current")
            page.mouse.move(5, 5)
            page.screenshot(path=str(out / "page_walk.png"), full_page=False)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    for name in ("page_confidence.png", "page_walk.png"):
        print(f"{out / name}: {(out / name).stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
