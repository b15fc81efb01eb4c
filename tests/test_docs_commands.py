"""Every command the documentation shows is one the tools accept.

The commands are read from README.md, docs/*.md, experiments/README.md and
experiments/results/*.md: every ``parser-train`` (also ``python -m parser.cli.train``, ``torchrun
... -m parser.cli.train``) and ``parser-train-tagger`` command is composed with Hydra's compose API
from the configs the tool reads (``parser-train``'s also passes ``check_known_keys``, as at the
start of a run); every ``parser-evaluate`` / ``parser-predict`` / ``parser-calibrate`` command is
read by that tool's parser (Hydra's override grammar over ``OPTIONS`` of its ``parser.cli``
module). A module that is no longer an entry point (``python -m parser.train``) fails. A failure
names the file and line.

Placeholders, as in tests/train/resolved_configs.py: ``{a,b}`` and multirun values ``a,b`` expand
to one command each; a placeholder value (``<seed>``, ``$RUNS/...``, ``...``) of a config group
(``data=<tb>``, ``experiment=<family>``, ``objective=<arm>``) stands for every option of that group
(each composed at least once); of any other key, the value is left out and the key must exist.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from parser.cli import calibrate as calibrate_cli
from parser.cli import draw as draw_cli
from parser.cli import evaluate as evaluate_cli
from parser.cli import predict as predict_cli
from parser.cli import release as release_cli
from parser.cli import select as select_cli
from parser.cli import serve as serve_cli
from parser.cli import train_pipeline as train_pipeline_cli
from parser.cli import vectors as vectors_cli
from parser.cli.shell import UsageError, parse_key_values
from parser.config import check_known_keys, config_dir, register_configs
from parser.tagger.config import register_tagger_configs, tagger_config_dir
from parser.tokenize.config import register_tokenizer_configs, tokenizer_config_dir
from tests.train.resolved_configs import _expand

REPO = Path(__file__).resolve().parents[1]
# docs/cli.md shows misspelt commands and their errors, on purpose (tests/test_cli_grammar.py runs them).
DOCS = sorted(
    [REPO / "README.md", *(p for p in (REPO / "docs").glob("*.md") if p.name != "cli.md"),
     REPO / "experiments" / "README.md", *(REPO / "experiments" / "results").glob("*.md")]
)
# Names the old entry points in prose, on purpose (it maps old commands to new ones).
HISTORICAL = {"docs/config_migration.md"}

TRAIN, TAGGER, EVALUATE, PREDICT, STALE = "parser-train", "parser-train-tagger", "parser-evaluate", "parser-predict", "stale"
CALIBRATE, TOKENIZER = "parser-calibrate", "parser-train-tokenizer"
TRAIN_PIPELINE, RELEASE, SELECT = "parser-train-pipeline", "parser-release", "parser-select"
DRAW, VECTORS, SERVE = "parser-draw", "parser-vectors", "parser-serve"
_MODULES = {"parser.cli.train": TRAIN, "parser.cli.train_tagger": TAGGER,
            "parser.cli.evaluate": EVALUATE, "parser.cli.predict": PREDICT,
            "parser.cli.calibrate": CALIBRATE, "parser.cli.train_tokenizer": TOKENIZER,
            "parser.cli.train_pipeline": TRAIN_PIPELINE, "parser.cli.release": RELEASE,
            "parser.cli.select": SELECT, "parser.cli.draw": DRAW, "parser.cli.vectors": VECTORS,
            "parser.cli.serve": SERVE}
_OLD_MODULES = ("parser.train", "parser.tagger.train", "parser.evaluate", "parser.predict")
_TOOL = re.compile(
    r"(?<![\w.-])(?:(?P<script>parser-train-tagger|parser-train-tokenizer|parser-train-pipeline|parser-train"
    r"|parser-evaluate|parser-predict|parser-calibrate|parser-release|parser-select|parser-draw|parser-vectors)"
    r"|-m\s+(?P<module>parser(?:\.\w+)+))(?![\w-])"
)
_OVERRIDE = re.compile(r"^(?P<key>[+~]{0,2}[A-Za-z_][\w.@/-]*)=(?P<value>.*)$")
_PLACEHOLDER = re.compile(r"<[^<>]*>|\$|\.\.\.")


@dataclass(frozen=True)
class Command:
    where: str  # file:line
    tool: str
    words: tuple[str, ...]  # what follows the tool's name, up to the first word that is not an argument


def documented_commands(paths: Iterable[Path]) -> list[Command]:
    """The commands in the markdown ``paths``, backslash-continued lines joined (a continued
    comment's ``#`` dropped), each cut at a closing backtick, ``#``, ``|``, ``;`` or ``&&``.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.md").write_text(
    ...     "x\\n    # e.g. env A=1 parser-train -m data=<tb> \\\\\\n    #   trainer.seed=1,2 # two\\n"
    ...     "then `parser-evaluate gold=g pred=<run dir>/p` and `python -m parser.train x=1`.")
    >>> for c in documented_commands([d / "a.md"]): print(c.where, c.tool, c.words)
    a.md:2 parser-train ('-m', 'data=<tb>', 'trainer.seed=1,2')
    a.md:4 parser-evaluate ('gold=g', 'pred=<run_dir>/p')
    a.md:4 stale ('x=1',)
    """
    found = []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
        number = 0
        while number < len(lines):
            start, text = number, lines[number]
            while text.rstrip().endswith("\\") and number + 1 < len(lines):
                number += 1
                text = text.rstrip()[:-1] + " " + re.sub(r"^\s*#", "", lines[number])
            number += 1
            text = re.sub(r"<[^<>]*>", lambda m: m.group(0).replace(" ", "_"), text)
            for match in _TOOL.finditer(text):
                module = match["module"]
                tool = match["script"] or _MODULES.get(module) or (STALE if module in _OLD_MODULES else None)
                if tool is None:
                    continue  # another module (python -m parser.eval.summary, ...): not an entry point
                rest = re.split(r"`|\s#|\s\||;|&&", text[match.end():])[0]
                words = [w.rstrip(",;)") for w in rest.split()]
                words = list(itertools.takewhile(lambda w: w in ("-m", "--multirun", "...") or _OVERRIDE.match(w), words))
                found.append(Command(f"{name}:{start + 1}", tool, tuple(w for w in words if w != "...")))
    return found


COMMANDS = documented_commands(DOCS)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value


def override_sets(words: Sequence[str], groups: dict[str, list[str]]) -> tuple[list[list[str]], list[str]]:
    """``(override lists to compose, keys whose placeholder value was left out)``.

    >>> sets, keys = override_sets(["-m", "data=<tb>", "trainer.seed=1,2", "x.y=$RUNS/a"], {"data": ["a", "b"]})
    >>> sets, keys
    ([['data=a', 'trainer.seed=1'], ['data=a', 'trainer.seed=2'], ['data=b', 'trainer.seed=1'], ['data=b', 'trainer.seed=2']], ['x.y'])
    """
    slots, placeholders, unchecked = [], [], []  # slots: an override, or the index of a placeholder
    for word in words:
        if word in ("-m", "--multirun"):
            continue
        match = _OVERRIDE.match(word)
        key, value = match["key"], _unquote(match["value"])
        group = key.lstrip("+~")
        if not _PLACEHOLDER.search(value):
            slots.append(f"{key}={value}")
        elif group in groups:
            slots.append(len(placeholders))
            placeholders.append([f"{key}={option}" for option in _matching(value, groups[group])])
        else:
            unchecked.append(group)
    # Each option of each placeholder group composed once (not every combination of them).
    rounds = max((len(options) for options in placeholders), default=1)
    sets = []
    for i in range(rounds):
        cover = [slot if isinstance(slot, str) else placeholders[slot][i % len(placeholders[slot])] for slot in slots]
        sets += _expand(cover)
    return sets, unchecked


def _matching(value: str, options: list[str]) -> list[str]:
    """The options of a group that a placeholder value stands for (``ssl_<arm>``: those starting
    ``ssl_``); none: the value itself, so that composing it fails and says why.

    >>> _matching("ssl_<arm>", ["ge", "ssl_a", "ssl_b"]), _matching("old_<arm>", ["ge"])
    (['ssl_a', 'ssl_b'], ['old_<arm>'])
    """
    pattern = "".join(".+" if _PLACEHOLDER.fullmatch(part) else re.escape(part)
                      for part in re.split(f"({_PLACEHOLDER.pattern})", value) if part)
    return [option for option in options if re.fullmatch(pattern, option)] or [value]


def config_groups(root: Path) -> dict[str, list[str]]:
    return {group.name: sorted(p.stem for p in group.glob("*.yaml")) for group in sorted(root.iterdir()) if group.is_dir()}


def _has_key(cfg: DictConfig, dotted: str) -> bool:
    *parents, last = dotted.split(".")
    node = OmegaConf.select(cfg, ".".join(parents)) if parents else cfg
    return isinstance(node, DictConfig) and last in list(node.keys())  # `in node` is False for ???


class Composer:
    """Hydra's compose API over one config tree, each override list composed once."""

    def __init__(self, root: Path, config_name: str) -> None:
        self.root, self.config_name, self.groups = root, config_name, config_groups(root)
        self.cache: dict[tuple[str, ...], DictConfig] = {}

    def compose(self, overrides: list[str]) -> DictConfig:
        key = tuple(overrides)
        if key not in self.cache:
            GlobalHydra.instance().clear()
            with initialize_config_dir(config_dir=str(self.root), version_base="1.3"):
                self.cache[key] = compose(self.config_name, overrides=list(overrides), return_hydra_config=True)
        return self.cache[key]


@pytest.fixture(scope="module")
def composers():
    register_configs()
    register_tagger_configs()
    register_tokenizer_configs()
    yield {TRAIN: Composer(config_dir(), "config"), TAGGER: Composer(tagger_config_dir(), "tagger"),
           TOKENIZER: Composer(tokenizer_config_dir(), "tokenizer")}
    GlobalHydra.instance().clear()


def _ids(commands: Sequence[Command]) -> list[str]:
    return [f"{c.where} {c.tool} {' '.join(c.words)}"[:120] for c in commands]


HYDRA_COMMANDS = [c for c in COMMANDS if c.tool in (TRAIN, TAGGER, TOKENIZER)]
_KEY_VALUE_OPTIONS = {EVALUATE: evaluate_cli.OPTIONS, PREDICT: predict_cli.OPTIONS,
                      CALIBRATE: calibrate_cli.OPTIONS, TRAIN_PIPELINE: train_pipeline_cli.OPTIONS,
                      RELEASE: release_cli.OPTIONS, SELECT: select_cli.OPTIONS,
                      DRAW: draw_cli.OPTIONS, VECTORS: vectors_cli.OPTIONS,
                      SERVE: serve_cli.OPTIONS}
KEY_VALUE_COMMANDS = [c for c in COMMANDS if c.tool in _KEY_VALUE_OPTIONS]


def test_the_documents_show_commands_of_every_tool():
    tools = {c.tool for c in COMMANDS}
    assert {TRAIN, TAGGER, EVALUATE, PREDICT} <= tools
    places = {c.where.split(":")[0] for c in HYDRA_COMMANDS if c.words}
    assert {"README.md", "docs/scaling.md", "experiments/README.md"} <= places
    assert len([c for c in HYDRA_COMMANDS if c.words]) >= 50


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.tool == STALE] or [None], ids=_ids([c for c in COMMANDS if c.tool == STALE]) or ["none"])
def test_no_document_runs_a_module_that_is_no_longer_an_entry_point(command):
    if command is not None and command.where.split(":")[0] not in HISTORICAL:
        pytest.fail(f"{command.where}: `-m` of an old module; the entry points are {', '.join(_MODULES)} "
                    "(parser-train, parser-train-tagger, parser-evaluate, parser-predict)")


@pytest.mark.parametrize("command", HYDRA_COMMANDS, ids=_ids(HYDRA_COMMANDS))
def test_every_documented_training_command_composes(command, composers):
    composer = composers[command.tool]
    sets, unchecked = override_sets(command.words, composer.groups)
    for overrides in sets:
        try:
            cfg = composer.compose(overrides)
            if command.tool == TRAIN:
                check_known_keys(cfg)
        except Exception as error:  # noqa: BLE001 - any failure to compose is the finding
            pytest.fail(f"{command.where}: {command.tool} {' '.join(overrides)} does not compose: "
                        f"{type(error).__name__}: {error}")
        unknown = [key for key in unchecked if not _has_key(cfg, key)]
        assert not unknown, f"{command.where}: {command.tool} has no option {unknown}"


@pytest.mark.parametrize("command", KEY_VALUE_COMMANDS, ids=_ids(KEY_VALUE_COMMANDS))
def test_every_documented_evaluate_and_predict_command_parses(command):
    """Read by the tool's own parser (Hydra's override grammar over its ``OPTIONS``); a
    placeholder value (``<run>/checkpoints/best.pt``) stands for a plain word."""
    words = [f"{match['key']}=placeholder" if (match := _OVERRIDE.match(w)) and _PLACEHOLDER.search(match["value"])
             else w for w in command.words]
    try:
        parse_key_values(words, defaults=_KEY_VALUE_OPTIONS[command.tool], prog=command.tool)
    except UsageError as error:
        pytest.fail(f"{command.where}: {error}")
