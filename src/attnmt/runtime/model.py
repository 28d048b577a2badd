"""An exported model decoded without torch: its encoder and decoder-step graphs run by
onnxruntime, behind the step interface every model of `attnmt.models` keeps
(`attnmt.decoding.step_model.StepModel`), so the same search (`attnmt.decoding.search`)
drives both:

    model = OnnxModel("exports/rnnsearch-onnx")
    memory = model.encode(src, src_mask)             # numpy arrays in, `Fields` out
    state = model.init_state(memory)
    log_probs, state, weights = model.step_log_probs(prev, state, memory, need_weights=True)
    memory.select(rows); state.select(rows)          # beam reorder / expand

What the graphs take and give is in the export's `attnmt.json` (`layout`, written by
`attnmt.export.onnx`). Importing this module never imports torch.

Shapes legend: B batch, S source length, V target vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnmt.errors import UserError
from attnmt.rundir import EXPORT_INFO, RunDir
from attnmt.runtime.arrays import OnnxRuntimeOps
from attnmt.runtime.sessions import session_options

INFO_FILE = EXPORT_INFO
FORMAT = "onnx"


@dataclass
class Fields:
    """Named batch-first arrays (a memory or a state); `select` picks rows of every one.

    `initial`: the state fields the encoder gave (read by `init_state`, dropped by
    `select`: a search selects rows only after the state is made). `rows`: a state's
    pending selection, which the next step graph takes itself (`lazy`: a state selects
    lazily, a memory at once).
    """

    arrays: dict[str, np.ndarray]
    initial: dict[str, np.ndarray] | None = None
    rows: np.ndarray | None = None
    lazy: bool = False

    def select(self, indices: np.ndarray) -> Fields:
        indices = np.asarray(indices, dtype=np.int64)
        if self.lazy:
            rows = indices if self.rows is None else self.rows[indices]
            return Fields(self.arrays, rows=rows, lazy=True)
        return Fields({k: v[indices] for k, v in self.arrays.items()})

    def taken(self) -> dict[str, np.ndarray]:
        """The arrays with the pending selection made (numpy)."""
        if self.rows is None:
            return self.arrays
        return {k: v[self.rows] for k, v in self.arrays.items()}


def read_info(directory: str | Path) -> dict:
    """The export's `attnmt.json`; a `UserError` if `directory` is not an ONNX export."""
    path = Path(directory) / INFO_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"'{directory}' is not an attnmt export: it has no {INFO_FILE} (make one with "
            f"`attnmt export RUN --format onnx`)"
        ) from None
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read {path}: {err}") from None
    if info.get("format") != FORMAT:
        raise UserError(
            f"'{directory}' is a {info.get('format')!r} export; this needs an ONNX one "
            f"(`attnmt export RUN --format onnx`)"
        )
    return info


def is_export(directory: str | Path) -> bool:
    """Whether `directory` holds an ONNX export (an `attnmt.json` saying so)."""
    return RunDir(directory).export_format == FORMAT


class OnnxModel:
    """The step interface of `attnmt.models.base.Seq2Seq` (`StepModel`) over two
    onnxruntime sessions. `step_log_probs` gives what the step graph gives, log-probabilities
    (the graph ends in the log-softmax of `Seq2Seq.step_log_probs`)."""

    uses_attention: bool  # the export's layout says (an RNN encoder-decoder has none)
    reads_images = False  # only the text families export (attnmt.export.onnx)
    max_output_tokens: int | None = None  # only the source length limits an output

    def __init__(self, directory: str | Path, *, threads: int | None = None) -> None:
        import onnxruntime as ort

        # The search's tensor operations: numpy's (and onnxruntime's top-k) here, torch's for
        # our models (attnmt.decoding.array_ops).
        self.array_ops = OnnxRuntimeOps(threads)
        self.directory = Path(directory)
        self.info = info = read_info(directory)
        layout = info["layout"]
        self.family = layout["family"]
        self.memory_names: list[str] = layout["memory"]
        self.state_names: list[str] = layout["state"]
        self.zeros = {name: tuple(shape) for name, shape in layout["zeros"].items()}
        self.equal_lengths: bool = layout["equal_lengths"]
        self.uses_attention = layout["attention"] is not None
        self.src_axis = {  # memory fields along the source: {name: axis}
            name: int(axis)
            for name, axes in layout["axes"].items()
            for axis, dim in axes.items()
            if dim == "src_len"
        }
        self.parameter_count: int = info.get("parameters", 0)
        options = session_options(threads)
        graphs = info["graphs"]
        try:
            self.encoder = ort.InferenceSession(
                str(self.directory / graphs["encoder"]), options, providers=["CPUExecutionProvider"]
            )
            self.decoder = ort.InferenceSession(
                str(self.directory / graphs["step"]), options, providers=["CPUExecutionProvider"]
            )
        except Exception as err:  # onnxruntime raises its own exception types
            raise UserError(f"cannot load the graphs of '{directory}': {err}") from None
        self.encoder_outputs = [o.name for o in self.encoder.get_outputs()]
        self.step_inputs = [i.name for i in self.decoder.get_inputs()]
        self.step_outputs = [o.name for o in self.decoder.get_outputs()]
        self.rows_input = "rows" in self.step_inputs  # the step graph selects the state

    def encode(self, src: np.ndarray, src_mask: np.ndarray) -> Fields:
        """Shapes: src (B, S) int64, src_mask (B, S) bool -> memory fields, batch first."""
        if not self.equal_lengths:
            return self._encode(src, src_mask)
        # The graph reads whole rows (an LSTM's last memory cells are taken after the
        # last position): encode the sentences of each length together, without padding.
        lengths = np.maximum(src_mask.sum(axis=1), 1)
        arrays: dict[str, np.ndarray] = {}
        initial: dict[str, np.ndarray] = {}
        for length in np.unique(lengths):
            rows = np.flatnonzero(lengths == length)
            part = self._encode(src[rows, :length], src_mask[rows, :length])
            for target, values in ((arrays, part.arrays), (initial, part.initial)):
                for name, value in values.items():
                    if name == "mask":
                        continue
                    if name not in target:  # zeros at the padding, as PyTorch's encoder
                        shape = [src.shape[0], *value.shape[1:]]
                        if name in self.src_axis:
                            shape[self.src_axis[name]] = src.shape[1]
                        target[name] = np.zeros(shape, dtype=value.dtype)
                    if name in self.src_axis:
                        index = [rows] + [slice(None)] * (value.ndim - 1)
                        index[self.src_axis[name]] = slice(0, value.shape[self.src_axis[name]])
                        target[name][tuple(index)] = value
                    else:
                        target[name][rows] = value
        arrays["mask"] = src_mask
        return Fields(arrays, initial)

    def _encode(self, src: np.ndarray, src_mask: np.ndarray) -> Fields:
        outputs = self.encoder.run(None, {"src": src, "src_mask": src_mask})
        arrays, initial = {"mask": src_mask}, {}
        for name, value in zip(self.encoder_outputs, outputs, strict=True):
            kind, field = name.split(".", 1)
            (arrays if kind == "memory" else initial)[field] = value
        return Fields(arrays, initial)

    def init_state(self, memory: Fields) -> Fields:
        batch = memory.arrays["mask"].shape[0]
        arrays = dict(memory.initial or {})
        for name, shape in self.zeros.items():
            arrays[name] = np.zeros((batch, *shape), dtype=np.float32)
        return Fields({name: arrays[name] for name in self.state_names}, lazy=self.rows_input)

    def step_log_probs(
        self, prev: np.ndarray, state: Fields, memory: Fields, *, need_weights: bool = False
    ) -> tuple[np.ndarray, Fields, np.ndarray | None]:
        """Shapes: prev (B,) -> log_probs (B, V), state, weights (B, S) or (B, L, H, S)."""
        feed = {"prev": prev, "src_mask": memory.arrays["mask"]}
        for name in self.memory_names:
            feed[f"memory.{name}"] = memory.arrays[name]
        arrays = state.arrays
        if self.rows_input:
            feed["rows"] = state.rows if state.rows is not None else np.arange(prev.shape[0])
        else:
            arrays = state.taken()
        for name in self.state_names:
            feed[f"state.{name}"] = arrays[name]
        outputs = dict(zip(self.step_outputs, self.decoder.run(None, feed), strict=True))
        new_state = Fields(
            {name: outputs[f"new_state.{name}"] for name in self.state_names},
            lazy=self.rows_input,
        )
        weights = outputs.get("attention") if need_weights else None
        return outputs["log_probs"].astype(np.float32, copy=False), new_state, weights
