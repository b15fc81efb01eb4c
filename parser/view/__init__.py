"""Pictures of dependency trees: SVG drawn from CoNLL-U (:func:`sentence_svg`), a standalone
HTML page of them (:func:`page_html`, ``parser-draw``), and notebook display (:func:`show`).
Pure: no model and no torch of its own; docs/pictures.md shows them and says what the marks
mean."""

from __future__ import annotations

from parser.view.notebook import Pictures, show
from parser.view.page import figure_html, page_html, write_page
from parser.view.sentence import Tree, as_tree
from parser.view.svg import sentence_svg

__all__ = ["Pictures", "Tree", "as_tree", "figure_html", "page_html", "sentence_svg", "show",
           "write_page"]
