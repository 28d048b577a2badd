"""int8 decoding on the CPU: PyTorch's dynamic quantisation of a model's linear maps
(`attnmt translate --quantize int8`, `evaluate` and the Python API)."""

from __future__ import annotations

import warnings

import torch
from torch.ao.quantization import quantize_dynamic

from attnmt.attention import ConcatScore, LocalPredictor
from attnmt.config.checks import DECODER_QUANTIZATIONS
from attnmt.errors import UserError

QUANTIZATIONS = DECODER_QUANTIZATIONS
# Modules that read their linear maps' weight matrices themselves (a slice of W_a, F.linear
# in fp32), which a quantised linear map no longer has: their maps stay fp32.
READS_WEIGHTS = (ConcatScore, LocalPredictor)


def quantize_model(model: torch.nn.Module, scheme: str) -> torch.nn.Module:
    """PyTorch dynamic quantisation for decoding on the CPU: every `nn.Linear` (but those of
    `READS_WEIGHTS`) gets int8 weights (one scale per matrix) and int8 activations
    quantised batch by batch; the rest (embeddings, norms, recurrent cells) stays fp32. A
    tied output layer gets its own int8 copy. Returns the quantised model (eval mode);
    `model` is left as it was.

    Raises:
        UserError: an unknown scheme, or a model that is not on the CPU (no GPU kernels).
    """
    if scheme not in QUANTIZATIONS:
        raise UserError(f"--quantize must be one of {', '.join(QUANTIZATIONS)}, got '{scheme}'")
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise UserError(
            f"--quantize {scheme} runs on the CPU only (PyTorch's dynamic quantisation has no "
            f"{device.type} kernels); use --device cpu, or export the run to CTranslate2"
        )
    keep = {
        f"{name}.{child}"
        for name, module in model.named_modules()
        if isinstance(module, READS_WEIGHTS)
        for child, _ in module.named_children()
    }
    linears = {
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name not in keep
    }
    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated in favour of the separate torchao package,
        # which is not a dependency of ours; the eager API still works in torch 2.13.
        warnings.filterwarnings("ignore", "torch.ao.quantization is deprecated", DeprecationWarning)
        warnings.filterwarnings("ignore", "torch.quantize_per_tensor", UserWarning)
        return quantize_dynamic(model, linears, dtype=torch.qint8).eval()
