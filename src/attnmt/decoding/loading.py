"""What decodes, from paths: the one loader of the command line (`attnmt translate`,
`score`, `evaluate`), `attnmt.load` and `attnmt serve`.

    loaded = open_model(["runs/quickstart"])                     # its best checkpoint
    loaded = open_model(["runs/a", "runs/b"], ensemble_mode="linear")
    loaded = open_model(["runs/quickstart/checkpoints/step-00001600"], quantize="int8")
    loaded = open_model(["runs/quickstart/onnx"])                # no torch imported

A path is a run directory (its best checkpoint, else its latest), one checkpoint
directory, several of those (an ensemble), or an ONNX export (`attnmt export RUN --format
onnx`), which onnxruntime decodes on the CPU without torch: torch, the devices, ensembles
and int8 load only for runs. What an export cannot do is refused in one sentence that
names the option as the caller's user spells it (`--device` on the command line, `device=`
in Python).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnmt.config.checks import ENSEMBLE_MODES
from attnmt.errors import UserError
from attnmt.runtime.model import is_export
from attnmt.runtime.runs import ExportRun, load_export

if TYPE_CHECKING:
    from attnmt.decoding.runs import LoadedRun

# How the options are named in errors: keyword arguments unless the caller says otherwise.
KEYWORDS = {"device": "device", "quantize": "quantize", "ensemble": "a list of runs"}


def open_model(
    paths: str | Path | Sequence[str | Path],
    *,
    device: str = "auto",
    quantize: str | None = None,
    ensemble_mode: str = ENSEMBLE_MODES[0],
    layer: int | None = None,
    head: int | None = None,
    spelled: Mapping[str, str] | None = None,
) -> LoadedRun | ExportRun:
    """The run, checkpoint, ensemble or export at `paths`, ready for `Translator`.

    `device`: "auto" (a GPU where there is one), "cpu", "cuda", "mps"; `quantize="int8"`:
    PyTorch's dynamic int8 on the CPU ("auto" then means the CPU); `layer` and `head`
    choose a Transformer's cross-attention for alignments (1-based; the mean of the
    second-to-last layer by default). `spelled` renames options in errors ("device":
    "--device", ...).
    """
    names = {**KEYWORDS, **(spelled or {})}
    chosen = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not chosen:
        raise UserError("no run to load: give a run directory, a checkpoint or an ONNX export")
    if is_export(chosen[0]):
        return _export(chosen, device, quantize, names)
    # Runs need torch: imported here, so that an export's user need not have it.
    from attnmt.decoding.ensemble import load_ensemble
    from attnmt.decoding.quantize import quantize_model
    from attnmt.devices import pick_device

    if quantize and device == "auto":
        device = "cpu"  # int8 runs on the CPU kernels
    loaded = load_ensemble(
        [str(p) for p in chosen],
        device=pick_device(device, option=names["device"]),
        mode=ensemble_mode,
        layer=layer,
        head=head,
    )
    if quantize:
        loaded.model = quantize_model(loaded.model, quantize)
    return loaded


def _export(chosen: list[Any], device: str, quantize: str | None, names) -> ExportRun:
    """An ONNX export, refusing what only a run can do."""
    if len(chosen) > 1:
        raise UserError(
            f"an ONNX export is decoded alone; {names['ensemble']} (an ensemble) needs the "
            "runs themselves"
        )
    for option, refused in (("quantize", quantize), ("device", device not in ("auto", "cpu"))):
        if refused:
            raise UserError(
                f"{names[option]} works with a run, not an ONNX export (onnxruntime decodes "
                "it on the CPU; an int8 export is `attnmt export RUN --format onnx "
                f"--quantize int8`); leave out {names[option]}"
            )
    return load_export(chosen[0])
