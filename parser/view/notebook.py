"""Pictures in a notebook: :func:`show` wraps sentences (what :meth:`parser.Pipeline.parse`
returns, or any sentence :mod:`parser.view.sentence` reads) in an object that Jupyter displays
as the pictures, through ``_repr_html_`` and ``_repr_svg_``; conllu's own classes are left as
they are.

    >>> from parser.view import show
    >>> shown = show("1\\tHi\\thi\\tINTJ\\t_\\t_\\t0\\troot\\t_\\t_\\n")
    >>> shown._repr_svg_().startswith("<svg")
    True
"""

from __future__ import annotations

import conllu

from parser.data.conllu_io import Sentence
from parser.view.page import CSS, figure_html
from parser.view.sentence import Tree
from parser.view.svg import sentence_svg

__all__ = ["Pictures", "show"]


class Pictures:
    """Sentences to display: ``_repr_html_`` gives one figure per sentence (with its id and
    text), ``_repr_svg_`` one SVG holding every picture, one under another."""

    def __init__(self, sentences: list, gold: list | None) -> None:
        if gold is not None and len(gold) != len(sentences):
            raise ValueError(f"show: {len(sentences)} sentences but {len(gold)} gold sentences")
        self.sentences = sentences
        self.gold = gold

    def __len__(self) -> int:
        return len(self.sentences)

    def __repr__(self) -> str:
        return f"<parser.view.Pictures of {len(self.sentences)} sentence(s)>"

    def svgs(self) -> list[str]:
        """One SVG per sentence."""
        return [sentence_svg(s, gold=self._gold(i), where=f"sentence {i + 1}")
                for i, s in enumerate(self.sentences)]

    def _gold(self, i: int):
        return None if self.gold is None else self.gold[i]

    def _repr_html_(self) -> str:
        figures = [figure_html(s, gold=self._gold(i), where=f"sentence {i + 1}")
                   for i, s in enumerate(self.sentences)]
        return f"<div class=\"parser-trees\"><style>{CSS}</style>{''.join(figures)}</div>"

    def _repr_svg_(self) -> str:
        svgs = self.svgs()
        if len(svgs) == 1:
            return svgs[0]
        parts, y, width = [], 0, 0
        for svg in svgs:
            w, h = _size(svg)
            parts.append(svg.replace("<svg ", f'<svg x="0" y="{y}" ', 1))
            y, width = y + h + 8, max(width, w)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="dependency-trees" width="{width}"'
                f' height="{max(y - 8, 0)}" viewBox="0 0 {width} {max(y - 8, 0)}">'
                + "".join(parts) + "</svg>")


def show(sentences, *, gold=None) -> Pictures:
    """The pictures of ``sentences``: one sentence (a ``conllu.TokenList``, a project
    ``Sentence``, CoNLL-U text) or a list of them, e.g. ``show(pipeline.parse(text))``; with
    ``gold`` (the same shape), wrong heads and labels are marked."""
    return Pictures(_listed(sentences), None if gold is None else _listed(gold))


def _listed(sentences) -> list:
    if isinstance(sentences, (str, conllu.TokenList, Sentence, Tree)):
        return [sentences]
    return list(sentences)


def _size(svg: str) -> tuple[int, int]:
    head = svg[: svg.index(">")]
    width = int(head.split(' width="', 1)[1].split('"', 1)[0])
    height = int(head.split(' height="', 1)[1].split('"', 1)[0])
    return width, height
