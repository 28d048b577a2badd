"""Training: `attnmt train CONFIG [--set section.key=value ...] [--resume]`.

Reads top to bottom: set up (devices, processes, seeds, run directory), data, model,
optimizer, then the loop — one batch, one step, and every so often a log line, a
validation and a checkpoint — until a limit is reached, the dev metric stops improving,
or the user presses Ctrl-C (which saves a checkpoint first). `--resume` continues from the
run's latest checkpoint exactly: same weights, optimizer moments, learning rate, random
state and next batch.

Ctrl-C asks to stop: the step under way is finished, every process agrees on the step to
stop at, a checkpoint is saved and the run exits (a second Ctrl-C stops at once, still
saving the last finished step when there is one process). A killed process loses at most
the steps since its last checkpoint.

The run directory holds everything needed to go on, decode and redraw:

    config.yaml      the resolved configuration      vocab/         the subword model(s)
    checkpoints/     step checkpoints, latest/best     metrics.jsonl  one JSON line per event
    train.log        what the progress bar said        tensorboard/   (optional)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import random
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from attnmt import distributed
from attnmt.checkpoint import (
    Checkpoint,
    CheckpointManager,
    load_checkpoint,
    write_json_atomic,
)
from attnmt.config import Config, add_override_argument, load_config, save_config, to_dict
from attnmt.errors import CheckpointError, UserError
from attnmt.schedules import build_schedule

log = logging.getLogger("attnmt.train")
PAD = 0


@dataclass
class Progress:
    """Counters that a checkpoint carries so a resumed run goes on exactly."""

    step: int = 0
    elapsed: float = 0.0  # seconds of training, summed over sessions
    best: float | None = None
    bad_validations: int = 0
    nonfinite_in_a_row: int = 0
    baseline: float = 0.0  # REINFORCE moving-average baseline (hard attention)
    # The training loss summed over all processes since the last log line, so that a run
    # resumed between two log lines logs the same loss as one that was never stopped.
    window_nll: float = 0.0
    window_tokens: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    elapsed: float
    last_validation: dict[str, Any] | None
    best: float | None
    stopped_because: str


# ------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="experiment YAML file (see configs/)")
    add_override_argument(parser)
    parser.add_argument(
        "--resume", action="store_true", help="continue the run from its latest checkpoint"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    result = train(cfg, resume=args.resume, progress=not args.quiet)
    return 130 if result.stopped_because == "interrupted" else 0


# ------------------------------------------------------------------------------------
# Set-up
# ------------------------------------------------------------------------------------


def pick_device(name: str, ctx_local_rank: int = 0) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise UserError("train.device is 'cuda' but no GPU is visible; use 'cpu' or 'auto'")
        return torch.device("cuda", ctx_local_rank)
    if name != "cpu":
        raise UserError(f"train.device must be 'auto', 'cpu' or 'cuda', got '{name}'")
    return torch.device("cpu")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _setup_logging(run_dir: Path, is_main: bool) -> None:
    _close_logging()
    log.propagate = False
    log.setLevel(logging.INFO)
    if not is_main:
        return
    handler = logging.FileHandler(run_dir / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    log.addHandler(handler)


def _close_logging() -> None:
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()


def _say(message: str, bar: tqdm | None = None) -> None:
    """One line to the log file and to the terminal (above the progress bar)."""
    log.info(message)
    if bar is not None and not bar.disable:
        bar.write(message, file=sys.stderr)
    elif log.handlers:  # rank 0 without a bar
        print(message, file=sys.stderr)


def _check_resumable(cfg: Config, saved: dict[str, Any]) -> None:
    """The data and model of a resumed run must be the ones its checkpoint was trained on."""
    now = to_dict(cfg)
    for section in ("data", "model"):
        for key, value in saved.get(section, {}).items():
            if (section, key) == ("data", "cache_dir"):  # where the data is cached, not what
                continue
            if now[section].get(key) != value:
                raise UserError(
                    f"cannot resume: {section}.{key} is {now[section].get(key)!r} but the run "
                    f"was trained with {value!r}; use the run's config.yaml or a new run_dir"
                )


def build_optimizer(cfg: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    kind = torch.optim.AdamW if cfg.train.optimizer == "adamw" else torch.optim.Adam
    return kind(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)


# ------------------------------------------------------------------------------------
# One step
# ------------------------------------------------------------------------------------


def _to(batch: Any, device: torch.device) -> Any:
    if device.type == "cpu":
        return batch
    fields = ("src", "src_mask", "tgt_in", "tgt_out", "tgt_mask")
    return type(batch)(**{**vars(batch), **{f: getattr(batch, f).to(device) for f in fields}})


def batch_loss(model, batch, cfg: Config, ctx, progress: Progress) -> tuple[torch.Tensor, dict]:
    """Cross-entropy over the target tokens (plus REINFORCE terms for hard attention).

    The sum over this process's tokens is divided by the token count of the *global* batch
    (all processes) times the world size, because DDP averages gradients over processes:
    the gradient is then exactly that of one process seeing the whole global batch.

    Shapes:
        batch.src (B, S), batch.tgt_in / tgt_out / tgt_mask (B, T); logits (B, T, V)
    """
    precision = torch.bfloat16 if cfg.train.precision == "bf16" else None
    device_type = batch.src.device.type
    with torch.autocast(device_type, dtype=precision or torch.float32, enabled=bool(precision)):
        out = model(batch.src, batch.src_mask, batch.tgt_in)
    logits = out.logits.float()
    vocab = logits.size(-1)
    nll = F.cross_entropy(
        logits.reshape(-1, vocab),
        batch.tgt_out.reshape(-1),
        ignore_index=PAD,
        reduction="none",
        label_smoothing=cfg.train.label_smoothing,
    ).view_as(batch.tgt_out)  # (B, T)
    tokens = batch.tgt_mask.sum()
    global_tokens = distributed.all_reduce_sum(tokens.detach().float(), ctx)
    loss = nll.sum() / global_tokens * ctx.world_size
    stats = {"nll_sum": float(nll.detach().sum()), "tokens": int(tokens)}
    if getattr(out, "attn_log_prob", None) is not None:
        loss = loss + _reinforce(out, nll, batch, cfg, progress, ctx)
    return loss, stats


def _reinforce(out, nll, batch, cfg: Config, progress: Progress, ctx) -> torch.Tensor:
    """Xu et al. 2015 §4.1: reward = log-likelihood of the target, minus a moving baseline."""
    from attnmt.models.losses import reinforce_loss

    reward = -(nll.detach() * batch.tgt_mask).sum(dim=1)  # (B,) log p(y | x, sampled s)
    loss = reinforce_loss(
        out.attn_log_prob,
        out.attn_entropy,
        reward,
        progress.baseline,
        batch.tgt_mask,
        entropy_weight=cfg.train.entropy_weight,
    )
    mean_reward = float(distributed.all_reduce_sum(reward.mean(), ctx)) / ctx.world_size
    progress.baseline = 0.9 * progress.baseline + 0.1 * mean_reward
    # reinforce_loss sums over sentences; scale like the cross-entropy (per target token).
    global_tokens = distributed.all_reduce_sum(batch.tgt_mask.sum().float(), ctx)
    return loss / global_tokens * ctx.world_size


# ------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------


@torch.no_grad()
def validate(model, data, cfg: Config, device: torch.device) -> dict[str, Any]:
    """Dev loss and perplexity (teacher forcing), then greedy BLEU/chrF/exact match."""
    from attnmt.data import eval_batches
    from attnmt.decode_options import source_limit
    from attnmt.evaluate import bleu_tokenizer, corpus_scores
    from attnmt.translate import translate_ids

    # Dev is never length-filtered: cut sources to what the model can read, as evaluate does.
    limit = source_limit(cfg.model)
    examples = [
        ex if len(ex.src_ids) <= limit else dataclasses.replace(ex, src_ids=ex.src_ids[:limit])
        for ex in data.dev[: cfg.train.valid_sentences or None]
    ]
    was_training = model.training
    model.eval()
    nll_sum, tokens = 0.0, 0
    for batch in eval_batches(examples, batch_tokens=cfg.data.batch_tokens):
        batch = _to(batch, device)
        out = model(batch.src, batch.src_mask, batch.tgt_in)
        nll = F.cross_entropy(
            out.logits.float().reshape(-1, out.logits.size(-1)),
            batch.tgt_out.reshape(-1),
            ignore_index=PAD,
            reduction="sum",
        )
        nll_sum += float(nll)
        tokens += int(batch.tgt_mask.sum())
    model.train(was_training)
    translations = translate_ids(
        model, [ex.src_ids for ex in examples], data.vocab.decode_tgt, max_tokens=4000
    )
    hyps = [t.text for t in translations]
    references = [[ex.tgt, *ex.refs] for ex in examples]
    scores = corpus_scores(hyps, references, tokenize=bleu_tokenizer(cfg.data.tgt))
    loss = nll_sum / max(1, tokens)
    examples_out = [
        {"source": ex.src, "reference": ex.tgt, "output": hyp}
        for ex, hyp in zip(examples[: cfg.train.valid_examples], hyps, strict=False)
    ]
    return {
        "loss": round(loss, 4),
        "ppl": round(math.exp(min(loss, 50.0)), 2),
        **{k: scores[k] for k in ("bleu", "chrf", "exact", "bleu_signature")},
        "examples": examples_out,
    }


def _improved(metric: str, value: float, best: float | None) -> bool:
    if best is None:
        return True
    return value < best if metric == "loss" else value > best


# ------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------


class Run:
    """Holds what one training run needs; `train()` below drives it."""

    def __init__(self, cfg: Config, *, resume: bool, progress: bool):
        from attnmt.data import TokenBatcher, prepare
        from attnmt.models import build_model

        self.cfg = cfg
        self.device = pick_device(cfg.train.device)
        self.ctx = distributed.setup(self.device)
        if self.device.type == "cuda":
            self.device = torch.device("cuda", self.ctx.local_rank)
            torch.cuda.set_device(self.device)
        self.run_dir = Path(cfg.train.run_dir)
        metric = cfg.train.early_stopping_metric
        self.checkpoints = CheckpointManager(
            self.run_dir, keep_last=cfg.train.keep_last, higher_is_better=metric != "loss"
        )
        if self.checkpoints.has_checkpoint() and not resume:
            raise UserError(
                f"run directory '{self.run_dir}' already has checkpoints; add --resume to "
                "continue it, or set train.run_dir to a new directory"
            )
        if resume and not self.checkpoints.has_checkpoint():
            raise UserError(f"nothing to resume: '{self.run_dir}' has no checkpoint yet")
        # Read and check the checkpoint to resume from before spending time on the data.
        checkpoint = load_checkpoint(self.run_dir) if resume else None
        if checkpoint is not None:
            _check_resumable(cfg, checkpoint.state.get("config", {}))
        if self.ctx.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        distributed.barrier(self.ctx)
        _setup_logging(self.run_dir, self.ctx.is_main)

        # Rank 0 prepares (and caches) the data first; the others then read the cache.
        if self.ctx.is_main:
            self.data = prepare(cfg.data, progress=progress)
        distributed.barrier(self.ctx)
        if not self.ctx.is_main:
            self.data = prepare(cfg.data, progress=False)
        if not self.data.dev:
            raise UserError(
                f"the dev split of data.corpus '{cfg.data.corpus}' is empty; training validates "
                "on it: set data.dev_path (files, tsv) or data.dev_books (bible, alignments)"
            )
        vocab = self.data.vocab
        # Seeded after the data, so a run that prepares it and one that reads the cache
        # start from the same random state.
        seed_everything(cfg.train.seed + self.ctx.rank)
        self.model = build_model(cfg.model, vocab.src_vocab_size, vocab.tgt_vocab_size)
        self.model.to(self.device)
        self.optimizer = build_optimizer(cfg, self.model)
        self.schedule = build_schedule(
            cfg.train.schedule, self.optimizer, cfg.train.lr, cfg.train.warmup_steps
        )
        self.batcher = TokenBatcher(
            self.data.train,
            batch_tokens=cfg.data.batch_tokens,
            shuffle=True,
            seed=cfg.train.seed,
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
        )
        self.progress = Progress()
        if checkpoint is not None:
            self._restore(checkpoint)
        elif self.ctx.is_main:
            save_config(cfg, self.run_dir / "config.yaml")
            vocab.save(self.run_dir / "vocab")
            # A fresh run: drop the log lines of an earlier attempt that saved no checkpoint.
            (self.run_dir / "metrics.jsonl").unlink(missing_ok=True)
        self.ddp = self.model
        if self.ctx.enabled:
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model)
        self.writer = self._tensorboard() if self.ctx.is_main else None

    def _tensorboard(self):
        if not self.cfg.train.tensorboard:
            return None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise UserError(
                "train.tensorboard is true but the tensorboard package is missing; "
                "pip install tensorboard, or set train.tensorboard=false"
            ) from None
        return SummaryWriter(str(self.run_dir / "tensorboard"))

    def _restore(self, ck: Checkpoint) -> None:
        from attnmt.data import load_vocab

        state, rank = ck.state, self.ctx.rank
        saved_vocab = self.run_dir / "vocab"
        if saved_vocab.is_dir() and not load_vocab(saved_vocab).same_as(self.data.vocab):
            raise UserError(
                f"cannot resume: the subword model prepared now differs from the run's "
                f"'{saved_vocab}' (was the data cache rebuilt?); set train.run_dir to a new "
                "directory to start afresh"
            )
        batchers = state.get("batcher")
        if isinstance(batchers, list) and len(batchers) != self.ctx.world_size:
            raise UserError(
                f"cannot resume: the run was trained with {len(batchers)} process(es) and this "
                f"is {self.ctx.world_size}; start it with the same number (torchrun "
                "--nproc_per_node), or set train.run_dir to a new directory"
            )
        try:
            self.batcher.load_state_dict(batchers[rank])
        except ValueError as err:
            raise UserError(
                f"cannot resume: the training batches would differ from the run's ({err}); "
                "set train.seed back to the value in the run's config.yaml, or set "
                "train.run_dir to a new directory"
            ) from None
        except (TypeError, IndexError, KeyError) as err:
            raise _unusable(ck.path, err) from None
        try:
            self.model.load_state_dict(ck.model)
            if ck.optimizer is not None:
                self.optimizer.load_state_dict(ck.optimizer)
            self.schedule.load_state_dict(state["schedule"])
            self.progress = Progress(**state["progress"])
            _set_rng_state(
                state["python_rng"][rank],
                ck.tensors[f"rng_torch.{rank}"],
                ck.tensors.get(f"rng_cuda.{rank}"),
                self.device,
            )
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as err:
            raise _unusable(ck.path, err) from None
        if self.ctx.is_main:
            save_config(self.cfg, self.run_dir / "config.yaml")
            # Lines logged after the checkpoint (by a killed run) are logged again below.
            _trim_metrics(self.run_dir / "metrics.jsonl", ck.step)

    def save(self, *, metric: float | None = None) -> Path | None:
        """Checkpoint (all ranks take part: every rank's batcher and RNG state is kept)."""
        batcher_states = _gather(self.batcher.state_dict(), self.ctx)
        python_rng = _gather(list(random.getstate()), self.ctx)
        torch_rng = _gather(torch.get_rng_state(), self.ctx)
        cuda_rng = _gather(_cuda_rng_state(self.device), self.ctx)
        if not self.ctx.is_main:
            return None
        state = {
            "step": self.progress.step,
            "config": to_dict(self.cfg),
            "schedule": self.schedule.state_dict(),
            "batcher": batcher_states,
            "progress": vars(self.progress),
            "python_rng": python_rng,
            "vocab_sizes": [self.data.vocab.src_vocab_size, self.data.vocab.tgt_vocab_size],
        }
        tensors = {f"rng_torch.{rank}": rng for rank, rng in enumerate(torch_rng)}
        tensors.update({f"rng_cuda.{r}": rng for r, rng in enumerate(cuda_rng) if rng is not None})
        return self.checkpoints.save(
            self.progress.step,
            metric=metric,
            model_state=self.model.state_dict(),
            optimizer_state=self.optimizer.state_dict(),
            state=state,
            tensors=tensors,
        )

    def record(self, event: dict[str, Any]) -> None:
        if not self.ctx.is_main:
            return
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event, ensure_ascii=False) + "\n")
        if self.writer is not None:
            for key, value in event.items():
                if isinstance(value, int | float) and key != "step":
                    self.writer.add_scalar(f"{event['type']}/{key}", value, event["step"])


def _unusable(path: Path, err: Exception) -> CheckpointError:
    detail = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
    return CheckpointError(
        f"'{path}' cannot be resumed from: it is incomplete or damaged "
        f"({err.__class__.__name__}: {detail}); delete it to resume from an earlier one"
    )


def _trim_metrics(path: Path, step: int) -> None:
    """Keep the lines of `path` up to `step` (and drop a line cut short by a crash)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("step"), int) and event["step"] <= step:
            kept.append(line + "\n")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    tmp.replace(path)


def _tuple(value: Any) -> Any:
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value


def _cuda_rng_state(device: torch.device) -> torch.Tensor | None:
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def _set_rng_state(python: Any, torch_state: torch.Tensor, cuda_state, device) -> None:
    random.setstate(_tuple(python))
    torch.set_rng_state(torch_state)
    if cuda_state is not None and device.type == "cuda":
        torch.cuda.set_rng_state(cuda_state, device)


def _gather(value: Any, ctx) -> list[Any]:
    if not ctx.enabled:
        return [value]
    gathered: list[Any] = [None] * ctx.world_size
    torch.distributed.all_gather_object(gathered, value)
    return gathered


def _limit_reached(run: Run) -> str | None:
    t = run.cfg.train
    if t.max_steps and run.progress.step >= t.max_steps:
        return "max_steps"
    if t.max_minutes and run.progress.elapsed >= 60.0 * t.max_minutes:
        return "max_minutes"
    if t.max_epochs and run.batcher.epoch >= t.max_epochs:
        return "max_epochs"
    return None


def train(cfg: Config, *, resume: bool = False, progress: bool = True) -> TrainResult:
    """Train the experiment `cfg`; see the module docstring."""
    try:
        run = Run(cfg, resume=resume, progress=progress)
    except BaseException:
        _close_logging()
        distributed.teardown()
        raise
    try:
        return _loop(run, progress)
    finally:
        if run.writer is not None:
            run.writer.close()
        _close_logging()
        distributed.teardown(run.ctx)


class _CtrlC:
    """Ctrl-C (SIGINT) while training.

    The first one only sets `requested`: the step under way finishes and the loop stops
    after it, on every process at the same step, with a checkpoint. A second one raises
    KeyboardInterrupt at once, unless it comes during `update()` (the weight update, never
    cut in half), where it counts as the first. Until the update, `rewind_to` holds the
    state from before the step, which a step cut short is rolled back to.
    """

    def __init__(self) -> None:
        self.requested = False
        self.rewind_to: tuple | None = None
        self._updating = False
        self._installed = False
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            previous = self._previous if self._previous is not None else signal.SIG_DFL
            signal.signal(signal.SIGINT, previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and not self._updating:
            raise KeyboardInterrupt
        self.requested = True

    @contextmanager
    def update(self) -> Iterator[None]:
        self._updating = True
        try:
            yield
            self.rewind_to = None  # the step is done: nothing to roll back any more
        finally:
            self._updating = False


def _loop(run: Run, show_progress: bool) -> TrainResult:
    cfg, p, ctx = run.cfg, run.progress, run.ctx
    bar = tqdm(
        total=cfg.train.max_steps or None,
        initial=p.step,
        # No bar when stderr is not a terminal (a log file, CI): log lines instead.
        disable=not (show_progress and ctx.is_main and sys.stderr.isatty()),
        dynamic_ncols=True,
        unit="step",
        file=sys.stderr,
    )
    n_params = sum(t.numel() for t in run.model.parameters())
    _say(
        f"{'resuming' if p.step else 'training'} {cfg.model.name} ({n_params:,} parameters) "
        f"on {len(run.data.train):,} pairs, {ctx.world_size} process(es), {run.device}, "
        f"{cfg.train.precision}; run directory {run.run_dir}",
        bar,
    )
    window_start = time.perf_counter()
    last_valid: dict[str, Any] | None = None
    stopped = _limit_reached(run)
    batches = iter(run.batcher)
    run.ddp.train()
    last_saved = p.step
    with _CtrlC() as ctrl_c:
        try:
            while stopped is None:
                ctrl_c.rewind_to = _snapshot(run)
                lr = _train_step(run, batches, ctrl_c, bar)
                if lr is None:  # a non-finite loss: the batch was skipped
                    continue
                bar.update(1)
                if p.step % cfg.train.log_every == 0:
                    _log_train(run, bar, lr, time.perf_counter() - window_start, show_progress)
                    window_start = time.perf_counter()
                # Decided together before validating: every process must take part in it.
                stopped, interrupted = _sync_stop(_limit_reached(run), ctrl_c.requested, ctx)
                if p.step % cfg.train.validate_every == 0 or stopped is not None:
                    last_valid = _validate_and_save(run, bar)
                    last_saved = p.step
                    if cfg.train.patience and p.bad_validations >= cfg.train.patience:
                        stopped = stopped or "early_stopping"
                    # Validation time does not count against the time budget or the rate.
                    window_start = time.perf_counter()
                elif p.step % cfg.train.checkpoint_every == 0:
                    run.save()
                    last_saved = p.step
                if interrupted and stopped is None:
                    return _interrupted(run, bar, last_saved, last_valid, at_once=False)
        except KeyboardInterrupt:
            if ctrl_c.rewind_to is not None:  # cut short before its update: undo its start
                _rewind(run, ctrl_c.rewind_to)
            return _interrupted(run, bar, last_saved, last_valid, at_once=True)
    bar.close()
    _say(
        f"stopped ({stopped}) at step {p.step} after {p.elapsed / 60:.1f} min; "
        f"best dev {cfg.train.early_stopping_metric} {p.best}; run directory {run.run_dir}",
        None,
    )
    return TrainResult(run.run_dir, p.step, p.elapsed, last_valid, p.best, stopped)


def _train_step(run: Run, batches: Iterator, ctrl_c: _CtrlC, bar: tqdm) -> float | None:
    """One optimizer step on the next batch; its learning rate, or None if the batch was
    skipped for a non-finite loss or gradient (all processes skip it together)."""
    cfg, p, ctx = run.cfg, run.progress, run.ctx
    started = time.perf_counter()
    batch = _to(next(batches), run.device)
    run.optimizer.zero_grad(set_to_none=True)
    loss, stats = batch_loss(run.ddp, batch, cfg, ctx, p)
    finite, nll_sum, tokens = _step_totals(loss, stats, ctx)
    if finite:
        loss.backward()
        if cfg.train.clip_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.train.clip_norm)
            finite = bool(torch.isfinite(norm))
    if not finite:
        ctrl_c.rewind_to = None  # skipped for good, as it would be without a Ctrl-C
        p.nonfinite_in_a_row += 1
        _say(f"warning: non-finite loss at step {p.step + 1}; batch skipped", bar)
        if p.nonfinite_in_a_row >= cfg.train.max_nonfinite:
            bar.close()
            raise UserError(
                f"training stopped: {p.nonfinite_in_a_row} non-finite losses in a row at step "
                f"{p.step + 1}; lower train.lr or use train.precision=fp32 (the last good "
                f"checkpoint is kept in {run.run_dir / 'checkpoints'})"
            )
        return None
    with ctrl_c.update():
        run.optimizer.step()
        lr = run.schedule.step()
        p.step += 1
        p.nonfinite_in_a_row = 0
    p.elapsed += time.perf_counter() - started
    p.window_nll += nll_sum
    p.window_tokens += tokens
    return lr


def _log_train(run: Run, bar: tqdm, lr: float, seconds: float, show_progress: bool) -> None:
    p = run.progress
    train_loss = p.window_nll / max(1, p.window_tokens)
    event = {
        "type": "train",
        "step": p.step,
        "loss": round(train_loss, 4),
        "lr": lr,
        "tokens_per_s": round(p.window_tokens / max(seconds, 1e-9), 1),
        "epoch": run.batcher.epoch,
        "elapsed": round(p.elapsed, 1),
    }
    run.record(event)
    eta = _time_left(run)
    if bar.disable and show_progress:
        _say(
            f"step {p.step}: loss {train_loss:.3f} lr {lr:.2e} "
            f"{event['tokens_per_s']:.0f} tok/s epoch {run.batcher.epoch}"
            + (f" eta {eta}" if eta else ""),
            None,
        )
    postfix = {"loss": f"{train_loss:.3f}", "lr": f"{lr:.2e}"}
    postfix["tok_s"] = f"{event['tokens_per_s']:.0f}"
    if eta:  # a time budget: the bar itself has no total to estimate from
        postfix["eta"] = eta
    bar.set_postfix(postfix)
    p.window_nll, p.window_tokens = 0.0, 0


def _time_left(run: Run) -> str | None:
    """Training time left under `train.max_minutes` as M:SS (None without a time budget)."""
    budget = run.cfg.train.max_minutes * 60.0
    if not budget or run.cfg.train.max_steps:
        return None  # with max_steps the bar shows its own ETA
    seconds = max(0, round(budget - run.progress.elapsed))
    return f"{seconds // 60}:{seconds % 60:02d}"


def _interrupted(
    run: Run, bar: tqdm, last_saved: int, last_valid: dict[str, Any] | None, *, at_once: bool
) -> TrainResult:
    """Save the last finished step (unless it is saved) and say how to go on."""
    p = run.progress
    bar.close()
    if p.step == last_saved:
        _say(f"interrupted at step {p.step}, which is saved", None)
    elif at_once and run.ctx.enabled:
        # The other processes may be anywhere in their step: no collective save.
        _say(f"interrupted at step {p.step}; no checkpoint after step {last_saved}", None)
    else:
        path = run.save()
        _say(f"interrupted at step {p.step}; checkpoint saved to {path}", None)
    _say("resume with: attnmt train CONFIG --resume", None)
    return TrainResult(run.run_dir, p.step, p.elapsed, last_valid, p.best, "interrupted")


def _snapshot(run: Run) -> tuple:
    """What a step changes before its update (batcher, random states, REINFORCE baseline)."""
    return (
        run.batcher.state_dict(),
        random.getstate(),
        torch.get_rng_state(),
        _cuda_rng_state(run.device),
        run.progress.baseline,
    )


def _rewind(run: Run, snapshot: tuple) -> None:
    batcher, python, torch_state, cuda_state, baseline = snapshot
    run.batcher.load_state_dict(batcher)
    _set_rng_state(python, torch_state, cuda_state, run.device)
    run.progress.baseline = baseline


def _step_totals(loss: torch.Tensor, stats: dict, ctx) -> tuple[bool, float, int]:
    """Whether the loss is finite on every process (all skip a batch together), and the
    summed loss and target tokens of the global batch (one collective for the three)."""
    finite = float(torch.isfinite(loss.detach()).item())
    local = torch.tensor([finite, stats["nll_sum"], stats["tokens"]], dtype=torch.float64)
    total = distributed.all_reduce_sum(local, ctx)
    return bool(total[0].item() == ctx.world_size), float(total[1]), int(total[2])


def _sync_stop(stopped: str | None, interrupted: bool, ctx) -> tuple[str | None, bool]:
    """Rank 0 decides when a limit is reached (its clock); a Ctrl-C on any process stops all."""
    if not ctx.enabled:
        return stopped, interrupted
    local = [float(ctx.is_main and stopped is not None), float(interrupted)]
    flags = distributed.all_reduce_sum(torch.tensor(local), ctx)
    stopped = (stopped or "max_minutes") if flags[0].item() > 0 else None
    return stopped, bool(flags[1].item() > 0)


def _validate_and_save(run: Run, bar: tqdm) -> dict[str, Any] | None:
    """Rank 0 validates; every rank then applies the same metric to the same counters."""
    cfg, p = run.cfg, run.progress
    metric = cfg.train.early_stopping_metric
    result = validate(run.model, run.data, cfg, run.device) if run.ctx.is_main else None
    shared = (float(result[metric]), result["loss"]) if result is not None else None
    if run.ctx.enabled:
        shared = _gather(shared, run.ctx)[0]
    metric_value, dev_loss = shared
    if _improved(metric, metric_value, p.best):
        p.best, p.bad_validations = metric_value, 0
    else:
        p.bad_validations += 1
    run.schedule.on_validation(dev_loss)
    if result is not None:
        event = {"type": "valid", "step": p.step}
        event.update({k: v for k, v in result.items() if k != "examples"})
        run.record(event)
        _say(
            f"step {p.step}: dev loss {result['loss']:.3f} ppl {result['ppl']:.1f} "
            f"BLEU {result['bleu']:.2f} chrF {result['chrf']:.2f} exact {result['exact']:.1f}%",
            bar,
        )
        for ex in result["examples"]:
            _say(f"  src: {ex['source']}\n  ref: {ex['reference']}\n  out: {ex['output']}", bar)
        write_json_atomic(run.run_dir / "last_validation.json", result)
    run.save(metric=metric_value)
    return result
