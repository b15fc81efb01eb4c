"""The HTML page, ``parser-draw`` end to end, and the notebook object."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import conllu as conllu_lib
import pytest

from parser.cli.draw import main
from parser.view import page_html, show
from tests.test_docs_entities import console_scripts
from tests.view.conftest import conllu

NS = {"s": "http://www.w3.org/2000/svg"}


def _file(tmp_path, name, blocks):
    path = tmp_path / name
    path.write_text("".join(blocks), encoding="utf-8")
    return path


def test_page_is_offline_and_has_one_figure_per_sentence(simple):
    other = conllu(["Hi 0 root"], sent_id="t2", text="Hi")
    page = page_html([simple, other], title="<mine>")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and "<script" not in page and "&lt;mine&gt;" in page
    assert page.count('<figure class="tree"') == 2 and page.count("<svg ") == 2
    assert 'data-sent-id="t2"' in page and "The dog barks." in page
    assert page == page_html([simple, other], title="<mine>")


def test_draw_writes_the_page(tmp_path, simple, capsys):
    predicted = simple.replace("\t2\tdet\t", "\t3\tdet\t")
    source = _file(tmp_path, "pred.conllu", [predicted, conllu(["Hi 0 root"], sent_id="t2")])
    gold = _file(tmp_path, "gold.conllu", [simple, conllu(["Hi 0 root"], sent_id="t2")])
    out = tmp_path / "out" / "trees.html"
    assert main([f"input={source}", f"output={out}", f"gold={gold}", "limit=1"]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.count("<svg ") == 1 and "wrong-head" in page and "gold-arc" in page
    assert "1 sentence(s) drawn" in capsys.readouterr().out
    svg = page[page.index("<svg "): page.index("</svg>") + 6]
    assert len([p for p in ET.fromstring(svg).iterfind(".//s:path", NS)
                if "arc" in p.get("class").split()]) == 4


def test_draw_refuses_bad_input_with_file_and_line(tmp_path, simple, capsys):
    bad = _file(tmp_path, "bad.conllu", [simple, "1\tHi\thi\tX\t_\t_\t0\troot\t_\n\n"])
    assert main([f"input={bad}", f"output={tmp_path / 'x.html'}"]) == 2
    err = capsys.readouterr().err
    assert "parser-draw: error:" in err and f"{bad}:8" in err
    assert not (tmp_path / "x.html").exists()
    other = _file(tmp_path, "other.conllu", [conllu(["A 2 det", "b 3 nsubj", "barks 0 root",
                                                     ". 3 punct"])])
    good = _file(tmp_path, "good.conllu", [simple])
    assert main([f"input={good}", f"output={tmp_path / 'y.html'}", f"gold={other}"]) == 2
    assert "other words" in capsys.readouterr().err
    assert main([f"input={good}", f"output={tmp_path / 'y.html'}", "limit=0"]) == 2
    assert main([f"input={good}"]) == 2


def test_console_script_is_registered():
    assert console_scripts()["parser-draw"] == "parser.cli.launch:draw"


def test_python_dash_m_runs_the_command(tmp_path, simple):
    source = _file(tmp_path, "in.conllu", [simple])
    done = subprocess.run([sys.executable, "-m", "parser.cli.draw", f"input={source}",
                           f"output={tmp_path / 'p.html'}"], check=False,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p.html").read_text(encoding="utf-8").count("<svg ") == 1


def test_notebook_object_reprs(simple):
    tokens = conllu_lib.parse(simple)
    shown = show(tokens[0])
    svg = shown._repr_svg_()
    assert ET.fromstring(svg).get("class").startswith("dependency-tree")
    html = shown._repr_html_()
    assert "<figure" in html and "<style>" in html and svg in html
    both = show([simple, conllu(["Hi 0 root"], sent_id="t2")])
    assert len(both) == 2
    outer = ET.fromstring(both._repr_svg_())
    assert len(outer.findall("s:svg", NS)) == 2
    assert not hasattr(conllu_lib.TokenList, "_repr_html_")  # conllu's class left alone
    with pytest.raises(ValueError, match="gold"):
        show([simple], gold=[])
