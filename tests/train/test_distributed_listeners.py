"""Distributed runs open no listener outside loopback, and ranks accept no pickled object.

The first single-machine command of docs/scaling.md is started as written (its torchrun options
and environment; a tiny run instead of the quickstart's overrides) while ``ss -ltnp`` is polled:
every listening socket of the run's processes must be on a loopback address, and the run must
have shown at least one (the ranks' store), so the test sees what it checks.
"""

from __future__ import annotations

import ipaddress
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from parser.train.rank_messages import CHECKPOINT
from parser.train.rank_store import LOOPBACK_COMMAND, _loopback_address, loopback_store
from tests.train.helpers import QUIET, TINY_DATA, TINY_MODEL

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "scaling.md"
# torch.distributed's collectives that pickle what they receive.
OBJECT_COLLECTIVES = re.compile(
    r"\b(all_gather_object|gather_object|broadcast_object(?:_list)?|scatter_object_list|"
    r"send_object_list|recv_object_list)\b"
)
_LISTENER = re.compile(r"^LISTEN\s+\d+\s+\d+\s+(?P<local>\S+)\s+\S+.*?pid=(?P<pid>\d+)", re.MULTILINE)


def documented_single_machine_command() -> tuple[dict[str, str], list[str]]:
    """(environment, torchrun options) of the docs' first torchrun command, up to ``-m``."""
    text = DOCS.read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if "torchrun" in line and "--nnodes=1" in line)
    words = shlex.split(line)
    at = next(i for i, w in enumerate(words) if w.endswith("torchrun"))
    env = dict(w.split("=", 1) for w in words[:at])
    options = words[at + 1 : words.index("-m")]
    return env, options


def _address(local: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``127.0.0.1:5``, ``[::1]:5``, ``*:5``, ``0.0.0.0%lo:5`` -> the address (None: ``*``)."""
    host = local.rsplit(":", 1)[0].strip("[]").split("%")[0]
    return None if host == "*" else ipaddress.ip_address(host)


def _tree(root: int) -> set[int]:
    """``root`` and its descendants (torchrun starts its workers in sessions of their own)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grown = bool(more)
    return found


def test_the_documented_command_is_as_expected():
    env, options = documented_single_machine_command()
    assert env == {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    assert {"--rdzv-backend=c10d", "--rdzv-conf=store_type=file", "--local-addr=127.0.0.1"} <= set(options)


@pytest.mark.skipif(shutil.which("ss") is None, reason="the platform has no ss")
def test_a_documented_two_process_run_listens_on_loopback_only(tmp_path):
    env, options = documented_single_machine_command()
    torchrun = Path(sys.executable).parent / "torchrun"
    overrides = [*TINY_DATA, *TINY_MODEL, *QUIET, "trainer.max_steps=8", "trainer.eval_every=4",
                 "trainer.final_eval=false", "trainer.num_threads=1", f"hydra.run.dir={tmp_path / 'run'}"]
    command = [str(torchrun), *options, "-m", "parser.cli.train", *overrides]
    # TMPDIR: the rendezvous file torchrun leaves behind lands in tmp_path
    environment = {**os.environ, **env, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT"):
        environment.pop(name, None)
    run = subprocess.Popen(command, cwd=REPO, env=environment, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 600
        while run.poll() is None and time.monotonic() < deadline:
            listing = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=False).stdout
            tree = _tree(run.pid)
            seen.update(f"{m['local']} pid={m['pid']}" for m in _LISTENER.finditer(listing)
                        if int(m["pid"]) in tree)
            time.sleep(0.05)
    finally:
        if run.poll() is None:
            for pid in _tree(run.pid):
                os.kill(pid, 9)
        output = run.communicate()[0]
    assert run.returncode == 0, output[-3000:]
    assert seen, f"no listener of the run was seen (it may have been too quick)\n{output[-2000:]}"
    outside = sorted(s for s in seen if (a := _address(s.split()[0])) is None or not a.is_loopback)
    assert not outside, f"listeners outside loopback: {outside}"


def test_no_object_collective_remains_in_the_trainer():
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in sorted((REPO / "parser" / "train").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if OBJECT_COLLECTIVES.search(line)]
    assert not found, found


class _Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_the_resumed_checkpoint_is_read_without_arbitrary_objects():
    """The one nested object that crosses between ranks (the checkpoint being resumed) is read
    with weights_only=True: a pickled callable is refused, tensors and plain values come back."""
    state = {"model": {"w": torch.arange(3.0)}, "config": {"a": [1, "b", None]}, "step": 4}
    back = CHECKPOINT.decode(CHECKPOINT.encode(state))
    assert back["config"] == state["config"] and back["step"] == 4
    assert torch.equal(back["model"]["w"], state["model"]["w"])
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        CHECKPOINT.decode(pickle.dumps({"x": _Payload()}))


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                                ("192.0.2.1", False), ("no-such-host.invalid", False)])
def test_only_loopback_master_addresses_get_the_loopback_store(host, loopback):
    assert (_loopback_address(host) is not None) == loopback


@pytest.mark.parametrize(("local_world", "warned"), [("2", True), ("1", False)])
def test_torchruns_own_store_on_one_machine_is_named(monkeypatch, caplog, local_world, warned):
    """Started otherwise (e.g. --standalone), torchrun's store serves the ranks: nothing to bind
    here, and on one machine the run says how to start it on loopback."""
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world)
    monkeypatch.setenv("MASTER_PORT", "29500")
    with caplog.at_level("WARNING", logger="parser.train.rank_store"):
        assert loopback_store(rank=0, world_size=2) is None
    assert ("listens on every interface" in caplog.text) == warned
    if warned:
        assert LOOPBACK_COMMAND.split(" torchrun")[0] in caplog.text


def test_another_master_address_keeps_torchs_store(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setenv("MASTER_ADDR", "192.0.2.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert loopback_store(rank=0, world_size=2) is None
    assert "GLOO_SOCKET_IFNAME" not in os.environ
