"""A dependency tree as SVG: words in order with LEMMA, UPOS and FEATS beneath, arcs above
with their relations, as a pure function of the CoNLL-U sentence (and of a gold one beside it).

What a page or a test can rely on:

- each word is ``<g class="word" data-id="i">``; each word with a head has exactly one
  ``<path class="arc ..." data-dep="i" data-head="h" data-deprel="...">``: the ROOT arc is an
  arc too (``class="arc root-arc"``, ``data-head="0"``, a vertical line from above the
  picture's arcs down to the root word); a word whose HEAD is ``_`` has none;
- the arc, its arrowhead and label sit in ``<g class="dependency">`` with a ``<title>``
  tooltip; a non-projective arc has the class ``nonprojective`` and is dashed;
- with confidence in MISC (:mod:`parser.data.misc`): ``data-marginal`` (head marginal),
  ``data-label-marginal``, the class ``conf-<k>`` of its bin (:data:`~parser.view.marks.CONFIDENCE_BINS`:
  colour, and width and opacity growing with the marginal); a runner-up head
  (``AltHead``/``AltHeadProb``) is in the tooltip, as ``data-alt-head`` / ``data-alt-marginal``,
  and, when its probability is at least :data:`ALT_SHOWN`, a dotted grey
  ``<path class="alt-arc">`` from it;
- against gold: ``wrong-head`` (red arc, with a green ``<path class="gold-arc">`` from the
  gold head, labelled with the gold relation) and ``wrong-label`` (red label followed by
  ``/gold``), and ``data-gold-head`` / ``data-gold-deprel``;
- a legend of the marks used; no ids, no random numbers, no clock: same input, same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from parser.view.layout import (
    anchors,
    arc_levels,
    column_centers,
    is_rtl,
    nonprojective,
    text_width,
)
from parser.view.marks import (
    ALT,
    ALT_DASH,
    CONFIDENCE_BINS,
    GOLD,
    GOLD_DASH,
    INK,
    NONPROJECTIVE_DASH,
    WRONG,
    confidence_bin,
    escape,
    probability,
)
from parser.view.sentence import Tree, as_tree
from parser.view.words import FORM_SIZE, legend, multiword_svg, word_svg, word_width, words_depth

__all__ = ["ALT_SHOWN", "sentence_svg"]

ALT_SHOWN = 0.1  # a runner-up head this probable or more gets its dotted arc
LEVEL = 24.0  # height between two arc levels
LABEL_SIZE = 11.0
MARGIN = 16.0
FONT = "Noto Sans, DejaVu Sans, Noto Sans Arabic, Arial, sans-serif"


@dataclass(frozen=True)
class _Arc:
    kind: str  # "arc", "gold-arc", "alt-arc"
    head: int
    dep: int
    label: str


def sentence_svg(sentence, *, gold=None, where: str = "sentence") -> str:
    """The SVG picture of ``sentence`` (a ``conllu.TokenList``, a project ``Sentence`` or one
    CoNLL-U block's text), its wrong heads and labels marked against ``gold`` (the same words).

    >>> svg = sentence_svg("1\\tHi\\thi\\tINTJ\\t_\\t_\\t0\\troot\\t_\\t_\\n")
    >>> svg.startswith("<svg") and 'class="arc root-arc" data-dep="1" data-head="0"' in svg
    True
    """
    tree = as_tree(sentence, where=where)
    truth = None if gold is None else as_tree(gold, where=f"{where} (gold)")
    if truth is not None and truth.forms != tree.forms:
        raise ValueError(f"{where}: the gold sentence has other words ({len(truth.words)} "
                         f"against {len(tree.words)}): {' '.join(truth.forms)[:80]!r}")
    words, n = tree.words, len(tree.words)
    rtl = is_rtl(tree.forms)

    def position(word_id: int) -> int:
        return n - word_id if rtl else word_id - 1

    arcs: list[_Arc] = []
    for word in words:
        if word.head:
            arcs.append(_Arc("arc", word.head, word.id, word.deprel or "_"))
        g = truth.words[word.id - 1] if truth is not None else None
        if g is not None and g.head and g.head != word.head:
            arcs.append(_Arc("gold-arc", g.head, word.id, g.deprel or "_"))
        alt = word.confidence
        if (alt.alt_head and alt.alt_head != word.head and alt.alt_prob is not None
                and alt.alt_prob >= ALT_SHOWN):
            arcs.append(_Arc("alt-arc", alt.alt_head, word.id, ""))
    labels = [_label(arc, truth) for arc in arcs]
    spans = [tuple(sorted((position(arc.head), position(arc.dep)))) for arc in arcs]
    levels = arc_levels(spans)
    widths = [0.0] * n
    for word in words:
        widths[position(word.id)] = word_width(word)
    needs = [(left, right, text_width("".join(labels[i]), LABEL_SIZE) + 24.0)
             for i, (left, right) in enumerate(spans)]
    centers = column_centers(widths, needs, margin=MARGIN)

    ends: dict[int, list[tuple[int, int, int]]] = {word.id: [] for word in words}
    for i, arc in enumerate(arcs):
        length = spans[i][1] - spans[i][0]
        towards_head = -1 if position(arc.head) < position(arc.dep) else 1
        ends[arc.dep].append((i, towards_head, length))
        ends[arc.head].append((i, -towards_head, length))
    roots = {word.id for word in words if word.head == 0}
    roots |= {g.id for g in (truth.words if truth else ()) if g.head == 0 and words[g.id - 1].head}
    for word_id in sorted(roots):
        ends[word_id].append((-word_id, 0, 0))
    feet: dict[int, dict[int, float]] = {
        word.id: anchors(ends[word.id], centers[position(word.id)], widths[position(word.id)])
        for word in words}

    marks = _marks(tree, truth, arcs)
    legend_svg, legend_width = legend(marks, x=MARGIN, y=MARGIN + 4) if marks else ("", 0.0)
    top = MARGIN + (22.0 if marks else 0.0) + LABEL_SIZE
    highest = max(levels, default=0) + (1 if roots else 0)
    base = top + highest * LEVEL + 6
    baseline = base + FORM_SIZE + 6
    depth = words_depth(words) + (34.0 if tree.multiwords else 0.0)
    width = max(centers[-1] + widths[-1] / 2 + MARGIN if n else 0.0, legend_width + 2 * MARGIN)
    height = baseline + depth + MARGIN

    direction = "rtl" if rtl else "ltr"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="dependency-tree {direction}"'
           f' width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}"'
           f' font-family="{FONT}" data-direction="{direction}" data-words="{n}"'
           + (f' data-sent-id="{escape(tree.sent_id)}"' if tree.sent_id else "") + ">"]
    if tree.sent_id or tree.text:
        out.append(f"<title>{escape(tree.sent_id or tree.text)}</title>")
    out.append('<rect class="background" x="0" y="0" width="100%" height="100%" fill="#ffffff"/>')
    out.append(legend_svg)
    order = sorted(range(len(arcs)), key=lambda i: ({"alt-arc": 0, "gold-arc": 1, "arc": 2}[arcs[i].kind], i))
    for i in order:
        arc = arcs[i]
        x_head, x_dep = feet[arc.head][i], feet[arc.dep][i]
        out.append(_arc_svg(arc, labels[i], tree, truth, x_head=x_head, x_dep=x_dep, base=base,
                            peak=base - levels[i] * LEVEL,
                            nonprojective=arc.kind == "arc" and arc.dep in _nonproj(tree)))
    for word_id in sorted(roots):
        word = words[word_id - 1]
        kind = "arc" if word.head == 0 else "gold-arc"
        arc = _Arc(kind, 0, word_id, (word.deprel if kind == "arc" else
                                      truth.words[word_id - 1].deprel) or "_")
        out.append(_arc_svg(arc, _label(arc, truth), tree, truth, x_head=feet[word_id][-word_id],
                            x_dep=feet[word_id][-word_id], base=base, peak=top, nonprojective=False))
    out.append('<g class="words">')
    for word in words:
        out.append(word_svg(word, x=centers[position(word.id)], baseline=baseline, rtl=rtl))
    out.append("</g>")
    below = baseline + words_depth(words) + 2
    for token in tree.multiwords:
        if not 1 <= token.first <= token.last <= n:
            continue
        cols = sorted((position(token.first), position(token.last)))
        left = centers[cols[0]] - widths[cols[0]] / 2 + 4
        right = centers[cols[1]] + widths[cols[1]] / 2 - 4
        out.append(multiword_svg(token, left=left, right=right, y=below))
    out.append("</svg>")
    return "".join(out)


def _nonproj(tree: Tree) -> set[int]:
    return nonprojective([word.head for word in tree.words])


def _label(arc: _Arc, truth: Tree | None) -> tuple[str, str]:
    """``(label, gold label shown after it)``: the second is ``/gold`` for a wrong label."""
    if arc.kind != "arc" or truth is None:
        return arc.label, ""
    g = truth.words[arc.dep - 1]
    if g.head == arc.head and (g.deprel or "_") != arc.label:
        return arc.label, f"/{g.deprel or '_'}"
    return arc.label, ""


def _marks(tree: Tree, truth: Tree | None, arcs: list[_Arc]) -> list[str]:
    marks = []
    if any(word.confidence.head_prob is not None for word in tree.words):
        marks.append("confidence")
    if _nonproj(tree):
        marks.append("nonprojective")
    if any(arc.kind == "alt-arc" for arc in arcs):
        marks.append("runner-up")
    if truth is not None:
        pairs = list(zip(tree.words, truth.words))
        if any(w.head != g.head for w, g in pairs if w.head is not None):
            marks += ["wrong-head", "gold"]
        if any(w.head == g.head and w.deprel != g.deprel for w, g in pairs):
            marks.append("wrong-label")
    return marks


def _arc_svg(arc: _Arc, label: tuple[str, str], tree: Tree, truth: Tree | None, *, x_head: float,
             x_dep: float, base: float, peak: float, nonprojective: bool) -> str:
    """One ``<g class="dependency">``: tooltip, arc (``arc``, ``gold-arc`` or ``alt-arc``),
    arrowhead at the dependent, label on the arc's top."""
    word = tree.words[arc.dep - 1]
    g = truth.words[arc.dep - 1] if truth is not None else None
    classes, colour, width, opacity, dash = [arc.kind], INK, 1.6, 1.0, ""
    data = [f'data-dep="{arc.dep}"', f'data-head="{arc.head}"']
    tip = [f"{arc.label or 'runner-up'}: {_name(tree, arc.head)} → {_name(tree, arc.dep)}"]
    if arc.kind == "arc":
        if arc.head == 0:
            classes.append("root-arc")
        data.append(f'data-deprel="{escape(arc.label)}"')
        conf = word.confidence
        if conf.head_prob is not None:
            k = confidence_bin(conf.head_prob)
            classes.append(f"conf-{k}")
            colour = CONFIDENCE_BINS[k][1]
            width, opacity = 1.0 + 2.0 * conf.head_prob, 0.45 + 0.55 * conf.head_prob
            data.append(f'data-marginal="{probability(conf.head_prob)}"')
            tip.append(f"head marginal {probability(conf.head_prob)}")
        if conf.deprel_prob is not None:
            data.append(f'data-label-marginal="{probability(conf.deprel_prob)}"')
            tip.append(f"label marginal {probability(conf.deprel_prob)}")
        if conf.alt_head is not None:
            data.append(f'data-alt-head="{conf.alt_head}"')
            shown = "" if conf.alt_prob is None else f" p={probability(conf.alt_prob)}"
            if conf.alt_prob is not None:
                data.append(f'data-alt-marginal="{probability(conf.alt_prob)}"')
            tip.append(f"runner-up head {_name(tree, conf.alt_head)}{shown}")
        if nonprojective:
            classes.append("nonprojective")
            dash = NONPROJECTIVE_DASH
            tip.append("non-projective")
        if g is not None:
            data += [f'data-gold-head="{g.head if g.head is not None else "_"}"',
                     f'data-gold-deprel="{escape(g.deprel or "_")}"']
            if g.head is not None and g.head != arc.head:
                classes.append("wrong-head")
                colour, opacity = WRONG, 1.0
                tip.append(f"wrong head: gold {_name(tree, g.head)} {g.deprel or '_'}")
            elif (g.deprel or "_") != arc.label:
                classes.append("wrong-label")
                tip.append(f"wrong label: gold {g.deprel or '_'}")
    elif arc.kind == "gold-arc":
        colour, width, dash = GOLD, 1.4, GOLD_DASH if arc.head else ""
        data.append(f'data-deprel="{escape(arc.label)}"')
        tip[0] = f"gold {tip[0]}"
    else:
        colour, width, opacity, dash = ALT, 1.3, 0.9, ALT_DASH
        if word.confidence.alt_prob is not None:
            data.append(f'data-marginal="{probability(word.confidence.alt_prob)}"')
            tip[0] = f"runner-up head: {_name(tree, arc.head)} → {_name(tree, arc.dep)} p={probability(word.confidence.alt_prob)}"
    stroke = (f' fill="none" stroke="{colour}" stroke-width="{width:.2f}"'
              + (f' stroke-opacity="{opacity:.2f}"' if opacity < 1 else "")
              + (f' stroke-dasharray="{dash}"' if dash else ""))
    parts = [f'<g class="dependency {arc.kind}-group" data-dep="{arc.dep}" data-head="{arc.head}">',
             f"<title>{escape(chr(10).join(tip))}</title>",
             f'<path class="{" ".join(classes)}" {" ".join(data)} d="{_path(x_head, x_dep, base, peak)}"{stroke}/>']
    if arc.kind != "alt-arc":
        parts.append(f'<path class="arrow" d="M{x_dep - 3.5:.1f},{base - 7:.1f} L{x_dep + 3.5:.1f},'
                     f'{base - 7:.1f} L{x_dep:.1f},{base:.1f} Z" fill="{colour}"'
                     + (f' fill-opacity="{opacity:.2f}"' if opacity < 1 else "") + "/>")
    text, gold_text = label
    if text:
        middle = x_dep if arc.head == 0 else (x_head + x_dep) / 2
        box = text_width(text + gold_text, LABEL_SIZE) + 6
        label_colour = WRONG if "wrong-label" in classes or "wrong-head" in classes else (
            GOLD if arc.kind == "gold-arc" else "#222222")
        parts.append(f'<rect class="label-box" x="{middle - box / 2:.1f}" y="{peak - 8:.1f}"'
                     f' width="{box:.1f}" height="14" rx="3" fill="#ffffff" fill-opacity="0.9"/>')
        gold_span = (f'<tspan class="gold-label" fill="{GOLD}">{escape(gold_text)}</tspan>'
                     if gold_text else "")
        parts.append(f'<text class="label" x="{middle:.1f}" y="{peak + 3.5:.1f}"'
                     f' font-size="{LABEL_SIZE}" text-anchor="middle" fill="{label_colour}"'
                     f' direction="ltr">{escape(text)}{gold_span}</text>')
    parts.append("</g>")
    return "".join(parts)


def _path(x_head: float, x_dep: float, base: float, peak: float) -> str:
    """From the head's foot up, across at ``peak`` and down to the dependent (rounded corners);
    ROOT's (``x_head == x_dep``) is a vertical line."""
    if x_head == x_dep:
        return f"M{x_dep:.1f},{peak + 8:.1f} V{base - 7:.1f}"
    radius = min(8.0, abs(x_dep - x_head) / 2, (base - peak) / 2)
    turn = radius if x_dep > x_head else -radius
    return (f"M{x_head:.1f},{base:.1f} V{peak + radius:.1f} Q{x_head:.1f},{peak:.1f} "
            f"{x_head + turn:.1f},{peak:.1f} H{x_dep - turn:.1f} Q{x_dep:.1f},{peak:.1f} "
            f"{x_dep:.1f},{peak + radius:.1f} V{base - 7:.1f}")


def _name(tree: Tree, word_id: int) -> str:
    if word_id == 0:
        return "ROOT"
    if 1 <= word_id <= len(tree.words):
        return f"{tree.words[word_id - 1].form} ({word_id})"
    return f"({word_id})"
