"""numpy's spelling of `attnmt.inference.array_ops.ArrayOps`: the searches of
`attnmt.inference.search` over the arrays an ONNX export's graphs give."""

from __future__ import annotations

import contextlib

import numpy as np

from attnmt.data.vocab import PAD


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

    def log_softmax(self, x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float32, copy=False)
        top = x.max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        shifted = x - top
        with np.errstate(divide="ignore"):  # a row of -inf: log(0) = -inf, as torch gives
            return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))

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
        order = np.argsort(-values, axis=1, kind="stable")
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


class LogProbOps(NumpyOps):
    """For a model whose step gives log-probabilities already (`OnnxModel`: the graph ends
    in a log-softmax): the search's own log-softmax would only renormalise them."""

    def log_softmax(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float32, copy=False)


NUMPY = NumpyOps()
LOG_PROBS = LogProbOps()
