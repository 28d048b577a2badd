"""The tensor operations the searches use, behind one small interface, so that the same
search code (`attnmt.decoding.search`, `hypotheses`, `search_tree`) decodes with torch
tensors (our models) and with numpy arrays (`attnmt.runtime`, an ONNX export without
torch). Only what the two libraries spell differently goes through it; indexing,
arithmetic, comparisons, `.shape`, `.reshape`, `.sum(axis)`, `.clip` and `.tolist()` are
written directly, as both libraries share them.

A model gives its own as `array_ops` (`attnmt.decoding.step_model.StepModel`): torch's on
its device for our models (`attnmt.models.torch_ops`), numpy's for an export
(`attnmt.runtime.arrays`). This module imports neither library.
"""

from __future__ import annotations

from typing import Any, Protocol


class ArrayOps(Protocol):
    """What a search needs beyond the operations numpy and torch share.

    Dtypes are the library's own: `long` (int64), `bool`, `float` (float32). "Last axis"
    is the vocabulary in a search; `topk` returns the values in decreasing order.
    """

    long: Any
    bool: Any
    float: Any

    def no_grad(self) -> Any: ...
    def full(self, shape: tuple[int, ...], value: Any, dtype: Any) -> Any: ...
    def tensor(self, data: Any, dtype: Any) -> Any: ...
    def arange(self, n: int) -> Any: ...
    def repeat(self, x: Any, times: int) -> Any: ...  # each element `times` times in a row
    def topk(self, x: Any, k: int) -> tuple[Any, Any]: ...  # over the last axis
    def take(self, x: Any, index: Any) -> Any: ...  # x[i, index[i, j]] (2-D)
    def argmax(self, x: Any) -> Any: ...  # over the last axis
    def cat(self, xs: list[Any], axis: int) -> Any: ...
    def stack(self, xs: list[Any], axis: int) -> Any: ...
    def where(self, condition: Any, x: Any, y: Any) -> Any: ...
    def astype(self, x: Any, dtype: Any) -> Any: ...
    def copy(self, x: Any) -> Any: ...
    def host(self, x: Any) -> Any: ...  # float32 in the host's memory (weights kept)
    def host_index(self, x: Any) -> Any: ...  # an index for host arrays
    def pad(self, rows: Any) -> tuple[Any, Any]: ...  # id lists -> ids (B, S), mask (B, S)
