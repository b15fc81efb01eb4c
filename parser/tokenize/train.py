"""Training the tokenizer and sentence splitter (``parser-train-tokenizer``,
:mod:`parser.cli.train_tokenizer`).

Reads the ``train`` split's paragraphs (text, character tags, multiword tokens), builds the
character vocabulary and the multiword table, then steps AdamW (``parser.runtime.optim``) on the
CRF's negative log-likelihood per character. Every ``train.eval_every`` steps it tokenises the dev
text and scores tokens and sentences F1; the best model (by their sum) is saved atomically to
``<checkpoint dir>/best.pt`` (``parser.runtime.checkpoint``), the latest to ``last.pt``; it stops after
``train.patience`` evaluations without a gain (``train.init``: start from a checkpoint's weights). Without a dev split the last step's model is the
best. Scalars go to TensorBoard (``<run dir>/tensorboard``: ``train/loss``, ``train/lr``,
``dev/tokens_f1``, ``dev/sentences_f1``) through torch's ``SummaryWriter`` (``parser.train``'s
``RunLogger`` sits above this package). Results: ``<run dir>/results.json``.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from parser.data.paths import existing_file, resolve_ud_root, treebank_file
from parser.runtime.checkpoint import save_checkpoint
from parser.runtime.optim import build_optimizer, build_scheduler
from parser.tokenize.data import Pieces, build_chars, cut_pieces, span_scores
from parser.tokenize.model import CharTagger
from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.segment import (
    TrainedTokenizer,
    load_tokenizer,
    tokenize_paragraphs,
    tokenizer_state,
)
from parser.tokenize.text import paragraph_text, read_paragraphs

__all__ = ["evaluate_tokenizer", "split_path", "train"]

log = logging.getLogger("parser.tokenize")


def split_path(data: DictConfig, split: str) -> Path:
    """``data.<split>_file`` if set, else the treebank's file of ``data.<split>_split``."""
    explicit = data.get(f"{split}_file")
    if explicit:
        return existing_file(explicit, option=f"data.{split}_file")
    return treebank_file(resolve_ud_root(data.root), data.treebank, data.get(f"{split}_split"))


def evaluate_tokenizer(tokenizer: TrainedTokenizer, paragraphs: list) -> dict[str, float]:
    """Tokens / sentences F1 of ``tokenizer`` on the text of gold ``paragraphs``."""
    predicted = tokenize_paragraphs(tokenizer, [paragraph_text(p) for p in paragraphs])
    return span_scores(paragraphs, predicted)


def _writer(log_dir: Path | None):
    if log_dir is None:
        return None
    from torch.utils.tensorboard import SummaryWriter  # imports tensorboard: only when used

    return SummaryWriter(str(log_dir))


def _init_from(tokenizer: TrainedTokenizer, path: Path) -> None:
    """Copy the weights of the tokenizer at ``path`` (a longer run in steps); its characters and
    model sizes must be this run's."""
    start = load_tokenizer(path)
    if start.chars != tokenizer.chars or start.model.hparams != tokenizer.model.hparams:
        raise ValueError(f"train.init={path}: its characters or model sizes differ from this run's")
    tokenizer.model.load_state_dict(start.model.state_dict())


def train(cfg: DictConfig, *, run_dir: str | Path) -> dict:
    """Train with ``cfg``; returns (and writes to ``<run_dir>/results.json``) the dev scores of the
    best model, its step and checkpoint path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    opts, data = cfg.train, cfg.data
    torch.set_num_threads(int(opts.threads))
    torch.manual_seed(int(opts.seed))
    train_path = split_path(data, "train")
    paragraphs = list(read_paragraphs(train_path))
    dev_path = split_path(data, "dev") if (data.dev_file or data.dev_split) else None
    dev = list(read_paragraphs(dev_path)) if dev_path else None
    chars = build_chars(paragraphs, min_freq=int(data.min_freq))
    multiwords = MultiwordTable.build(paragraphs)
    pieces = Pieces.build(cut_pieces(paragraphs, segment=int(data.segment)), chars,
                          batch_size=int(data.batch_size), seed=int(opts.seed))
    m = cfg.model
    model = CharTagger(n_chars=len(chars), char_dim=m.char_dim, class_dim=m.class_dim,
                       hidden=m.hidden, layers=m.layers, dropout=m.dropout).to(opts.device)
    tokenizer = TrainedTokenizer(model, chars, multiwords, int(m.window), int(m.context))
    if opts.init:
        _init_from(tokenizer, existing_file(opts.init, option="train.init"))
    log.info("tokenizer: %s: %d paragraphs, %d pieces, %d characters, %d multiword forms, "
             "%d parameters", train_path, len(paragraphs), len(pieces.chars), len(chars),
             len(multiwords), sum(p.numel() for p in model.parameters()))
    total = int(opts.max_steps)
    if total < 1:
        raise ValueError(f"train.max_steps={total}: must be >= 1")
    optimizer = build_optimizer(model.parameters(), cfg.optim)
    scheduler = build_scheduler(optimizer, cfg.optim, total_steps=total)
    ckpt_dir = Path(opts.checkpoint_dir) if opts.checkpoint_dir else run_dir / "checkpoints"
    config = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    writer = _writer(run_dir / "tensorboard" if opts.tensorboard else None)
    best, best_step, stale, history, started = -1.0, 0, 0, [], time.time()
    bar = tqdm(total=total, desc="tokenizer", disable=not opts.progress, dynamic_ncols=True)
    model.train()
    try:
        for step in range(1, total + 1):
            ids, classes, tags, lengths = (t.to(opts.device) for t in pieces.next())
            loss = -model(ids, classes, lengths).log_prob(tags).sum() / lengths.sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.optim.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.clip_norm)
            optimizer.step()
            scheduler.step()
            bar.update(1)
            if step % 10 == 0:
                bar.set_postfix(loss=f"{loss.item():.4f}", epoch=pieces.epoch)
                if writer is not None:
                    writer.add_scalar("train/loss", loss.item(), step)
                    writer.add_scalar("train/lr", scheduler.get_last_lr()[0], step)
            if step % int(opts.eval_every) and step != total:
                continue
            state = tokenizer_state(tokenizer, step=step, config=config)
            save_checkpoint(state, ckpt_dir / "last.pt")
            if dev is None:
                best, best_step = 0.0, step
                save_checkpoint(state, ckpt_dir / "best.pt")
                continue
            scores = evaluate_tokenizer(tokenizer, dev)
            model.train()
            history.append({"step": step, **scores})
            if writer is not None:
                for key, value in scores.items():
                    writer.add_scalar(f"dev/{key}", value, step)
            gain = scores["tokens_f1"] + scores["sentences_f1"] > best
            log.info("step %d: dev tokens F1 %.2f sentences F1 %.2f%s", step,
                     scores["tokens_f1"], scores["sentences_f1"], " (best)" if gain else "")
            if gain:
                best, best_step, stale = scores["tokens_f1"] + scores["sentences_f1"], step, 0
                save_checkpoint({**state, "dev": scores}, ckpt_dir / "best.pt")
            else:
                stale += 1
                if opts.patience is not None and stale >= int(opts.patience):
                    log.info("no dev gain in %d evaluations: stopping", stale)
                    break
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    results = {"treebank": data.treebank, "train_file": str(train_path), "best_step": best_step,
               "checkpoint": str(ckpt_dir / "best.pt"), "history": history,
               "seconds": round(time.time() - started, 1)}
    if dev is not None:
        results["dev"] = evaluate_tokenizer(load_tokenizer(ckpt_dir / "best.pt"), dev)
        print(f"dev: tokens F1 {results['dev']['tokens_f1']:.2f} sentences F1 "
              f"{results['dev']['sentences_f1']:.2f}", flush=True)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results
