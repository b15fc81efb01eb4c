"""Validation of raw CoNLL-U text, keeping the file's line numbers for every error.

The ``conllu`` library accepts much that is malformed (it splits on two spaces, ignores missing
blank lines, parses ``\\r``), so the reader checks the raw lines here first:

- file-level problems (:func:`check_text`): byte-order mark, carriage returns (CRLF), lines holding
  only whitespace, no sentence at all, no blank line after the last sentence. These always raise,
  even with ``on_invalid="skip"``: they concern the whole file, not one sentence.
- sentence-level problems (:func:`parse_rows`): wrong column count, empty columns, bad or
  non-sequential ids, multiword ranges and empty nodes out of place, non-integer, out-of-range or
  self-looping HEAD, unannotated HEAD where trees are required, no words, no root or several roots,
  cycles. With ``on_invalid="skip"`` the reader skips such sentences and counts them.

Every number (ID, multiword range, empty node, HEAD, the heads of DEPS) is read with a bound of
:data:`MAX_DIGITS` digits, so that no value, however long, reaches ``int()`` (Python refuses
strings of over 4,300 digits) or a tensor (int64) unchecked: a longer one is an error of its
line, as any other malformed value, and messages show at most :data:`SHOWN` characters of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_DIGITS", "ConlluError", "Rows", "check_text", "parse_rows"]

N_COLUMNS = 10
MAX_DIGITS = 9  # word indices up to 999,999,999: far above any sentence, far below int64
SHOWN = 24  # characters of a bad value quoted in a message
COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
_WHITESPACE_LINE = re.compile(r"^[ \t\f\v]+$", re.MULTILINE)


class ConlluError(ValueError):
    """Malformed CoNLL-U input: ``path:line: problem``.

    ``line`` is 1-based; it names the offending line, or the first line of the sentence for
    problems of a whole sentence (no words, no root).
    """

    def __init__(self, path: str, line: int, problem: str) -> None:
        self.path = str(path)
        self.line = int(line)
        self.problem = problem
        super().__init__(f"{self.path}:{self.line}: {problem}")

    def __reduce__(self):  # keep the three fields through pickling (multiprocessing workers)
        return (type(self), (self.path, self.line, self.problem))


def check_text(text: str, path: str, *, final_blank_line: bool = True) -> None:
    """Raise :class:`ConlluError` on file-level problems of ``text`` read from ``path``.

    ``final_blank_line``: require the empty line that ends the last sentence (CoNLL-U);
    plain-text input sets it to False.
    """
    if text.startswith("\ufeff"):
        raise ConlluError(path, 1, "byte-order mark (BOM) at the start of the file; "
                                   "save it as UTF-8 without BOM")
    carriage = text.find("\r")
    if carriage >= 0:
        line = text.count("\n", 0, carriage) + 1
        kind = "CRLF line ending" if text.startswith("\r\n", carriage) else "carriage return"
        raise ConlluError(path, line, f"{kind} (\\r); convert the file to LF line endings "
                                      "(e.g. dos2unix)")
    blank = _WHITESPACE_LINE.search(text)
    if blank is not None:
        line = text.count("\n", 0, blank.start()) + 1
        raise ConlluError(path, line, "line holds only whitespace (a separator line must be empty)")
    if not text.strip():
        raise ConlluError(path, 1, "no sentences: the file is empty")
    if final_blank_line and not text.endswith("\n\n"):
        last = text.rstrip("\n").count("\n") + 1
        raise ConlluError(path, last, "missing blank line after the last sentence (line "
                                      f"{last}); a CoNLL-U file ends with an empty line")


@dataclass(frozen=True)
class Rows:
    """The syntactic words of one sentence, parsed from its raw lines.

    ``heads[i]`` is the head of word ``i + 1`` (0 = ROOT, -1 = unannotated ``_``);
    ``upos``/``deprels`` hold None for ``_``; ``word_rows[i]`` is the index of the word's line in
    the sentence's lines and ``word_lines[i]`` its 1-based line in the file.
    """

    forms: list[str]
    lemmas: list[str]
    upos: list[str | None]
    heads: list[int]
    deprels: list[str | None]
    word_rows: list[int]
    word_lines: list[int]


def parse_rows(lines: list[str], *, path: str, first_line: int, require_trees: bool = True,
               single_root: bool = True, check_heads: bool = True,
               partial_option: str | None = None) -> Rows:
    """Parse and validate one sentence's raw ``lines`` (comments included, no newlines).

    ``first_line`` is the 1-based file line of ``lines[0]``. ``require_trees``: every HEAD must
    be annotated; otherwise ``_`` is allowed (unlabeled or partially annotated text).
    ``single_root``: at most one word may attach to ROOT, and exactly one in a complete tree.
    ``check_heads=False``: HEAD must still be an integer or ``_``, but the heads may form no tree
    (out of range, self-loops, several roots, cycles): for ``parser-predict keep_heads=given``,
    which reports such a sentence itself and parses the others. ``partial_option``: the setting
    with which the caller accepts unannotated heads (``data.partial_trees=true``), named when
    ``require_trees`` refuses one; None: the caller has none. Raises :class:`ConlluError` naming
    the line and the problem.
    """
    rows = Rows([], [], [], [], [], [], [])
    seen_token = False
    range_end = 0  # last word id covered by a multiword token seen so far
    empty_node = (0, 0)  # (word id, sub-index) of the last empty node
    for offset, raw in enumerate(lines):
        lineno = first_line + offset
        if raw.startswith("#"):
            if seen_token:
                raise ConlluError(path, lineno, "comment line after the first token line")
            continue
        seen_token = True
        cols = raw.split("\t")
        if len(cols) != N_COLUMNS:
            raise ConlluError(path, lineno, f"expected {N_COLUMNS} tab-separated columns, "
                                            f"found {len(cols)}")
        if "" in cols:
            name = COLUMNS[cols.index("")]
            raise ConlluError(path, lineno, f"empty {name} column (write '_' for no value)")
        token_id = cols[0]
        expected = len(rows.forms) + 1
        if _is_int(token_id):
            if token_id != str(expected):
                raise ConlluError(path, lineno, f"word id {_shown(token_id)} where {expected} "
                                                "expected (word ids must run 1, 2, 3, ...)")
            _add_word(rows, cols, lineno=lineno, row=offset, path=path,
                      require_trees=require_trees, partial_option=partial_option)
        elif "-" in token_id:
            start, _, end = token_id.partition("-")
            if not (_is_index(start) and _is_index(end)):
                raise ConlluError(path, lineno, f"multiword token id {_shown(token_id)} is not a "
                                                "range of word indices")
            if int(start) != expected or int(end) <= int(start) or int(start) <= range_end:
                raise ConlluError(path, lineno, f"multiword token range {token_id!r} out of place "
                                                f"(next word is {expected})")
            range_end = int(end)
        elif "." in token_id:
            word, _, sub = token_id.partition(".")
            if not (_is_index(word) and _is_index(sub)):
                raise ConlluError(path, lineno, f"empty node id {_shown(token_id)} is not a word "
                                                "index and a sub-index")
            last = empty_node[1] if empty_node[0] == int(word) else 0
            if int(word) != expected - 1 or int(sub) != last + 1:
                raise ConlluError(path, lineno, f"empty node id {token_id!r} out of place "
                                                f"(expected {expected - 1}.{last + 1})")
            empty_node = (int(word), int(sub))
            _check_deps(cols[8], path=path, lineno=lineno)
        else:
            raise ConlluError(path, lineno, f"invalid ID {_shown(token_id)}")
    n = len(rows.forms)
    if n == 0:
        raise ConlluError(path, first_line, "empty sentence: no word lines")
    if range_end > n:
        raise ConlluError(path, first_line, f"multiword token ends at word {range_end} "
                                            f"but the sentence has {n} words")
    if check_heads:
        _check_heads(rows, path=path, first_line=first_line, single_root=single_root)
    return rows


def _is_int(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _is_index(text: str) -> bool:
    """Whether ``text`` is a non-negative integer of at most :data:`MAX_DIGITS` digits."""
    return len(text) <= MAX_DIGITS and _is_int(text)


def _shown(value: str) -> str:
    """``value`` quoted for a message, cut to :data:`SHOWN` characters with its length.

    >>> _shown("9" * 30)
    "'999999999999999999999999...' (30 characters)"
    """
    if len(value) <= SHOWN:
        return repr(value)
    return f"{value[:SHOWN]!r}"[:-1] + f"...' ({len(value)} characters)"


def _check_deps(deps: str, *, path: str, lineno: int) -> None:
    """The heads of DEPS (``head:relation`` pairs, a head ``n`` or an empty node ``n.m``) are
    bounded word indices; the rest of the column is not read."""
    if deps == "_":
        return
    for item in deps.split("|"):
        head = item.partition(":")[0]
        if not all(_is_index(part) for part in head.split(".", 1)):
            raise ConlluError(path, lineno, f"DEPS head {_shown(head)} is not a word index of "
                                            "this sentence")


def _add_word(rows: Rows, cols: list[str], *, lineno: int, row: int, path: str,
              require_trees: bool, partial_option: str | None) -> None:
    head = cols[6]
    if head == "_":
        if require_trees:
            accept = (f"; set {partial_option} to accept partly annotated trees"
                      if partial_option else "")
            raise ConlluError(path, lineno, "HEAD is '_' (unannotated) but every head of this "
                                            f"file must be annotated{accept}")
        head_id = -1
    elif _is_index(head):
        head_id = int(head)
    elif _is_int(head):
        raise ConlluError(path, lineno, f"HEAD {_shown(head)} is not a word index of this sentence")
    else:
        raise ConlluError(path, lineno, f"HEAD {_shown(head)} is not a non-negative integer")
    _check_deps(cols[8], path=path, lineno=lineno)
    rows.forms.append(cols[1])
    rows.lemmas.append(cols[2])
    rows.upos.append(None if cols[3] == "_" else cols[3])
    rows.heads.append(head_id)
    rows.deprels.append(None if cols[7] == "_" else cols[7])
    rows.word_rows.append(row)
    rows.word_lines.append(lineno)


def _check_heads(rows: Rows, *, path: str, first_line: int, single_root: bool) -> None:
    heads, lines, n = rows.heads, rows.word_lines, len(rows.heads)
    for dep, head in enumerate(heads, start=1):
        if head > n:
            raise ConlluError(path, lines[dep - 1],
                              f"HEAD {head} out of range (sentence has {n} words)")
        if head == dep:
            raise ConlluError(path, lines[dep - 1], f"HEAD {head} is a self-loop "
                                                    f"(word {dep} is its own head)")
    roots = [dep for dep, head in enumerate(heads, start=1) if head == 0]
    if single_root and len(roots) > 1:
        raise ConlluError(path, lines[roots[1] - 1],
                          f"several roots: words {', '.join(map(str, roots))} have HEAD 0 "
                          "(exactly one is required)")
    if single_root and not roots and -1 not in heads:
        raise ConlluError(path, first_line, "no root: no word has HEAD 0 (exactly one is "
                                            "required)")
    cycle = find_cycle(heads)
    if cycle:
        path_text = " -> ".join(map(str, cycle + [cycle[0]]))
        raise ConlluError(path, lines[min(cycle) - 1], f"cycle in HEAD: {path_text}")


def find_cycle(heads: list[int]) -> list[int]:
    """Word ids (1-based) of one cycle among ``heads`` (``heads[i]`` heads word ``i+1``; 0 and
    -1 end a path), or ``[]``. Linear time: each word is walked once.

    >>> find_cycle([0, 3, 2])
    [2, 3]
    >>> find_cycle([2, 0, -1])
    []
    """
    state = [0] * (len(heads) + 1)  # 0 unvisited, 1 on the current walk, 2 done
    for start in range(1, len(heads) + 1):
        walk = []
        node = start
        while node > 0 and state[node] == 0:
            state[node] = 1
            walk.append(node)
            node = heads[node - 1]
        if node > 0 and state[node] == 1:
            return walk[walk.index(node):]
        for visited in walk:
            state[visited] = 2
    return []
