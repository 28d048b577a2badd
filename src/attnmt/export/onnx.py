"""Exporting a trained text run to ONNX: an encoder graph and a decoder-step graph of flat,
named tensors (`attnmt.export.onnx_graphs`), verified against PyTorch before anything
is written, decoded without torch by `attnmt.runtime`.

    loaded = load_run("runs/quickstart")
    export_onnx(loaded, "exports/quickstart-onnx", quantize="int8")

The directory holds `encoder.onnx`, `step.onnx`, the run's vocabulary (`vocab/`) and
`attnmt.json`: where the run came from, how to tokenise, the graphs' layout (which memory
and state tensors they take and give, their free axes), how they were verified and the
decoding options of the run.

Exported with `torch.onnx.export(dynamo=True)` (torch.export, then onnxscript), batch and
lengths free. The exporter's traps, each guarded here: an example dimension of 1 (or 0)
is fixed by the tracer, so the examples have 3 sentences of 7 or fewer tokens and a
3-token target; a graph's declared output shapes can keep the example's sizes while its
values are right, so the output shapes are rewritten from the layout and the intermediate
shape annotations dropped; a fully masked row stays finite (the masks use the dtype's
finite minimum, never -inf). The verification then runs the written graphs by
onnxruntime at another batch and other lengths, next to the eager model, for
`VERIFY_STEPS` decoder steps along the model's own greedy output, and refuses to write
the export if they differ by more than `TOLERANCE`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxscript
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.torch import load_file, save_file
from torch.export import Dim

from attnmt.config import ModelConfig, to_dict
from attnmt.config.families import TEXT_MODELS
from attnmt.data.batching import pad
from attnmt.data.vocab import BOS, EOS
from attnmt.decoding.runs import LoadedRun
from attnmt.errors import UserError
from attnmt.export.directory import building, provenance, vocab_info
from attnmt.export.onnx_graphs import (
    BATCH,
    SRC_LEN,
    STATE_BATCH,
    TGT_LEN,
    EncoderGraph,
    FlatLayout,
    StepGraph,
    flat_layout,
    step_inputs,
)
from attnmt.models import build_model
from attnmt.runtime.model import INFO_FILE, OnnxModel

QUANTIZE = ("int8",)
OPSET = 20
# The largest differences the written graphs may show against the eager model: float32
# sums in another order give ~1e-6 relative; log-probabilities reach -30, attention is
# in [0, 1]. What was measured is written in attnmt.json.
TOLERANCE = {"log_probs": 1e-3, "attention": 1e-4}
VERIFY_STEPS = 8
ENCODER_FILE, STEP_FILE = "encoder.onnx", "step.onnx"


def _dims() -> dict[str, Dim]:
    return {
        BATCH: Dim(BATCH, min=1, max=65536),
        SRC_LEN: Dim(SRC_LEN, min=1, max=65536),
        TGT_LEN: Dim(TGT_LEN, min=0, max=65536),
        STATE_BATCH: Dim(STATE_BATCH, min=1, max=65536),
    }


def _state_in(axes: dict[int, str]) -> dict[int, str]:
    """A state field's axes as the step reads it: its rows are the previous step's."""
    return {**axes, 0: STATE_BATCH}


def _spec(axes: dict[int, str], dims: dict[str, Dim]) -> dict[int, Dim]:
    return {axis: dims[name] for axis, name in axes.items()}


def _example(size: int, lengths: list[int], seed: int) -> tuple[torch.Tensor, ...]:
    """A padded batch of source ids below `size` (real ids, not specials), EOS at each end."""
    generator = np.random.default_rng(seed)
    rows = [[*(int(i) for i in generator.integers(4, size, n - 1)), EOS] for n in lengths]
    return pad(rows)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's chatter (torchvision's operators not found, its own deprecations,
    axis renaming notes) kept from the user: the graphs are checked by their numbers."""
    loggers = [logging.getLogger("torch.onnx"), logging.getLogger()]  # quantize: the root's
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _export(module, args, dynamic_shapes, input_names, output_names, path: Path) -> None:
    with _quiet():
        program = torch.onnx.export(
            module,
            args,
            dynamic_shapes=dynamic_shapes,
            input_names=input_names,
            output_names=output_names,
            opset_version=OPSET,
            dynamo=True,
            external_data=False,
            verbose=False,
        )
    proto = program.model_proto
    _free_output_axes(proto)
    onnx.save(proto, str(path))


def _free_output_axes(proto) -> None:
    """Drop the intermediate shape annotations (they can keep the example's sizes) and
    declare every output's free axes by name (see the module's docstring)."""
    del proto.graph.value_info[:]
    inputs = {i.name: i for i in proto.graph.input}
    free = {}  # an input dimension's name, for the same size among the outputs
    for value in inputs.values():
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                free[dim.dim_param] = dim.dim_param
    for output in proto.graph.output:
        for dim in output.type.tensor_type.shape.dim:
            if dim.dim_param and dim.dim_param not in free:
                dim.dim_param = ""  # an exporter's own name: still free, unnamed


def _rename_axes(proto, names: dict[str, dict[int, str]]) -> None:
    for value in [*proto.graph.input, *proto.graph.output]:
        axes = names.get(value.name, {})
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if axis in axes:
                dim.Clear()
                dim.dim_param = axes[axis]


def export_graphs(model: torch.nn.Module, cfg: Any, vocab_sizes: tuple[int, int], out: Path):
    """Write `encoder.onnx` and `step.onnx` of `model` (built from the model config `cfg`)
    into `out`, in a Python process of their own: torch.export's loop for a GRU over a
    free length (torch/export/_patches.py) keeps the length free in a process's first
    export only; a second export of a GRU encoder in the same process (even of the same
    model, even after `torch._dynamo.reset()`) fixes the source length at the example's,
    and its graph refuses every other length (torch 2.13)."""
    job = {"config": dataclasses.asdict(cfg), "vocab_sizes": list(vocab_sizes), "out": str(out)}
    (out / "job.json").write_text(json.dumps(job), encoding="utf-8")
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}  # tied: copies
    save_file(state, str(out / "job.safetensors"))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "attnmt.export.onnx", str(out / "job.json")],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        (out / "job.json").unlink(missing_ok=True)
        (out / "job.safetensors").unlink(missing_ok=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise UserError(f"exporting the graphs failed: {last}")


def _export_job(job_file: str) -> None:
    """The exporting process: the model rebuilt from the job's config and weights."""
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    cfg = ModelConfig(**job["config"])
    model = build_model(cfg, *job["vocab_sizes"]).eval()
    model.load_state_dict(load_file(str(Path(job_file).with_suffix(".safetensors"))))
    layout = flat_layout(model, cfg.name, _example(job["vocab_sizes"][0], [7, 4, 6], seed=1))
    _export_graphs(model, layout, job["vocab_sizes"][0], job["out"])


def _export_graphs(model: torch.nn.Module, layout: FlatLayout, vocab_size: int, out: str):
    out = Path(out)
    dims = _dims()
    src, mask = _example(vocab_size, [7, 4, 6], seed=1)
    both = {0: dims[BATCH], 1: dims[SRC_LEN]}
    encoder = EncoderGraph(model, layout)
    with torch.no_grad():
        _export(
            encoder,
            (src, mask),
            {"src": both, "src_mask": both},
            ["src", "src_mask"],
            encoder.output_names(),
            out / ENCODER_FILE,
        )
        step = StepGraph(model, layout)
        prev, step_mask, rows, memory, state = step_inputs(model, layout, src, mask, steps=3)
        shapes = {
            "prev": {0: dims[BATCH]},
            "src_mask": both,
            "rows": {0: dims[BATCH]},
            "memory": [_spec(layout.axes[n], dims) for n in layout.memory],
            "state": [_spec(_state_in(layout.axes[n]), dims) for n in layout.state],
        }
        _export(
            step,
            (prev, step_mask, rows, memory, state),
            shapes,
            step.input_names(),
            step.output_names(),
            out / STEP_FILE,
        )
    # Name every free axis as the layout does (an output's batch is the inputs' batch).
    names = {"src": {0: BATCH, 1: SRC_LEN}, "src_mask": {0: BATCH, 1: SRC_LEN}, "prev": {0: BATCH}}
    names["rows"] = {0: BATCH}
    for n in layout.memory:
        names[f"memory.{n}"] = layout.axes[n]
    for n in layout.state:
        names[f"state.{n}"] = _state_in(layout.axes[n])
        names[f"new_state.{n}"] = layout.axes[n]
    names["log_probs"] = {0: BATCH}
    if layout.attention:
        names["attention"] = {0: BATCH, len(layout.attention) - 1: SRC_LEN}
    for file in (ENCODER_FILE, STEP_FILE):
        proto = onnx.load(str(out / file))
        _rename_axes(proto, names)
        onnx.checker.check_model(proto)
        onnx.save(proto, str(out / file))


def verify(model: torch.nn.Module, directory: Path, loaded: LoadedRun) -> dict:
    """Run the written graphs (attnmt.runtime) beside the eager model at another batch and
    other lengths: the encoder, then `VERIFY_STEPS` steps along the eager model's greedy
    output. Returns the largest differences of log-probabilities and attention."""
    onnx_model = OnnxModel(directory, threads=1)
    src, mask = _example(loaded.vocab.src_vocab_size, [9, 2, 12, 5, 12], seed=2)
    worst = {"log_probs": 0.0, "attention": 0.0}
    with torch.no_grad():
        memory = model.encode(src, mask)
        state = model.init_state(memory)
        if "step" in onnx_model.zeros:  # local-m's step count as a tensor, as exported
            state.step = torch.zeros(src.shape[0], 1)
        flat_memory = onnx_model.encode(src.numpy(), mask.numpy())
        flat_state = onnx_model.init_state(flat_memory)
        prev = torch.full((src.shape[0],), BOS, dtype=torch.long)
        for _ in range(VERIFY_STEPS):
            logits, state, weights = model.step(prev, state, memory, need_weights=True)
            expected = torch.log_softmax(logits.float(), dim=-1).numpy()
            got, flat_state, attention = onnx_model.step_log_probs(
                prev.numpy(), flat_state, flat_memory, need_weights=True
            )
            worst["log_probs"] = max(worst["log_probs"], float(np.abs(got - expected).max()))
            if weights is not None:
                diff = float(np.abs(attention - weights.float().numpy()).max())
                worst["attention"] = max(worst["attention"], diff)
            prev = logits.argmax(-1)
    return worst


def quantize_int8(directory: Path) -> None:
    """onnxruntime's dynamic quantisation of both graphs' matrix products (weights int8,
    activations quantised on the fly), in place."""
    for file in (ENCODER_FILE, STEP_FILE):
        path = directory / file
        graph = onnx.load(str(path))
        if untie_lookups(graph):
            onnx.save(graph, str(path))
        tmp = path.with_suffix(".int8.onnx")
        with _quiet():  # its advice to pre-process the graphs first (the int8 check measures)
            quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8)
        tmp.replace(path)


def untie_lookups(graph: onnx.ModelProto) -> list[str]:
    """Give each weight that is both looked up (`Gather`: an embedding) and multiplied (a
    tied output layer: the Transformer's target embedding is its generator) a copy of its
    own for the lookup, in place; the names untied. onnxruntime's dynamic quantiser
    rewrites a matrix product's weight under its own name (a `Gemm` with transB, stored
    transposed), and a lookup of the same name then reads the rewritten matrix: the graph
    no longer loads ("Incompatible dimensions"; the reference Transformer, 1.31)."""
    initializers = {init.name: init for init in graph.graph.initializer}
    looked_up = {n.input[0] for n in graph.graph.node if n.op_type == "Gather"}
    multiplied = {
        name for n in graph.graph.node if n.op_type in ("Gemm", "MatMul") for name in n.input
    }
    untied = sorted(name for name in looked_up & multiplied if name in initializers)
    for name in untied:
        copy = onnx.TensorProto()
        copy.CopyFrom(initializers[name])
        copy.name = f"{name}.lookup"
        graph.graph.initializer.append(copy)
        for node in graph.graph.node:
            if node.op_type == "Gather" and node.input[0] == name:
                node.input[0] = copy.name
    return untied


def export_onnx(
    loaded: LoadedRun, out: str | Path, *, quantize: str | None = None, force: bool = False
) -> Path:
    """Write `loaded` as an ONNX export directory `out` (built beside it, renamed into
    place: a failure leaves nothing; a non-empty `out` is replaced only with `force`).

    Raises:
        UserError: an image model, an unknown quantisation, `out` in the way, or graphs
        that do not reproduce the model within `TOLERANCE`.
    """
    name = loaded.cfg.model.name
    if loaded.model.reads_images:
        raise UserError(
            f"'{loaded.run_dir}' is an image model ({name}); ONNX export covers the text "
            f"models ({', '.join(TEXT_MODELS)})"
        )
    if quantize is not None and quantize not in QUANTIZE:
        raise UserError(f"unknown quantization '{quantize}'; choose one of {', '.join(QUANTIZE)}")
    with building(out, force=force) as tmp:
        model = loaded.model.float().eval().cpu()
        vocab_size = loaded.vocab.src_vocab_size
        layout = flat_layout(model, name, _example(vocab_size, [7, 4, 6], seed=1))
        began = time.perf_counter()
        sizes = (vocab_size, loaded.vocab.tgt_vocab_size)
        export_graphs(model, loaded.cfg.model, sizes, tmp)
        seconds = time.perf_counter() - began
        loaded.vocab.save(tmp / "vocab")
        info = export_info(loaded, layout, quantize, seconds)
        _write_info(tmp, info)
        info["verified"] = measured = verify(model, tmp, loaded)
        failed = {k: v for k, v in measured.items() if v > TOLERANCE[k]}
        if failed:
            what = ", ".join(f"{k} by {v:.2e} (> {TOLERANCE[k]:.0e})" for k, v in failed.items())
            raise UserError(
                f"the exported graphs do not reproduce the model: they differ in {what}; "
                f"nothing was written (please report it with the run's config)"
            )
        if quantize == "int8":
            quantize_int8(tmp)
            info["int8_differences"] = verify(model, tmp, loaded)
        info["files"] = {f: (tmp / f).stat().st_size for f in (ENCODER_FILE, STEP_FILE)}
        _write_info(tmp, info)
    return Path(out)


def _write_info(directory: Path, info: dict) -> None:
    text = json.dumps(info, indent=2) + "\n"
    (directory / INFO_FILE).write_text(text, encoding="utf-8")


def export_info(
    loaded: LoadedRun, layout: FlatLayout, quantize: str | None, seconds: float
) -> dict:
    """What `attnmt.runtime` needs beside the graphs, and where they came from."""
    return {
        **provenance(loaded, "onnx"),
        "run_config": to_dict(loaded.cfg),  # the run's config.yaml: languages, limits...
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "quantization": quantize or "float32",
        "graphs": {"encoder": ENCODER_FILE, "step": STEP_FILE},
        "layout": layout.to_json(),
        "tolerance": TOLERANCE,
        "exported_with": {
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "onnxscript": onnxscript.__version__,
            "opset": OPSET,
            "seconds": round(seconds, 1),
        },
        "vocab": vocab_info(loaded),
    }


def default_out(loaded: LoadedRun, quantize: str | None) -> Path:
    """RUN/onnx, or RUN/onnx-int8 for a quantised export."""
    return loaded.run_dir / ("onnx" if quantize is None else f"onnx-{quantize}")


def read_written(directory: str | Path) -> dict:
    """The `attnmt.json` an export wrote."""
    return json.loads((Path(directory) / INFO_FILE).read_text(encoding="utf-8"))


if __name__ == "__main__":  # the exporting process of `export_graphs`
    _export_job(sys.argv[1])
