"""A standalone HTML page of pictures: one figure per sentence with its ``sent_id`` and text,
inline CSS only (no script, no CDN: it opens offline), each picture in a box that scrolls
sideways when the sentence is wider than the window.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from parser.view.layout import is_rtl
from parser.view.marks import escape
from parser.view.sentence import as_tree
from parser.view.svg import sentence_svg

__all__ = ["CSS", "figure_html", "page_html", "write_page"]

CSS = """\
body { font-family: "Noto Sans", "DejaVu Sans", Arial, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.2em; }
figure.tree { margin: 0 0 1.5em 0; border: 1px solid #ddd; border-radius: 4px; }
figure.tree figcaption { padding: 0.4em 0.7em; background: #f6f6f6; font-size: 0.9em; }
figure.tree .sent-id { font-family: monospace; color: #555; margin-inline-end: 0.8em; }
figure.tree .scroll { overflow-x: auto; }
figure.tree svg { display: block; }
svg.dependency-tree g.dependency:hover path.arc { stroke-width: 3.5; }
svg.dependency-tree g.word:hover text.form { fill: #1f5fa8; }
"""


def figure_html(sentence, *, gold=None, where: str = "sentence") -> str:
    """One ``<figure class="tree">``: caption (``sent_id``, text) and the picture."""
    tree = as_tree(sentence, where=where)
    svg = sentence_svg(tree, gold=gold, where=where)
    direction = "rtl" if is_rtl(tree.forms) else "ltr"  # a wide picture scrolls from word 1
    caption = ""
    if tree.sent_id:
        caption += f'<span class="sent-id">{escape(tree.sent_id)}</span>'
    if tree.text:
        caption += f'<span class="text" dir="auto">{escape(tree.text)}</span>'
    data = f' data-sent-id="{escape(tree.sent_id)}"' if tree.sent_id else ""
    return (f'<figure class="tree"{data}><figcaption>{caption}</figcaption>'
            f'<div class="scroll" dir="{direction}">{svg}</div></figure>')


def page_html(sentences: Iterable, *, gold: Sequence | None = None, title: str = "Trees",
              where: str = "sentence") -> str:
    """The whole HTML page of ``sentences`` (each against ``gold[i]`` when given)."""
    sentences = list(sentences)
    if gold is not None and len(gold) < len(sentences):
        raise ValueError(f"{where}: {len(sentences)} sentences but {len(gold)} gold sentences")
    figures = [figure_html(s, gold=None if gold is None else gold[i], where=f"{where} {i + 1}")
               for i, s in enumerate(sentences)]
    return ("<!DOCTYPE html>\n<html lang=\"und\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(title)}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n"
            f"<h1>{escape(title)}</h1>\n" + "\n".join(figures) + "\n</body>\n</html>\n")


def write_page(sentences: Iterable, path: str | os.PathLike, *, gold: Sequence | None = None,
               title: str = "Trees") -> Path:
    """:func:`page_html` written to ``path`` (UTF-8)."""
    path = Path(path)
    path.write_text(page_html(sentences, gold=gold, title=title), encoding="utf-8")
    return path
