"""Load benchmark of ``parser-serve`` on loopback: one server process (one worker thread, pinned
to one core with ``taskset`` where available), a 20-word sentence through ``/process``.

1. one client, requests one after another: latency p50 / p99;
2. 16 concurrent clients: words/s and p99, beside ``parser-predict`` on the same core in the
   same run (the same sentences, one tokenised sentence per line, the whole process timed);
3. 200 clients at once, one request each: every request answered 200 or 503 within its
   deadline, none lost, none given another request's sentence;
4. a soak at half the load of 2 for ``--soak-seconds`` (default 600): no error, the server's
   RSS at the start and the end.

    python experiments/bench_serve.py --pipeline runs/en/en.pipeline --out experiments/results/serve.md
    python experiments/bench_serve.py --pipeline tests/fixtures/pre_layers/tiny.pipeline \\
        --soak-seconds 30 --out $RUNS/serve.md         # a quick check that it runs

Bounded: every phase has a count and a time limit; only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

SENTENCE = ("The committee said on Tuesday that the rules would apply to every company "
            "that sells food in the city .")  # 20 words
assert len(SENTENCE.split()) == 20


def _pin(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if shutil.which("taskset") else []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _sentence(tag: str) -> str:
    words = SENTENCE.split()
    words[1] = tag  # each request its own sentence: answers can be checked against requests
    return " ".join(words)


def _words(result: str) -> list[str]:
    return [line.split("\t")[1] for line in result.split("\n")
            if line and not line.startswith("#") and line.split("\t")[0].isdigit()]


async def _ask(client: httpx.AsyncClient, tag: str, *, timeout: float) -> tuple[int, float, bool]:
    """(status, seconds, the answer is this request's sentence)."""
    text = _sentence(tag)
    start = time.perf_counter()
    answer = await client.post("/process", data={"data": text, "input": "horizontal",
                                                 "tagger": "", "parser": ""}, timeout=timeout)
    seconds = time.perf_counter() - start
    own = answer.status_code != 200 or _words(answer.json()["result"]) == text.split()
    return answer.status_code, seconds, own


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _phases(base: str, args, pid: int) -> dict:
    out: dict = {}
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    async with httpx.AsyncClient(base_url=base, limits=limits) as client:
        if args.soak_only:  # warmed up as phases 1-3 warm it (not reported), then the soak
            for i in range(200):
                await _ask(client, f"w{i}", timeout=args.deadline)
            await asyncio.gather(*(_ask(client, f"b{c}", timeout=args.deadline + 5)
                                   for c in range(200)), return_exceptions=True)
            out["sixteen"] = {"words_per_s": 40 * args.soak_rate}  # the soak's rate, as given
            out["soak"] = await _soak(client, args, pid, out)
            return out
        # 1. one client
        times = []
        for i in range(args.single):
            status, seconds, own = await _ask(client, f"s{i}", timeout=args.deadline)
            assert status == 200 and own, (status, own)
            times.append(seconds)
        out["single"] = {"n": len(times), "p50": _pct(times, 0.5), "p99": _pct(times, 0.99)}

        # 2. sixteen clients for --load-seconds
        async def loop(c: int, stop: float, results: list) -> None:
            i = 0
            while time.perf_counter() < stop:
                results.append(await _ask(client, f"c{c}x{i}", timeout=args.deadline))
                i += 1
        results: list = []
        start = time.perf_counter()
        await asyncio.gather(*(loop(c, start + args.load_seconds, results) for c in range(16)))
        elapsed = time.perf_counter() - start
        ok = [r for r in results if r[0] == 200]
        out["sixteen"] = {"n": len(results), "ok": len(ok), "own": all(r[2] for r in results),
                          "words_per_s": 20 * len(ok) / elapsed,
                          "p50": _pct([r[1] for r in ok], 0.5), "p99": _pct([r[1] for r in ok], 0.99)}

        # 3. two hundred clients at once
        burst = await asyncio.gather(*(_ask(client, f"b{c}", timeout=args.deadline + 5)
                                       for c in range(200)), return_exceptions=True)
        lost = [b for b in burst if isinstance(b, BaseException)]
        answered = [b for b in burst if not isinstance(b, BaseException)]
        out["burst"] = {"n": 200, "lost": len(lost),
                        "ok": sum(b[0] == 200 for b in answered),
                        "busy": sum(b[0] == 503 for b in answered),
                        "other": sum(b[0] not in (200, 503) for b in answered),
                        "mixed": sum(not b[2] for b in answered),
                        "slowest": max((b[1] for b in answered), default=float("nan"))}

        out["soak"] = await _soak(client, args, pid, out)
    return out


async def _soak(client: httpx.AsyncClient, args, pid: int, out: dict) -> dict:
    # 4. soak at half the load of 2: 16 clients, each sending on its own schedule (a request
    # every 16 / rate seconds, the next one as soon as an answer comes late), so that the
    # load stays what it is asked to be, whatever the client machine's speed
    rate = max(1.0, out["sixteen"]["words_per_s"] / 20 / 2)  # requests per second
    period, statuses, rss = 16 / rate, {}, [(0.0, _rss_mb(pid))]
    start = time.perf_counter()
    stop = start + args.soak_seconds

    async def paced(c: int) -> None:
        i, due = 0, start + c * period / 16
        while due < stop:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            try:
                status, _, own = await _ask(client, f"k{c}x{i}", timeout=args.deadline)
            except httpx.HTTPError as error:
                status, own = type(error).__name__, True
            key = status if own else "mixed"
            statuses[key] = statuses.get(key, 0) + 1
            i, due = i + 1, due + period

    async def sample() -> None:
        while time.perf_counter() < stop:
            await asyncio.sleep(min(30.0, max(0.0, stop - time.perf_counter())))
            rss.append((time.perf_counter() - start, _rss_mb(pid)))

    await asyncio.gather(sample(), *(paced(c) for c in range(16)))
    sent = sum(statuses.values())
    return {"seconds": args.soak_seconds, "rate": rate, "sent": sent,
            "achieved": sent / (time.perf_counter() - start),
            "errors": sent - statuses.get(200, 0), "statuses": statuses,
            "rss": rss, "rss_start_mb": rss[0][1], "rss_end_mb": _rss_mb(pid)}


def _predict_baseline(args, folder: Path) -> dict:
    """``parser-predict`` on the same core: the sentence ``--baseline-sentences`` times."""
    text = folder / "in.txt"
    text.write_text("".join(_sentence(f"p{i}") + "\n" for i in range(args.baseline_sentences)),
                    encoding="utf-8")
    command = [*_pin(args.core), sys.executable, "-m", "parser.cli.predict",
               f"pipeline={args.pipeline}", f"input={text}", "format=text",
               f"output={folder / 'out.conllu'}", "device=cpu"]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=600,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - start
    return {"sentences": args.baseline_sentences, "seconds": seconds,
            "words_per_s": 20 * args.baseline_sentences / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipeline", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--core", type=int, default=1)
    parser.add_argument("--single", type=int, default=200, help="requests of phase 1")
    parser.add_argument("--load-seconds", type=float, default=30)
    parser.add_argument("--soak-seconds", type=float, default=600)
    parser.add_argument("--deadline", type=float, default=60)
    parser.add_argument("--queue-size", type=int, default=64)
    parser.add_argument("--baseline-sentences", type=int, default=5000)
    parser.add_argument("--soak-only", action="store_true",
                        help="phase 4 alone, at --soak-rate requests/s (a rerun of the soak)")
    parser.add_argument("--soak-rate", type=float, default=None)
    args = parser.parse_args()
    if args.soak_only and not args.soak_rate:
        parser.error("--soak-only needs --soak-rate")
    port = _free_port()
    command = [*_pin(args.core), sys.executable, "-m", "parser.cli.serve",
               f"models={args.pipeline}", "host=127.0.0.1", f"port={port}",
               f"deadline={args.deadline:g}", f"queue_size={args.queue_size}"]
    server = subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # the models load: up to 60 s
            try:
                if httpx.get(f"{base}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise SystemExit("parser-serve did not start within 60 s")
        results = asyncio.run(_phases(base, args, server.pid))
        if not args.soak_only:
            with tempfile.TemporaryDirectory() as folder:
                results["predict"] = _predict_baseline(args, Path(folder))
    finally:
        server.terminate()  # SIGTERM: what is in flight is finished
        server.wait(timeout=args.deadline + 10)
    _write(args, results, " ".join(command))
    print(args.out.read_text(encoding="utf-8"))


def _shown(text: str) -> str:
    """``text`` with this machine's paths written as a reader runs them: the interpreter as
    ``python``, ``$RUNS`` for the run folder (when set), the repository root as ``.``."""
    text = text.replace(sys.executable, "python")
    if os.environ.get("RUNS"):
        text = text.replace(os.environ["RUNS"].rstrip("/"), "$RUNS")
    return text.replace(str(Path(__file__).resolve().parent.parent) + "/", "")


def _write(args, r: dict, command: str) -> None:
    k = r["soak"]
    soak = [
        (f"| soak, {k['seconds']:g} s at {k['rate']:.1f} requests/s asked ({k['achieved']:.1f} "
         f"sent) | {k['sent']} answered, {k['errors']} not 200 ({k['statuses']}); RSS "
         f"{k['rss_start_mb']:.0f} -> {k['rss_end_mb']:.0f} MB "
         f"({100 * (k['rss_end_mb'] / k['rss_start_mb'] - 1):+.1f}%) |"),
        "", "RSS of the server during the soak (seconds: MB): "
        + ", ".join(f"{t:.0f}: {m:.0f}" for t, m in k["rss"]) + ".",
    ]
    head = [
        "# parser-serve under load (loopback)", "",
        _shown(f"Command: `python {' '.join(sys.argv)}`; server: `{command}`; machine: "
               f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
               f"pipeline {args.pipeline}; a 20-word sentence per request."), "",
        "| phase | result |", "| --- | --- |",
    ]
    if args.soak_only:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(head + soak) + "\n", encoding="utf-8")
        return
    s, m, b, p = r["single"], r["sixteen"], r["burst"], r["predict"]
    lines = head + [
        f"| 1 client, {s['n']} requests | p50 {1000 * s['p50']:.1f} ms, p99 {1000 * s['p99']:.1f} ms |",
        (f"| 16 clients, {args.load_seconds:g} s | {m['words_per_s']:.0f} words/s "
         f"({m['ok']} of {m['n']} answered 200, own sentences: {m['own']}), p50 "
         f"{1000 * m['p50']:.1f} ms, p99 {1000 * m['p99']:.1f} ms |"),
        (f"| parser-predict, same core, whole process | {p['words_per_s']:.0f} words/s "
         f"({p['sentences']} sentences in {p['seconds']:.1f} s) |"),
        (f"| 200 clients at once | {b['ok']} answered 200, {b['busy']} 503, {b['other']} other, "
         f"{b['lost']} lost, {b['mixed']} mixed; slowest {b['slowest']:.1f} s (deadline "
         f"{args.deadline:g} s) |"),
    ] + soak
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
