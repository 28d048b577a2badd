"""numpy's spelling of `attnmt.decoding.array_ops.ArrayOps`: the searches of
`attnmt.decoding.search` over the arrays an ONNX export's graphs give."""

from __future__ import annotations

import contextlib

import numpy as np

from attnmt.data.vocab import PAD
from attnmt.runtime.sessions import session_options


class NumpyOps:
    long, bool, float = np.int64, np.bool_, np.float32

    def no_grad(self) -> contextlib.nullcontext:
        return contextlib.nullcontext()

    def full(self, shape, value, dtype) -> np.ndarray:
        return np.full(shape, value, dtype=dtype)

    def tensor(self, data, dtype) -> np.ndarray:
        return np.asarray(data, dtype=dtype)

    def arange(self, n: int) -> np.ndarray:
        return np.arange(n)

    def repeat(self, x: np.ndarray, times: int) -> np.ndarray:
        return np.repeat(x, times)

    def topk(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k largest along the last axis, largest first. One partial sort over each row
        (argpartition), then a full sort of the k kept; rows indexed directly (a search
        calls this twice a step: `take_along_axis`'s generality costs more than the sort)."""
        shape, n = x.shape, x.shape[-1]
        rows = x.reshape(-1, n)
        if k < n:
            index = np.argpartition(rows, n - k, axis=1)[:, n - k :]
        else:
            index = np.broadcast_to(np.arange(n), rows.shape)
        line = np.arange(rows.shape[0])[:, None]
        values = rows[line, index]
        order = np.lexsort((index, -values), axis=1)  # ties: the lower index first
        values, index = values[line, order], index[line, order]
        out = (*shape[:-1], index.shape[1])
        return values.reshape(out), index.astype(np.int64, copy=False).reshape(out)

    def take(self, x: np.ndarray, index: np.ndarray) -> np.ndarray:
        return x[np.arange(x.shape[0])[:, None], index]

    def argmax(self, x: np.ndarray) -> np.ndarray:
        return x.argmax(axis=-1)

    def cat(self, xs: list[np.ndarray], axis: int) -> np.ndarray:
        return np.concatenate(xs, axis=axis)

    def stack(self, xs: list[np.ndarray], axis: int) -> np.ndarray:
        return np.stack(xs, axis=axis)

    def where(self, condition, x, y) -> np.ndarray:
        return np.where(condition, x, y)

    def astype(self, x: np.ndarray, dtype) -> np.ndarray:
        return np.asarray(x).astype(dtype)

    def copy(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, copy=True)

    def host(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float32, copy=False)

    def host_index(self, x: np.ndarray) -> np.ndarray:
        return x

    def pad(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """Id lists right-padded with PAD into (B, S) int64 ids and a bool mask (True = a
        real token), as `attnmt.data.batching.pad` does with torch."""
        width = max(1, max((len(r) for r in rows), default=1))
        ids = np.full((len(rows), width), PAD, dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
        lengths = np.array([len(r) for r in rows])
        return ids, np.arange(width)[None, :] < lengths[:, None]


# onnxruntime's TopK operator as a one-node ONNX graph (opset 20, IR 10), its bytes written
# out so that the runtime needs no `onnx` package to make it (tests/test_onnx_export.py
# rebuilds it with onnx.helper and compares).
TOPK_GRAPH = bytes.fromhex(
    "080a12066174746e6d743abb010a520a01780a016b120676616c7565731207696e64696365732204546f704b"
    "2a140a046178697318ffffffffffffffffff01a001022a0e0a076c6172676573741801a001022a0d0a06736f"
    "727465641801a001021204746f706b5a150a017812100a0e0801120a0a0312016e0a031201765a0f0a016b12"
    "0a0a08080712040a020801621a0a0676616c75657312100a0e0801120a0a0312016e0a0312016b621b0a0769"
    "6e646963657312100a0e0807120a0a0312016e0a0312016b42040a001014"
)


class OnnxRuntimeOps(NumpyOps):
    """`NumpyOps` with the large top-k done by onnxruntime's TopK (C++, a heap per row):
    a beam search over a batch ranks (sentences × beams) rows of the whole vocabulary every
    step, where numpy's argpartition was a fifth of the decoding (RNNsearch, beam 5, the
    test book in batches: 200 x 8,000 in 2.4 ms by numpy, 0.6 ms by onnxruntime, 1.1 ms by
    torch; Intel Xeon, 2 threads). Small inputs stay with numpy: one call to a session
    costs about as much as their partial sort (5 x 8,000: 52 us numpy, 34 us onnxruntime).
    Both give the same values, and the same indices but where equal values straddle the
    k-th place (which of them is kept; among log-probabilities that is -inf against -inf,
    which the search never extends)."""

    ORT_FROM = 20_000  # elements; either way gives the same answer, this only picks the faster

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self._session = None

    def topk(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if x.size < self.ORT_FROM or k > x.shape[-1]:
            return super().topk(x, k)
        if self._session is None:
            import onnxruntime as ort

            self._session = ort.InferenceSession(
                TOPK_GRAPH, session_options(self.threads), providers=["CPUExecutionProvider"]
            )
        rows = np.ascontiguousarray(x.reshape(-1, x.shape[-1]), dtype=np.float32)
        values, index = self._session.run(None, {"x": rows, "k": np.array([k], np.int64)})
        shape = (*x.shape[:-1], k)
        return values.reshape(shape), index.reshape(shape)


NUMPY = NumpyOps()
