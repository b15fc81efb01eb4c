"""Training throughput (sentences/s) of the real trainer with 1 and 2 DDP processes (gloo, CPU).

Each setting is one ``torchrun`` launch of this script in ``--worker`` mode: the trainer of
``experiment=quickstart`` (a small biaffine parser on EWT, ``data.tokens_per_batch`` = the
*global* batch, split across ranks) runs ``--warmup`` untimed steps, then ``--steps`` timed
ones between barriers; dev evaluation and checkpoints are switched off for the measurement.
Every process gets one intra-op thread (``OMP_NUM_THREADS=1``); the 1-process, 2-thread row is
the alternative use of the same two cores.

    python experiments/bench_ddp.py            # writes experiments/results/ddp.md
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "likelihood": ["experiment=quickstart"],
    "likelihood + GE (1000 trees)": [
        "experiment=quickstart", "objective=likelihood_ge", "objective.terms.ge.warmup=0",
        "data.labeled_size=1000",
    ],
}
# (processes, threads per process)
SETTINGS = [(1, 1), (2, 1), (1, 2)]
SCALING_OUT = """## Commands for more processes, GPUs and nodes

`data.tokens_per_batch` is the global batch (split by sentence across the ranks; the losses are
normalised by its word count), so a run on N processes computes the gradients of the 1-process run
with the same config: multiply it by N to keep each process's share. Give every rank the same
`hydra.run.dir`; rank 0 alone writes checkpoints, TensorBoard and predictions, and reads the
checkpoint to resume from (`trainer.resume=last`), so it needs no shared disk across nodes.

    # one machine, 2 CPU processes (gloo); every listener on loopback
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes=1 --nproc_per_node=2 --rdzv-backend=c10d --rdzv-conf=store_type=file --local-addr=127.0.0.1 -m parser.cli.train experiment=quickstart hydra.run.dir=outputs/quickstart_ddp
    # one machine, 4 GPUs (NCCL, one process per GPU)
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes=1 --nproc_per_node=4 --rdzv-backend=c10d --rdzv-conf=store_type=file --local-addr=127.0.0.1 -m parser.cli.train experiment=ewt_biaffine trainer.device=cuda hydra.run.dir=outputs/ewt_ddp
    # 2 machines x 4 GPUs on a private network (ports to open: docs/scaling.md): NODE_RANK=0 on the one at $MASTER_HOST, 1 on the other
    GLOO_SOCKET_IFNAME=$IFACE NCCL_SOCKET_IFNAME=$IFACE torchrun --nnodes=2 --node_rank=$NODE_RANK --nproc_per_node=4 --master_addr=$MASTER_HOST --master_port=29500 -m parser.cli.train experiment=ewt_biaffine trainer.device=cuda hydra.run.dir=outputs/ewt_ddp
    # resume any of them: the same command plus trainer.resume=last

`trainer=ddp` makes a launch without torchrun an error instead of a 1-process run;
`trainer.distributed=off` refuses a multi-process launch.
"""


def worker(args: argparse.Namespace) -> None:
    import torch
    from hydra import compose, initialize_config_dir

    from parser.config import config_dir, register_configs
    from parser.train.loop import Trainer

    torch.set_num_threads(args.threads)
    register_configs()
    overrides = [
        *args.overrides, "trainer.device=cpu", "trainer.progress=false", "trainer.final_eval=false",
        "logger.tensorboard=false", f"trainer.max_steps={args.warmup}", "trainer.eval_every=1000000",
    ]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(cfg, run_dir=run_dir)
        trainer.evaluate_and_checkpoint = lambda: None  # measure training steps only
        seen = {"sentences": 0, "tokens": 0}
        draw = trainer.task.data.stream.next

        def counted_next():
            kind, batch = draw()
            seen["sentences"] += batch.size
            seen["tokens"] += batch.n_tokens
            return kind, batch

        trainer.task.data.stream.next = counted_next
        trainer.fit()  # warm-up
        seen.update(sentences=0, tokens=0)
        trainer.cfg.trainer.max_steps = args.warmup + args.steps
        trainer.dist.barrier()
        start = time.perf_counter()
        trainer.fit()
        trainer.dist.barrier()
        elapsed = time.perf_counter() - start
        totals = trainer.dist.sum_scalars(seen)
        if trainer.dist.is_main:
            Path(args.out).write_text(json.dumps({
                "processes": trainer.dist.world_size, "threads": args.threads, "steps": args.steps,
                "seconds": elapsed, "sentences": totals["sentences"], "tokens": totals["tokens"],
                "backend": trainer.dist.backend,
            }))
        trainer.dist.shutdown()


# Every listener on loopback (docs/scaling.md): rendezvous in a private file, no agent store
# shared with the ranks, MASTER_ADDR=127.0.0.1 (rank 0 binds the ranks' store there).
LOOPBACK_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
LOOPBACK_OPTIONS = ["--rdzv-backend=c10d", "--rdzv-conf=store_type=file", "--local-addr=127.0.0.1"]


def command(processes: int, threads: int, *, steps: int, warmup: int, out: str, overrides: list[str]) -> list[str]:
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    return [
        torchrun, "--nnodes=1", f"--nproc_per_node={processes}", *LOOPBACK_OPTIONS, "experiments/bench_ddp.py",
        "--worker", f"--threads={threads}", f"--steps={steps}", f"--warmup={warmup}", f"--out={out}",
        *overrides,
    ]


def launcher(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import markdown_table, ud_root, write_result

    os.environ.setdefault("UD_ROOT", str(ud_root()))

    rows, commands = [], []
    for workload, overrides in WORKLOADS.items():
        base = None
        for processes, threads in SETTINGS:
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                argv = command(processes, threads, steps=args.steps, warmup=args.warmup, out=out.name,
                               overrides=overrides)
                env = dict(os.environ, OMP_NUM_THREADS=str(threads), **LOOPBACK_ENV)
                shown_argv = command(processes, threads, steps=args.steps, warmup=args.warmup,
                                     out="RESULT.json", overrides=overrides)
                shown = shlex.join([f"OMP_NUM_THREADS={threads}", *(f"{k}={v}" for k, v in LOOPBACK_ENV.items()),
                                    "torchrun", *shown_argv[1:]])
                commands.append(shown)
                print(shown, flush=True)
                load_before = os.getloadavg()[0]
                subprocess.run(argv, cwd=REPO, env=env, check=True)
                result = json.loads(Path(out.name).read_text())
            speed = result["sentences"] / result["seconds"]
            base = base or speed
            rows.append([workload, processes, threads, result["backend"] or "none", result["steps"],
                         int(result["sentences"]), round(result["seconds"], 1), round(speed, 1),
                         round(result["tokens"] / result["seconds"]), f"{speed / base:.2f}x",
                         f"{load_before:.1f}"])
    header = ["workload", "processes", "threads/process", "backend", "steps", "sentences", "seconds",
              "sentences/s", "tokens/s", "vs 1 process", "load avg before"]
    body = "\n\n".join([
        markdown_table(header, rows),
        ("The same global batches in every row (`data.tokens_per_batch=2000` words, split by sentence "
        "across ranks; the losses are normalised by the global word count, so 2 processes compute "
        "the 1-process gradient). `load avg before` is the machine's 1-minute load average when the "
        "run started: other jobs shared the two cores, so compare rows of one run only. On such a "
        "shared machine the two intra-op threads of the `1 process x 2 threads` rows wait for each "
        "other's time slices, which makes them far slower than one thread; processes with one "
        "thread each do not synchronise inside an operation, only once per step."),
        "Each row is one launch (the launcher reads `--out`, a JSON file):\n\n"
        + "\n".join(f"    {c}" for c in commands),
        SCALING_OUT,
    ])
    write_result("ddp.md", "Data-parallel training throughput (DDP, gloo, CPU)",
                 f"python experiments/bench_ddp.py --steps {args.steps} --warmup {args.warmup}", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help="run one setting (under torchrun)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=None)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (worker mode)")
    args = parser.parse_args()
    if args.worker:
        sys.path.insert(0, str(REPO))
        worker(args)
    else:
        launcher(args)


if __name__ == "__main__":
    main()
