"""What a search asks of a model: `StepModel`. Our torch models (`attnmt.models.base
.Seq2Seq` and every family, the `Ensemble`) and an ONNX export (`attnmt.runtime.model
.OnnxModel`) all keep it, so one search drives them all:

    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    log_probs, state, weights = model.step_log_probs(prev, state, memory, need_weights=...)
    memory.select(rows); state.select(rows)              # beam reorder / expand
    ops = model.array_ops                                # torch's or numpy's operations

`step_log_probs` gives log-probabilities (float32) on every back-end: a torch model's
log-softmax of its logits, the export's graph ending in that same log-softmax. This module
imports neither torch nor numpy; nothing here names a back-end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from attnmt.decoding.array_ops import ArrayOps


@runtime_checkable
class StepModel(Protocol):
    """An encoder and a decoder step, as the searches (`attnmt.decoding.search`) read them.

    `uses_attention`: whether a step can ever return weights (an RNN encoder–decoder's
    cannot); `reads_images`: whether a source is an image's pixel tokens, read whole (the
    faces refuse text operations on it); `max_output_tokens`: a cap on every output, EOS
    included, whatever the source length (None: the source length alone limits it);
    `array_ops`: the operations on the model's arrays (torch's on its device, or numpy's).

    Shapes:
        encode: src, src_mask (B, S) -> a memory with `select(rows)`;
        step_log_probs: prev (B,) -> log-probabilities (B, V) float32, the new state,
        weights (B, S) RNN, (B, L, H, S) Transformer, (B, M, S) ensemble, or None.
    """

    uses_attention: bool
    reads_images: bool
    max_output_tokens: int | None

    @property
    def array_ops(self) -> ArrayOps: ...

    def encode(self, src: Any, src_mask: Any) -> Any: ...

    def init_state(self, memory: Any) -> Any: ...

    def step_log_probs(
        self, prev_tokens: Any, state: Any, memory: Any, *, need_weights: bool = False
    ) -> tuple[Any, Any, Any]: ...


F = TypeVar("F", bound=Callable[..., Any])


def without_grad(fn: F) -> F:
    """Run a search `fn(model, src, ...)` without recording gradients (torch's `no_grad`;
    nothing for numpy)."""

    @functools.wraps(fn)
    def run(model: StepModel, src: Any, *args: Any, **kwargs: Any) -> Any:
        with model.array_ops.no_grad():
            return fn(model, src, *args, **kwargs)

    return run  # type: ignore[return-value]
