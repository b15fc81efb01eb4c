"""What the documentation names exists, and what exists is documented.

Read as text from README.md, docs/*.md and experiments/README.md (the commands in them are composed
by tests/test_docs_commands.py); a failure names the ``file:line`` and the name.

1. Entry points: every console script of pyproject.toml's ``[project.scripts]`` is named in
   README.md or docs/*.md, and in docs/cli.md (the page of the commands); every word that reads as
   a command, ``parser-<name>`` (also ``.venv/bin/parser-<name>``; not ``parser-0.1``,
   ``parser-train.log`` or ``outputs/parser-x``), is one of them, unless NOT_COMMANDS names it
   (each with the source file that holds the word).
2. Config groups: every folder under configs/ (``model/encoder``, ``tagger/objective``, ...) is
   named in README.md or docs/*.md as ``configs/<group>``, a word ``<group>/`` or an override
   ``<group>=`` (``+sweep=``; not for the tagger's and tokenizer's trees: ``tagger=`` is an option).
3. Files: every relative path whose first folder is one of the repository's (``parser/``,
   ``configs/``, ``docs/``, ``experiments/``, ``tests/``) exists; any other relative path exists
   relative to its page when it ends in a file suffix (SUFFIXES; ``dev/test`` is prose); every
   markdown link target exists relative to its page; every ``python -m parser...`` module exists.
   Not checked: placeholders (``<...>``, ``$RUNS/...``, ``...``, globs, ``{a,b}``), URLs, absolute
   paths, paths that leave the repository, what runs and installs create (PLACEHOLDER_ROOTS) and
   the files a page shows how to write (EXAMPLE_FILES).
4. Options in prose: an inline code span outside fenced blocks whose every word is ``key=value``
   (``keep_heads=given``, ``objective=entropy_fair``, ``data.test_split=null``) names a key some
   tool knows. A span does not say which tool (``seed=`` is parser-predict's and
   parser-evaluate's), so a key passes when any of these knows it: the ``OPTIONS`` of a key=value
   tool's parser.cli module; a dotted key of a trainer's schema (parser, tagger, tokenizer) or a
   key under one of its open nodes; an objective term's option (``objective.terms.<term>.<option>``,
   or the option alone: ``criterion=kl``); a config group, whose value (unless a placeholder) must
   be one of its options; a ``hydra.`` key. Not options: keys starting with a capital (CoNLL-U
   fields ``HeadProb=``, environment variables ``UD_ROOT=``), values in parentheses (Python,
   ``needs=("upos",)``) or after ``==`` (``torch==2.13.0``), and the grammar's own ``key=value``.
   docs/cli.md is not read for options (``key=``, misspelt keys on purpose), nor
   docs/config_migration.md for group values (old names on purpose).
5. ``parser-pipeline build`` commands (which tests/test_docs_commands.py does not read), in every
   page it reads, parse with the tool's ``OPTIONS``.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from parser.cli import pipeline as pipeline_cli
from parser.cli.shell import UsageError, parse_key_values
from parser.config import Config, config_dir, dotted_keys
from parser.objectives.registry import NEED_OPTIONS, TERM_OPTIONS, kinds
from parser.tagger.config import TaggerRunConfig, tagger_config_dir
from parser.tokenize.config import TokenizerRunConfig, tokenizer_config_dir
from tests.test_docs_commands import (
    _KEY_VALUE_OPTIONS,
    _OVERRIDE,
    _PLACEHOLDER,
    DOCS,
    HISTORICAL,
    REPO,
)

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "experiments" / "README.md"]
DOC_PAGES = [p for p in PAGES if p.parent != REPO / "experiments"]  # README.md and docs/*.md
CLI_PAGE = REPO / "docs" / "cli.md"

# Words that read as commands but are not, each with the file that holds the word.
NOT_COMMANDS = {"parser-checkpoint": "parser/runtime/checkpoint_file.py"}  # a checkpoint's header line
# Folders that runs, installs and `make data` create: paths under them are examples, not files.
PLACEHOLDER_ROOTS = {"outputs", "runs", "data", "multirun", ".venv", ".models", ".bench"}
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".json", ".toml", ".png", ".cfg", ".ini"}
# Files a page shows how to write (docs/objectives.md: adding an objective); their group option too.
EXAMPLE_FILES = {"configs/objective/expected_length.yaml"}

_COMMAND = re.compile(r"(?:(?<=bin/)|(?<![\w./$<>-]))parser(?:-[a-z][a-z0-9_]*)+(?![\w/-]|\.\w)")
_LINK = re.compile(r"\]\(([^()\s]+)\)")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
_WORD = re.compile(r"[^\s`'\"()\[\]|,;:=]+")
_MODULE = re.compile(r"(?<![\w.-])-m\s+(parser(?:\.[\w<>]+)+)")
_SPAN = re.compile(r"`([^`]+)`")
_OPTION = re.compile(r"^[+~]{0,2}(?P<key>[a-z_][\w.@/-]*)=(?!=)(?P<value>[^\s()]*)$")


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name


def _lines(paths: list[Path]) -> Iterator[tuple[str, int, str]]:
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield _name(path), number, line


def console_scripts() -> dict[str, str]:
    """``{script: "module:function"}`` of pyproject.toml's ``[project.scripts]`` (read as text:
    ``tomllib`` is Python 3.11+)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    section = re.search(r"^\[project\.scripts\]\n(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]+)"', section[1], re.MULTILINE))


def command_words(paths: list[Path]) -> list[tuple[str, str]]:
    """``(file:line, word)`` for every word of ``paths`` that reads as a command.

    >>> _COMMAND.findall("`parser-train x=1`, .venv/bin/parser-predict; parser-0.1 parser-train.log outputs/parser-x.")
    ['parser-train', 'parser-predict']
    """
    return [(f"{name}:{number}", m[0]) for name, number, line in _lines(paths) for m in _COMMAND.finditer(line)]


SCRIPTS = console_scripts()
COMMAND_WORDS = command_words(PAGES)
NAMED = {word for where, word in COMMAND_WORDS if not where.startswith("experiments/")}  # README, docs
ON_CLI_PAGE = {word for where, word in COMMAND_WORDS if where.startswith(f"{_name(CLI_PAGE)}:")}


def test_pyproject_declares_the_commands_the_documents_run():
    assert {"parser-train", "parser-predict", "parser-evaluate"} <= set(SCRIPTS), SCRIPTS
    assert len(COMMAND_WORDS) > 50


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_entry_point_is_documented(script):
    assert script in NAMED, f"entry point {script} (pyproject.toml) is named in no page of README.md, docs/*.md"
    assert script in ON_CLI_PAGE, f"entry point {script} (pyproject.toml) is missing from docs/cli.md, the page of the commands"


def test_every_documented_command_is_an_entry_point():
    unknown = [f"{where}: {word}" for where, word in COMMAND_WORDS if word not in SCRIPTS and word not in NOT_COMMANDS]
    assert not unknown, "no such entry point in pyproject.toml [project.scripts]:\n" + "\n".join(unknown)


@pytest.mark.parametrize("word", sorted(NOT_COMMANDS))
def test_every_word_that_is_not_a_command_is_where_it_is_said_to_be(word):
    assert word in (REPO / NOT_COMMANDS[word]).read_text(encoding="utf-8"), f"{word} not in {NOT_COMMANDS[word]}"


def config_folders() -> list[str]:
    """Every folder under configs/, as a path relative to it (``model/encoder``)."""
    root = REPO / "configs"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir())


@pytest.mark.parametrize("group", config_folders())
def test_every_config_group_is_documented(group):
    g = re.escape(group)
    forms = [rf"configs/{g}(?![\w.-])", rf"(?<![\w./-]){g}/(?![\w.<*{{$-])"]
    if REPO / "configs" / group not in (tagger_config_dir(), tokenizer_config_dir()):
        forms.append(rf"(?<![\w./-])[+~]{{0,2}}{g}=")  # a group, not a tree (`tagger=` is parser-predict's)
    named = re.compile("|".join(forms))
    places = [f"{name}:{number}" for name, number, line in _lines(DOC_PAGES) if named.search(line)]
    assert places, (f"config group configs/{group}/ is named in no page of README.md, docs/*.md "
                    f"(as configs/{group}, {group}/ or {group}=)")


def _is_placeholder(word: str) -> bool:
    return bool(re.search(r"[<>*{}$%@]|\.\.\.", word))


def path_problems(paths: list[Path]) -> list[str]:
    """``file:line: path`` for every path of ``paths`` that does not exist (rule 3 above)."""
    tops = {p.name for p in REPO.iterdir() if p.name not in PLACEHOLDER_ROOTS}
    problems = []
    for path in paths:
        name = _name(path)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = _URL.sub(" ", re.sub(r"<[^<>]*>", lambda m: m[0].replace(" ", "_"), line))
            for target in _LINK.findall(line):
                target = target.split("#")[0]
                if target and not _is_placeholder(target) and not (path.parent / target).exists():
                    problems.append(f"{name}:{number}: link {target}")
            for module in _MODULE.findall(line):
                parts = list(itertools.takewhile(lambda p: not _is_placeholder(p), module.split(".")))
                base = REPO.joinpath(*parts)
                if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
                    problems.append(f"{name}:{number}: module {module}")
            for word in _WORD.findall(_LINK.sub("]", line)):
                word = re.sub(r"(?<=[^./])\.+$", "", word)  # a sentence's full stop
                first = word.split("/")[0]
                if "/" not in word or word.startswith(("/", "~")) or _is_placeholder(word) or first in PLACEHOLDER_ROOTS:
                    continue
                if first in tops:
                    exists = (REPO / word).exists()
                else:
                    target = (path.parent / word).resolve()
                    if not target.is_relative_to(REPO) or Path(word).suffix not in SUFFIXES:
                        continue
                    exists = target.exists()
                if not exists and word not in EXAMPLE_FILES:
                    problems.append(f"{name}:{number}: {word}")
    return problems


def test_every_documented_file_exists():
    problems = path_problems(PAGES)
    assert not problems, "no such file or folder in the repository:\n" + "\n".join(problems)


def config_group_options() -> dict[str, set[str]]:
    """``{group: its options}`` over the three config trees (parser, tagger, tokenizer), a group
    of several trees (``data``, ``objective``) with the options of each."""
    trees = [config_dir(), tagger_config_dir(), tokenizer_config_dir()]
    groups: dict[str, set[str]] = {}
    for root in trees:
        for folder in sorted(p for p in root.rglob("*") if p.is_dir()):
            if not any(tree != root and tree.is_relative_to(root) and folder.is_relative_to(tree) for tree in trees):
                options = groups.setdefault(folder.relative_to(root).as_posix(), set())
                options.update(p.stem for p in folder.glob("*.yaml"))
    return groups


class KnownKeys:
    """Every key a tool knows (rule 4 above)."""

    def __init__(self) -> None:
        self.groups = config_group_options()
        self.tool_options = set(pipeline_cli.OPTIONS).union(*_KEY_VALUE_OPTIONS.values())
        self.term_options = set(TERM_OPTIONS).union(*(kind.option_names for kind in kinds()),
                                                    *NEED_OPTIONS.values())
        self.schema_keys: set[str] = set()
        self.open_nodes: set[str] = set()
        for schema in (Config, TaggerRunConfig, TokenizerRunConfig):
            cfg = OmegaConf.structured(schema)
            for key in dotted_keys(cfg):
                self.schema_keys.add(key)
                node = OmegaConf.select(cfg, key)
                if isinstance(node, DictConfig) and OmegaConf.get_type(node) is dict:
                    self.open_nodes.add(key)

    def knows(self, key: str) -> bool:
        if key.startswith("objective.terms."):  # the parser's terms: each option is its kind's
            parts = key.split(".")
            return len(parts) == 3 or (len(parts) == 4 and parts[3] in self.term_options)
        return (key in self.groups or key in self.tool_options or key in self.term_options
                or key in self.schema_keys or key.startswith("hydra.")
                or any(key.startswith(f"{node}.") for node in self.open_nodes if node != "objective.terms"))

    def bad_values(self, group: str, value: str) -> list[str]:
        """The options ``value`` names (``a``, ``[a,b]``, ``ge_alone*``) that ``group`` lacks."""
        examples = {Path(f).stem for f in EXAMPLE_FILES if Path(f).parent == Path("configs", group)}
        options = self.groups[group] | examples | {"null"}
        items = value.strip("'\"")
        items = items[1:-1].split(",") if items.startswith("[") and items.endswith("]") else [items]
        bad = []
        for item in filter(None, items):
            if "*" in item:
                bad += [] if fnmatch.filter(options, item) else [item]
            elif not _PLACEHOLDER.search(item) and item not in options:
                bad.append(item)
        return bad


def prose_options(paths: list[Path]) -> list[tuple[str, str, str]]:
    """``(file:line, key, value)`` of every inline code span outside fenced blocks whose every word
    is ``key=value``.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.md").write_text(
    ...     "`seed=1 kbest=5`, `HeadProb=1.0`, `needs=(1,)`, `parser-predict x=1`, `a == b`\\n```\\n`x=1`\\n```\\n")
    >>> [(where.split(":")[1], key, value) for where, key, value in prose_options([d / "a.md"])]
    [('1', 'seed', '1'), ('1', 'kbest', '5')]
    """
    found = []
    for path in paths:
        fenced = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            if fenced or line.lstrip().startswith("```"):
                continue
            for span in _SPAN.findall(line):
                matches = [_OPTION.match(word) for word in span.split()]
                if matches and all(matches) and matches[0]["key"] != "key":  # not `key=value` itself
                    found += [(f"{_name(path)}:{number}", m["key"].lstrip("+~").split("@")[0], m["value"]) for m in matches]
    return found


PROSE_OPTIONS = prose_options([p for p in PAGES if p != CLI_PAGE])


@pytest.fixture(scope="module")
def known_keys() -> KnownKeys:
    return KnownKeys()


def test_the_documents_name_options_in_prose():
    keys = {key for _, key, _ in PROSE_OPTIONS}
    assert {"keep_heads", "confidence", "objective", "data.root"} <= keys, keys


def test_every_option_named_in_prose_is_known(known_keys):
    problems = [f"{where}: {key}=: no tool knows it (key=value tools' OPTIONS, the trainers' schemas, "
                "objective term options, config groups)"
                for where, key, _ in PROSE_OPTIONS if not known_keys.knows(key)]
    problems += [f"{where}: {key}={value}: no option {options} in configs/{key}/"
                 for where, key, value in PROSE_OPTIONS
                 if key in known_keys.groups and where.split(":")[0] not in HISTORICAL
                 and (options := known_keys.bad_values(key, value))]
    assert not problems, "\n".join(problems)


def pipeline_commands(paths: list[Path]) -> list[tuple[str, list[str]]]:
    """``(file:line, words)`` of every ``parser-pipeline build`` command, continued lines joined."""
    found = []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            match = re.search(r"(?<![\w./-])parser-pipeline\s+build\b(.*)", line)
            if match is None:
                continue
            text, last = match[1], number
            while text.rstrip().endswith("\\") and last + 1 < len(lines):
                last += 1
                text = text.rstrip()[:-1] + " " + re.sub(r"^\s*#", "", lines[last])
            words = re.split(r"`|\s#|\s\||;|&&", text)[0].split()
            words = list(itertools.takewhile(lambda w: _OVERRIDE.match(w) or w == "...", words))
            found.append((f"{_name(path)}:{number + 1}", [w for w in words if w != "..."]))
    return found


PIPELINE_COMMANDS = pipeline_commands(DOCS)


@pytest.mark.parametrize("where, words", PIPELINE_COMMANDS or [("none", [])], ids=[w for w, _ in PIPELINE_COMMANDS] or ["none"])
def test_every_documented_pipeline_build_command_parses(where, words):
    words = [f"{m['key']}=placeholder" if (m := _OVERRIDE.match(w)) and _PLACEHOLDER.search(m["value"]) else w
             for w in words]
    try:
        parse_key_values(words, defaults=pipeline_cli.OPTIONS, prog="parser-pipeline")
    except UsageError as error:
        pytest.fail(f"{where}: {error}")
