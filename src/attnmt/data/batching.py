"""Batches by token budget, bucketed by length, shuffled deterministically, resumable.

A batch's *cost* is what the model actually holds in memory for it:

    cost = B * max(S, T)     # B examples, S padded source width, T padded target width

where S and T count the EOS/BOS that `collate` adds (`len(ids) + 1`). Every batch keeps
`cost <= batch_tokens`, except that an example longer than the whole budget goes alone in
its own batch (it is never dropped).

How an epoch's batches are chosen (bucketing by length, the shuffle, its seed) is in
`attnmt.data.buckets`: a pure function of the lengths arrays, the budget, the seed and the
epoch, so the same on every machine, rank and resume.

    batcher = TokenBatcher(train, batch_tokens=4096, seed=1)   # a TokenStore or Examples
    batch = next(batcher)               # an endless iterator over epochs
    state = batcher.state_dict()        # plain ints, JSON-ready
    fresh = TokenBatcher(train, batch_tokens=4096, seed=1)
    fresh.load_state_dict(state)        # continues exactly where `batcher` stands

For evaluation, `eval_batches` makes one finite, unshuffled pass with the same packing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnmt.data.buckets import Pairs, Plan, check_budget, is_int, lengths_of, plan_epoch
from attnmt.data.store import TokenStore
from attnmt.data.types import Batch, Example
from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.devices import release_freed_memory

# Planning an epoch of this many pairs or more frees enough memory to hand back at once.
TRIM_AFTER = 100_000
_STATE_KEYS = ("epoch", "position", "seed", "batch_tokens", "world_size", "rank", "examples")


# --------------------------------------------------------------------------------------
# Padding: id lists into a Batch of tensors
# --------------------------------------------------------------------------------------


def collate(examples: list[Example], indices: list[int] | None = None) -> Batch:
    """Pad a list of examples into a `Batch` (see its docstring for the layout)."""
    rows = list(indices) if indices is not None else list(range(len(examples)))
    return batch_of_ids([ex.src_ids for ex in examples], [ex.tgt_ids for ex in examples], rows)


def batch_of_ids(
    sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], indices: list[int]
) -> Batch:
    """A `Batch` from id sequences (lists or numpy arrays, without BOS/EOS): `src` gets EOS,
    `tgt_in` BOS, `tgt_out` EOS, each padded with PAD to its longest row."""
    count = len(sources)
    src_len = np.fromiter(map(len, sources), np.int64, count)
    tgt_len = np.fromiter(map(len, targets), np.int64, count)
    src = np.full((count, int(src_len.max(initial=0)) + 1), PAD, dtype=np.int64)
    tgt_in = np.full((count, int(tgt_len.max(initial=0)) + 1), PAD, dtype=np.int64)
    tgt_out = tgt_in.copy()
    for row, (s, t) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(s)] = s
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
    rows = np.arange(count)
    src[rows, src_len] = EOS
    tgt_in[:, 0] = BOS
    tgt_out[rows, tgt_len] = EOS
    src_mask = np.arange(src.shape[1])[None, :] <= src_len[:, None]  # (B, S)
    tgt_mask = np.arange(tgt_in.shape[1])[None, :] <= tgt_len[:, None]  # (B, T)
    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(src_mask),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
        torch.from_numpy(tgt_mask),
        list(indices),
    )


def pad(rows: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """Right-pad id lists with PAD into a (B, width) tensor and its mask (True = real token).

    Shapes:
        -> ids (B, width), mask (B, width); width = the longest row (at least 1)
    """
    width = max(1, max((len(r) for r in rows), default=1))
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    lengths = torch.tensor([len(r) for r in rows])
    mask = torch.arange(width)[None, :] < lengths[:, None]  # (B, width)
    return ids, mask


def torch_argsort(keys: np.ndarray) -> np.ndarray:
    """`buckets.stable_argsort` on torch's multi-threaded sort: the same order (a stable
    sort's is unique), 4.7x faster on ten million keys on the 2-core Zen 4 (0.3 s against
    1.4 s, benchmarks/README.md), so training plans its epochs with it."""
    return torch.from_numpy(keys).sort(stable=True).indices.numpy()


def _collate(pairs: Pairs, indices: np.ndarray) -> Batch:
    rows = indices.tolist()
    if isinstance(pairs, TokenStore):
        got = [pairs.pair(i) for i in rows]
        return batch_of_ids([s for s, _ in got], [t for _, t in got], rows)
    return batch_of_ids([pairs[i].src_ids for i in rows], [pairs[i].tgt_ids for i in rows], rows)


# --------------------------------------------------------------------------------------
# Training: an endless, sharded, resumable iterator
# --------------------------------------------------------------------------------------


class TokenBatcher:
    """An endless iterator of training `Batch`es over epochs, bucketed by length.

    Args:
        pairs: the training pairs: a `TokenStore` (memory-mapped, any size) or a list of
            `Example`s (`src_ids`/`tgt_ids` filled, without BOS/EOS).
        batch_tokens: the budget `len(batch) * max(S, T)` of every batch (see the module
            docstring); a single example over the budget gets a batch of its own.
        shuffle: tie-break lengths randomly and shuffle the batch order each epoch; if
            False, every epoch serves the same batches, shortest first.
        seed: with the epoch number, fixes an epoch's batches; every rank must use the same.
        rank, world_size: this process's share. Each epoch's batch list is truncated to a
            multiple of `world_size` and rank r serves `batches[r::world_size]`, so shares
            are disjoint and equally long. The few dropped batches (fewer than
            `world_size`) are the last ones of the shuffled order, so they differ from epoch
            to epoch and no example is left out for good.

    Attributes:
        epoch: the 0-based epoch the *next* batch belongs to. It turns from e to e + 1 at
            the moment the last batch of epoch e is returned, so after the first full pass
            `epoch == 1` (the trainer's `epoch >= max_epochs` stops right there).
        position: how many batches of the current epoch (this rank's share) were served.

    Each yielded `Batch` has `indices` into `pairs`.

    Shapes:
        batch.src, batch.src_mask: (B, S); batch.tgt_in, batch.tgt_out, batch.tgt_mask: (B, T)
    """

    def __init__(
        self,
        pairs: Pairs,
        *,
        batch_tokens: int,
        shuffle: bool = True,
        seed: int = 1,
        rank: int = 0,
        world_size: int = 1,
    ):
        check_budget(batch_tokens)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank} of {world_size}")
        if not len(pairs):
            raise ValueError("TokenBatcher needs at least one example; the training set is empty")
        self.pairs = pairs
        self.batch_tokens = batch_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.position = 0
        self._shard: Plan | None = None
        self._current_shard()  # fail now, not at the first step, if the shares are empty

    def _plan_shard(self, epoch: int) -> Plan:
        # The lengths are read anew each epoch: a store's stay on disk (page cache, shared
        # by every process), not as a copy in this process.
        src_len, tgt_len = lengths_of(self.pairs)
        plan = plan_epoch(
            src_len,
            tgt_len,
            self.batch_tokens,
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=epoch,
            argsort=torch_argsort,
        )
        usable = len(plan) - len(plan) % self.world_size
        if usable == 0:
            raise ValueError(
                f"epoch {epoch} has {len(plan)} batch(es) for {self.world_size} processes; "
                "lower batch_tokens or use fewer processes"
            )
        plan.serve = plan.serve[self.rank : usable : self.world_size]
        if len(plan.order) >= TRIM_AFTER:  # the plan's buffers, freed, go back to the kernel
            release_freed_memory()
        return plan

    def shard(self, epoch: int) -> list[list[int]]:
        """This rank's batches (lists of example indices) of `epoch`, in serving order."""
        return self._plan_shard(epoch).lists()

    def _current_shard(self) -> Plan:
        if self._shard is None:
            self._shard = self._plan_shard(self.epoch)
        return self._shard

    @property
    def num_batches(self) -> int:
        """Batches this rank serves in the current epoch (may vary slightly by epoch)."""
        return len(self._current_shard())

    def __iter__(self) -> TokenBatcher:
        return self

    def __next__(self) -> Batch:
        shard = self._current_shard()
        indices = shard.batch(self.position)
        self.position += 1
        if self.position == len(shard):  # the last batch of this epoch: move on now
            self.epoch, self.position, self._shard = self.epoch + 1, 0, None
        return _collate(self.pairs, indices)

    def state_dict(self) -> dict[str, int]:
        """Where the iterator stands (plain ints), plus what it must be rebuilt with."""
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "batch_tokens": self.batch_tokens,
            "world_size": self.world_size,
            "rank": self.rank,
            "examples": len(self.pairs),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state`: the next batches are those the saved batcher would serve.

        Raises ValueError if `state` has other keys than `state_dict()` writes, non-int
        values, a position outside the epoch, or was saved by a batcher built differently
        (another seed, budget, number of examples, rank or world size).
        """
        if not isinstance(state, dict) or set(state) != set(_STATE_KEYS):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"batcher state must have the keys {list(_STATE_KEYS)}, got {got}")
        bad = [k for k in _STATE_KEYS if not is_int(state[k])]
        if bad:
            raise ValueError(f"batcher state values must be ints; not so for {bad}")
        mine = self.state_dict()
        differ = [k for k in _STATE_KEYS[2:] if state[k] != mine[k]]
        if differ:
            saved = ", ".join(f"{k}={state[k]} (now {mine[k]})" for k in differ)
            raise ValueError(f"batcher state was saved with a different setup: {saved}")
        if state["epoch"] < 0:
            raise ValueError(f"batcher state has a negative epoch: {state['epoch']}")
        shard = self._plan_shard(state["epoch"])
        if not 0 <= state["position"] < len(shard):
            raise ValueError(
                f"batcher state position {state['position']} is outside epoch "
                f"{state['epoch']}, which has {len(shard)} batches for this rank"
            )
        self.epoch, self.position, self._shard = state["epoch"], state["position"], shard


# --------------------------------------------------------------------------------------
# Evaluation, decoding and statistics
# --------------------------------------------------------------------------------------


def eval_batches(examples: Pairs, *, batch_tokens: int) -> Iterator[Batch]:
    """One finite pass over `examples`, sorted by length, not shuffled.

    Every example appears exactly once; `batch.indices` are positions in `examples`, so
    outputs can be put back in the original order. The budget is the same as in training.

    Shapes:
        batch.src, batch.src_mask: (B, S); batch.tgt_in, batch.tgt_out, batch.tgt_mask: (B, T)
    """
    check_budget(batch_tokens)
    if not len(examples):
        return
    src_len, tgt_len = lengths_of(examples)
    plan = plan_epoch(
        src_len, tgt_len, batch_tokens, shuffle=False, seed=0, epoch=0, argsort=torch_argsort
    )
    for k in range(len(plan)):
        yield _collate(examples, plan.batch(k))


def pad_batch(sequences: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Id lists as a padded (B, S) tensor and its mask (True = real token) on `device`."""
    ids, mask = pad(sequences)
    return ids.to(device), mask.to(device)
