"""One training run's set-up, state and files: `Run` builds (or restores) everything the
loop needs, and saves it.

Set-up reads top to bottom: device and processes, run directory (refusing to overwrite a
run, or to resume one whose data or model differ), data (rank 0 prepares and caches it
first), seed, model, optimizer, schedule and batcher. `Run.save` writes a checkpoint with
every rank's batcher and random state, so `Run(..., resume=True)` continues exactly: same
weights, optimizer moments, learning rate, random state and next batch.
"""

from __future__ import annotations

import logging
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from attnmt.checkpoint import (
    Checkpoint,
    CheckpointManager,
    load_checkpoint,
)
from attnmt.config import Config, family, save_config, to_dict
from attnmt.data import TokenBatcher, load_vocab, prepare
from attnmt.devices import (
    NOTABLE_FLAGS,
    choose_precision,
    cpu_flags,
    cpu_model,
    pick_device,
)
from attnmt.errors import CheckpointError, UserError
from attnmt.models import build_model
from attnmt.rundir import RunDir
from attnmt.training import distributed
from attnmt.training.guided import Guide, read_guide
from attnmt.training.schedules import build_schedule


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


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _check_resumable(cfg: Config, saved: dict[str, Any]) -> None:
    """The data and model of a resumed run must be the ones its checkpoint was trained on."""
    now = to_dict(cfg)
    transformer = family(cfg.model.name).transformer
    for section in ("data", "model"):
        for key, value in saved.get(section, {}).items():
            if (section, key) == ("data", "cache_dir"):  # where the data is cached, not what
                continue
            if (section, key) == ("model", "tie_embeddings") and not transformer:
                continue  # no effect outside the Transformer (shipped RNN configs said true
                # until 11/2026)
            if now[section].get(key) != value:
                raise UserError(
                    f"cannot resume: {section}.{key} is {now[section].get(key)!r} but the run "
                    f"was trained with {value!r}; use the run's config.yaml or a new run_dir"
                )


def build_optimizer(cfg: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    """Adam(W), fused where every parameter is on a device with the fused kernel.

    Fused: one kernel updates every parameter, where the default on the CPU loops over them
    in Python with several kernels each. Measured on the RNNsearch's 8.5 M parameters
    (Intel Xeon, 2 threads): the optimizer step 17.5 ms unfused, 3.7 ms fused, 1.05x the
    training tokens/s (benchmarks/README.md). A run resumed from a checkpoint written
    unfused stays unfused (its saved parameter groups say so).
    """
    kind = torch.optim.AdamW if cfg.train.optimizer == "adamw" else torch.optim.Adam
    params = list(model.parameters())
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    return kind(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay, fused=fused or None)


class Run:
    """Holds what one training run needs; `train()` below drives it."""

    def __init__(self, cfg: Config, *, resume: bool, progress: bool):

        self.cfg = cfg
        self.device = pick_device(cfg.train.device)
        self.ctx = distributed.setup(self.device)
        if self.device.type == "cuda":
            self.device = torch.device("cuda", self.ctx.local_rank)
            torch.cuda.set_device(self.device)
        self.precision = choose_precision(cfg.train.precision, self.device, cfg.model.name)
        # Saved in every checkpoint: the figures of a run say on what they were measured.
        self.hardware = {
            "device": str(self.device),
            "precision": self.precision.name,
            "precision_reason": self.precision.reason,
            "cpu": cpu_model(),
            "cpu_flags": sorted(cpu_flags() & NOTABLE_FLAGS),
            "torch": torch.__version__,
            "processes": self.ctx.world_size,
        }
        self.run_dir = Path(cfg.train.run_dir)
        self.files = RunDir(self.run_dir)
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
        _setup_logging(self.files.log_path, self.ctx.is_main)

        # The first process of each machine prepares (and caches) the data; the others then
        # map the same cache. (Machines sharing one disk: the first to finish its cache
        # folder keeps it, `prepare` renames atomically; `attnmt data prepare` beforehand
        # saves the duplicate work.)
        first_here = self.ctx.local_rank == 0
        if first_here:
            self.data = prepare(cfg.data, progress=progress and self.ctx.is_main)
        distributed.barrier(self.ctx)
        if not first_here:
            self.data = prepare(cfg.data, progress=False)
        if not self.data.dev:
            raise UserError(
                f"the dev split of data.corpus '{cfg.data.corpus}' is empty; training validates "
                "on it: set data.dev_path (files, tsv) or data.dev_books (bible, alignments)"
            )
        vocab = self.data.vocab
        # Seeded after the data, so a run that prepares it and one that reads the cache
        # start from the same random state.
        # The first epoch's batches are planned (2 s for ten million pairs) while the model
        # and the optimizer are built (a second, most of it torch importing its compiler):
        # a thread of its own, joined before training. The plan draws from its own seeded
        # generator, never the global ones seeded here.
        with ThreadPoolExecutor(1) as planner:
            planned = planner.submit(
                TokenBatcher,
                self.data.train,
                batch_tokens=cfg.data.batch_tokens,
                shuffle=True,
                seed=cfg.train.seed,
                rank=self.ctx.rank,
                world_size=self.ctx.world_size,
            )
            seed_everything(cfg.train.seed + self.ctx.rank)
            self.model = build_model(cfg.model, vocab.src_vocab_size, vocab.tgt_vocab_size)
            self.model.to(self.device)
            self.optimizer = build_optimizer(cfg, self.model)
            self.schedule = build_schedule(
                cfg.train.schedule, self.optimizer, cfg.train.lr, cfg.train.warmup_steps
            )
            self.batcher = planned.result()
        self.guide = self._guide() if cfg.train.guided_alignment else None
        self.progress = Progress()
        if checkpoint is not None:
            self._restore(checkpoint)
        elif self.ctx.is_main:
            save_config(cfg, self.files.config_path)
            vocab.save(self.files.vocab_dir)
            # A fresh run: drop the log lines of an earlier attempt that saved no checkpoint.
            self.files.metrics_path.unlink(missing_ok=True)
        self.ddp = self.model
        if self.ctx.enabled:
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model)
        self.writer = self._tensorboard() if self.ctx.is_main else None

    def _guide(self) -> Guide:
        """Guided alignment's targets for the training pairs (`attnmt.training.guided`)."""
        links = read_guide(self.cfg.train.guided_alignment)
        guide = Guide(self.data.train, self.data.vocab, links)
        if not guide.guided:
            raise UserError(
                f"train.guided_alignment: none of the {len(self.data.train):,} training pairs "
                f"has links in {self.cfg.train.guided_alignment} (they are matched by id, e.g. "
                "'John 3:16'); align this corpus's text with `attnmt align`"
            )
        _say(
            f"guided alignment: {guide.guided:,} of {len(self.data.train):,} training pairs "
            f"have links (weight {self.cfg.train.guided_weight})"
            + (
                f"; {guide.bad_links} with links past their words ignored"
                if guide.bad_links
                else ""
            )
        )
        return guide

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

        state, rank = ck.state, self.ctx.rank
        saved_vocab = self.files.vocab_dir
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
            save_config(self.cfg, self.files.config_path)
            # Lines logged after the checkpoint (by a killed run) are logged again below.
            self.files.trim_metrics(ck.step)

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
            "hardware": self.hardware,
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
        self.files.append_metrics(event)
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


log = logging.getLogger("attnmt.training.loop")


def _setup_logging(log_file: Path, is_main: bool) -> None:
    _close_logging()
    log.propagate = False
    log.setLevel(logging.INFO)
    if not is_main:
        return
    handler = logging.FileHandler(log_file, encoding="utf-8")
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
