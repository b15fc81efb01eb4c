"""Training the UPOS tagger (``parser-train-tagger``, :mod:`parser.cli.train_tagger`).

The loop draws ``(kind, batch)`` from the labeled / unlabeled stream, applies the weighted
objective, clips and steps AdamW, evaluates UPOS accuracy on dev once per epoch (or every
``tagger.eval_every`` steps), saves the best model atomically to ``<checkpoint dir>/best.pt``, stops
after ``tagger.patience`` evaluations without a gain, then scores the best model on dev and test,
prints the figures and writes them to ``<run dir>/results.json``.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from parser.data.vocab import N_SPECIAL
from parser.runtime.checkpoint import save_checkpoint
from parser.runtime.optim import build_optimizer, build_scheduler
from parser.tagger.data import build_constraints, load_tag_data
from parser.tagger.model import Tagger
from parser.tagger.objectives import build_tag_objective
from parser.tagger.predict import TrainedTagger, load_tagger, tagger_state, upos_accuracy

__all__ = ["train"]

log = logging.getLogger("parser.tagger")


def train(cfg: DictConfig, *, run_dir: str | Path) -> dict:
    """Train with ``cfg`` and return ``{"dev": {...}, "test": {...} | None, "best_step", ...}``
    (also written to ``<run_dir>/results.json``)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    opts = cfg.tagger
    torch.set_num_threads(int(opts.threads))
    torch.manual_seed(int(opts.seed))
    data = load_tag_data(cfg.data, max_train_sentences=opts.max_train_sentences, seed=int(opts.seed))
    model = Tagger(
        n_words=len(data.vocabs.words), n_chars=len(data.vocabs.chars),
        n_tags=len(data.vocabs.upos) - N_SPECIAL, word_dim=opts.word_dim, char_dim=opts.char_dim,
        char_hidden=opts.char_hidden, char_out=opts.char_out, lstm_hidden=opts.lstm_hidden,
        lstm_layers=opts.lstm_layers, dropout=opts.dropout, word_dropout=opts.word_dropout,
    )
    spec = OmegaConf.to_container(cfg.objective, resolve=True)
    ge_options = [o or {} for n, o in spec.items() if (o or {}).get("type", n) == "ge"]
    constraints = build_constraints(ge_options[0], data.labeled, data.vocabs) if ge_options else None
    objective = build_tag_objective(spec, constraints=constraints)
    if "labeled" in objective.streams() and data.stream.labeled is None:
        raise ValueError("objective has labeled terms but data.labeled_size=0 leaves no labeled sentences")

    steps_per_epoch = len(data.stream.primary)
    total_steps = int(opts.max_epochs) * steps_per_epoch
    if opts.max_steps is not None:
        total_steps = min(total_steps, int(opts.max_steps))
    if total_steps < 1:
        raise ValueError(f"tagger.max_epochs={opts.max_epochs}, tagger.max_steps={opts.max_steps}: no steps")
    optimizer = build_optimizer(model.parameters(), cfg.optim)
    scheduler = build_scheduler(optimizer, cfg.optim, total_steps=total_steps)
    eval_every = int(opts.eval_every) if opts.eval_every else steps_per_epoch
    eval_tokens = int(cfg.data.eval_tokens_per_batch)
    ckpt_dir = Path(opts.checkpoint_dir) if opts.checkpoint_dir else run_dir / "checkpoints"
    best_path = ckpt_dir / "best.pt"
    config = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    log.info("tagger: %d parameters, %d steps (%d per epoch), eval every %d",
             sum(p.numel() for p in model.parameters()), total_steps, steps_per_epoch, eval_every)

    best, best_step, stale, bad_steps, started = -1.0, 0, 0, 0, time.time()
    history = []
    model.train()
    for step in range(total_steps):
        _, batch = data.stream.next()
        result = objective(model(batch), batch, step=step)
        if not torch.isfinite(result.loss):
            bad_steps += 1
            log.warning("step %d: non-finite loss %s, skipped", step, float(result.loss))
            if bad_steps >= 5:
                raise ValueError(f"tagger: {bad_steps} non-finite losses in a row at step {step}")
            optimizer.zero_grad(set_to_none=True)
            continue
        bad_steps = 0
        optimizer.zero_grad(set_to_none=True)
        result.loss.backward()
        if cfg.optim.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.clip_norm)
        optimizer.step()
        scheduler.step()
        if (step + 1) % int(opts.log_every) == 0:
            logs = " ".join(f"{k}={float(v):.4f}" for k, v in result.logs.items() if not k.endswith("/weight"))
            log.info("step %d epoch %d lr %.2e %s (%.0fs)", step + 1, data.stream.epoch,
                     scheduler.get_last_lr()[0], logs, time.time() - started)
        if (step + 1) % eval_every == 0 or step + 1 == total_steps:
            dev = upos_accuracy(TrainedTagger(model, data.vocabs), data.dev.sentences,
                               tokens_per_batch=eval_tokens)
            model.train()
            history.append({"step": step + 1, "dev_accuracy": dev["accuracy"]})
            gain = dev["accuracy"] > best
            log.info("step %d: dev UPOS %.2f%%%s", step + 1, 100 * dev["accuracy"],
                     " (best)" if gain else "")
            if gain:
                best, best_step, stale = dev["accuracy"], step + 1, 0
                save_checkpoint(tagger_state(model, data.vocabs, step=step + 1,
                                             dev_accuracy=best, config=config), best_path)
            else:
                stale += 1
                if opts.patience is not None and stale >= int(opts.patience):
                    log.info("no dev gain in %d evaluations: stopping", stale)
                    break

    trained = load_tagger(best_path)
    results: dict = {"treebank": cfg.data.treebank, "best_step": best_step,
                     "checkpoint": str(best_path), "history": history,
                     "train_sentences": len(data.labeled), "unlabeled_sentences": len(data.unlabeled),
                     "seconds": round(time.time() - started, 1)}
    for name, treebank in (("dev", data.dev), ("test", data.test)):
        if treebank is None:
            results[name] = None
            continue
        results[name] = upos_accuracy(trained, treebank.sentences, tokens_per_batch=eval_tokens)
        score = results[name]
        print(f"{name}: UPOS {100 * score['accuracy']:.2f} ({score['correct']}/{score['total']})",
              flush=True)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results
