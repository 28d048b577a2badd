"""The training loop: one batch, one step, and every so often a log line, a validation and
a checkpoint, until a limit is reached, the dev metric stops improving, or the user
presses Ctrl-C (which saves a checkpoint first).

    result = train(cfg, resume=False, progress=True)   # a TrainResult

Ctrl-C asks to stop: the step under way is finished, every process agrees on the step to
stop at, a checkpoint is saved and the run exits (a second Ctrl-C stops at once, still
saving the last finished step when there is one process). A killed process loses at most
the steps since its last checkpoint. Set-up, saving and exact resume are in
`attnmt.training.run`.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from tqdm import tqdm

from attnmt.config import Config
from attnmt.errors import UserError
from attnmt.progress import progress_bar
from attnmt.rundir import write_json_atomic
from attnmt.training import distributed
from attnmt.training.losses import batch_loss
from attnmt.training.run import (
    Run,
    TrainResult,
    _close_logging,
    _gather,
    _rewind,
    _say,
    _snapshot,
)
from attnmt.training.validation import _improved, validate

SHOWN_SOURCE = 200  # characters of a validation example's source shown in the log


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
        result = _loop(run, progress)
        # Every process waits here for the others (rank 0 may still be validating and
        # saving) before any leaves the group: a rank that tore gloo down while its peer
        # was busy died at exit with SIGABRT once in a fresh-clone suite (2026-11-24).
        distributed.barrier(run.ctx)
        return result
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
    bar = progress_bar(
        total=cfg.train.max_steps or None,
        initial=p.step,
        # No bar where nobody watches (a log file, CI): log lines instead.
        enabled=show_progress and ctx.is_main,
        dynamic_ncols=True,
        unit="step",
        file=sys.stderr,
    )
    n_params = sum(t.numel() for t in run.model.parameters())
    _say(
        f"{'resuming' if p.step else 'training'} {cfg.model.name} ({n_params:,} parameters) "
        f"on {len(run.data.train):,} pairs, {ctx.world_size} process(es), {run.device}, "
        f"{run.precision.name}; run directory {run.run_dir}",
        bar,
    )
    _say(f"precision {run.precision.name} ({run.precision.reason}); device {run.device}", bar)
    if run.precision.warning:
        _say(f"warning: {run.precision.warning}", bar)
    estimate = _Estimate(run)
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
                estimate.after_step(bar)
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
    batch = next(batches).to(run.device)
    run.optimizer.zero_grad(set_to_none=True)
    loss, stats = batch_loss(
        run.ddp, batch, cfg, ctx, p, autocast_dtype=run.precision.autocast_dtype, guide=run.guide
    )
    finite, nll_sum, tokens = _step_totals(loss, stats, ctx)
    what = "loss"
    if finite:
        loss.backward()
        # The gradient norm, clipped where asked (an infinite limit leaves it as it is): a
        # finite loss can still give a non-finite gradient, which must never be applied.
        limit = cfg.train.clip_norm if cfg.train.clip_norm > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), limit)
        finite = bool(torch.isfinite(norm))
        what = "gradient (the loss was finite)"
    if not finite:
        ctrl_c.rewind_to = None  # skipped for good, as it would be without a Ctrl-C
        p.nonfinite_in_a_row += 1
        _say(f"warning: non-finite {what} at step {p.step + 1}; batch skipped", bar)
        if p.nonfinite_in_a_row >= cfg.train.max_nonfinite:
            bar.close()
            raise UserError(
                f"training stopped: {p.nonfinite_in_a_row} non-finite losses or gradients in a "
                f"row at step "
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


class _Estimate:
    """After a few measured steps, say what the budget will take on this machine, so a
    user on a slow one learns it in seconds (training time only; validation not counted)."""

    WARMUP, MEASURED = 2, 10  # steps skipped (first-call costs), then steps timed

    def __init__(self, run: Run) -> None:
        self.run = run
        self.first = run.progress.step
        self.started_at: float | None = None  # progress.elapsed after the warm-up steps

    def after_step(self, bar: tqdm) -> None:
        p, budget = self.run.progress, self.run.cfg.train
        done = p.step - self.first
        if done == self.WARMUP:
            self.started_at = p.elapsed
        if self.started_at is None or done != self.WARMUP + self.MEASURED:
            return
        per_step = (p.elapsed - self.started_at) / self.MEASURED
        message = f"estimate: {per_step:.2f} s a step on this machine"
        if budget.max_steps:
            left = max(0, budget.max_steps - p.step)
            seconds = left * per_step
            if budget.max_minutes:
                seconds = min(seconds, max(0.0, 60 * budget.max_minutes - p.elapsed))
            message += f", about {_clock(seconds)} for the {left:,} step{'s' * (left != 1)} left"
        elif budget.max_minutes:
            steps = max(0.0, 60 * budget.max_minutes - p.elapsed) / max(per_step, 1e-9)
            message += f", about {steps:,.0f} more steps in the time budget"
        _say(message + " (validation not counted)", bar)


def _clock(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes >= 60:
        return f"{minutes // 60} h {minutes % 60:02d} min"
    return f"{minutes} min" if minutes else f"{round(seconds)} s"


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
            source = ex["source"]
            if len(source) > SHOWN_SOURCE:  # an image's pixel rows: the start is enough
                source = f"{source[:SHOWN_SOURCE]}... ({len(source)} characters)"
            _say(f"  src: {source}\n  ref: {ex['reference']}\n  out: {ex['output']}", bar)
        write_json_atomic(run.run_dir / "last_validation.json", result)
    run.save(metric=metric_value)
    return result
