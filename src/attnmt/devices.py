"""Which device runs the model and in which precision, chosen from what the hardware runs
natively; one choice for training, decoding and every command.

    device = pick_device("auto")                 # CUDA, else Apple mps, else the CPU
    device = pick_device("cuda", local_rank=1)   # one process of a torchrun job
    precision = choose_precision("auto", device, "transformer")   # a Precision

`auto` takes the first of CUDA, Apple's `mps` and the CPU that PyTorch reports usable.
An explicit device that is not there is a clear error naming the option that asked for it.
Precision `auto` is bf16 only where bf16 is native (CUDA with bf16 support; a CPU with AMX
or AVX512-BF16, as PyTorch and the CPU flags report, never guessed from the vendor) and
bf16 was measured faster for the model family on that kind of hardware (`BF16_FASTER`: an
Intel Xeon with AMX, an AMD EPYC Zen 4 with AVX512-BF16); fp32 everywhere else. Where bf16
is not native it is emulated, about 150 times slower than fp32.
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from attnmt.config.checks import DEVICES as DEVICES  # named with the config, torch-free
from attnmt.errors import UserError


def mps_available() -> bool:
    """Whether PyTorch can run on Apple's Metal backend here."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def pick_device(name: str, *, local_rank: int = 0, option: str = "train.device") -> torch.device:
    """The torch device for `name` (one of `DEVICES`); `option` names the setting in errors."""
    if name not in DEVICES:
        raise UserError(f"{option} must be one of {', '.join(DEVICES)}, got '{name}'")
    if name == "auto":
        if torch.cuda.is_available():
            name = "cuda"
        elif mps_available():
            name = "mps"
        else:
            name = "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"{option} is 'cuda' but no GPU is visible; use 'cpu' or 'auto'")
        return torch.device("cuda", local_rank)
    if name == "mps":
        if not mps_available():
            raise UserError(
                f"{option} is 'mps' but this PyTorch has no usable Apple GPU; use 'auto'"
            )
        return torch.device("mps")
    flush_denormals()
    keep_freed_memory()
    return torch.device("cpu")


def flush_denormals() -> bool:
    """Have the CPU treat floats below 1.2e-38 as zero (x86 FTZ/DAZ), as inference
    engines do; returns whether the CPU could.

    An attention softmax that saturates (an unscaled `dot` score over wide vectors, a
    peaky trained model) leaves weights of exp(-90) and below, and arithmetic on such
    subnormal numbers traps to microcode on Intel CPUs: the `dot` kernel at S = 64,
    D = 512 took 5.1 ms against 1.1 ms flushed on an Intel Xeon with AMX (no difference
    on the AMD EPYC). Values that small change no softmax, loss or update that matters.
    Every command that runs a model on the CPU sets it (`pick_device`)."""
    return torch.set_flush_denormal(True)


# M_TOP_PAD (glibc's malloc.h): how much free memory the heap keeps at its top.
_M_TOP_PAD = -2
# What `keep_freed_memory` keeps: the most mallopt takes (an int), more than a training
# step of the shipped models allocates (1 GiB left the Transformer 2x the page faults).
TOP_PAD_BYTES = 2**31 - 1


def keep_freed_memory(pad: int = TOP_PAD_BYTES) -> bool:
    """Have glibc's malloc keep up to `pad` bytes of freed memory for the next
    allocations instead of giving it back to the kernel; returns whether it could (False
    off glibc, e.g. macOS, musl, Windows, which keep their own allocators).

    By default glibc returns freed memory at the heap's top to the kernel and serves large
    blocks with fresh `mmap`s, so every training step's large tensors (logits, their
    gradients, the activations autograd keeps) are new pages that fault in and are zeroed
    by the kernel: 1.9 million page faults over 45 RNNsearch steps at 2,048 tokens, 0.3
    million with 2 GiB kept at the top (`mallopt(M_TOP_PAD)`; the heap's top chunk then
    serves those blocks). Tokens/s, three runs each way alternating (Intel Xeon with AMX,
    2 threads, 2026-11-25; benchmarks/README.md): RNNsearch 1.08x, the Transformer (bf16)
    1.17x. The memory is reused by this process, not held twice: resident size grew 5-15%.
    `ATTNMT_MALLOC_TOP_PAD=0` in the environment leaves malloc as it is (a number sets
    another amount in bytes). Every command that runs a model on the CPU sets it
    (`pick_device`)."""
    setting = os.environ.get("ATTNMT_MALLOC_TOP_PAD")
    if setting is not None:
        if not setting.isdigit():
            raise UserError(
                f"ATTNMT_MALLOC_TOP_PAD must be a number of bytes (0 to leave malloc as it "
                f"is), got '{setting}'"
            )
        pad = int(setting)
    if pad <= 0 or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_TOP_PAD, ctypes.c_int(min(pad, 2**31 - 1))))


def release_freed_memory() -> bool:
    """Give the memory malloc holds freed back to the kernel (glibc's `malloc_trim(0)`, in
    every arena); False where there is no glibc. For the rare large, short-lived buffers
    that `keep_freed_memory` would otherwise keep for good: planning an epoch of millions of
    pairs (`attnmt.data.batching`) frees hundreds of MB that no training step reuses."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        return bool(ctypes.CDLL(None).malloc_trim(ctypes.c_size_t(0)))
    except (OSError, AttributeError):
        return False


# --------------------------------------------------------------------------------------
# Precision: bf16 only where the hardware runs it natively and it was measured faster
# --------------------------------------------------------------------------------------

PRECISIONS = ("auto", "fp32", "bf16")
# The model families that trained faster under bf16 autocast than in fp32, for each kind of
# hardware that runs bf16 natively, each measured on that kind (a rule measured on one CPU
# does not speak for another; docs/training.md has the tables and their commands):
# - "amx", an Intel Xeon with AMX: whole 20-minute runs and benchmarks/train_speed.py. The
#   Transformer (1.12x over whole runs) and RNNencdec (1.35x), whose time goes to large
#   matrix products, and the CNN image models (show-attend-tell and its no-attention
#   baseline show-tell, 1.2-1.5x, same results within the spread of seeds). RNNsearch
#   ran 0.86x over a whole run, Luong 0.93x, the glimpses 0.70x: fp32.
# - "avx512_bf16", an AMD EPYC Zen 4 (AVX-512 with AVX512-BF16, no AMX): the training step
#   of each shipped config as shipped, 30 steps, fp32 and bf16 alternated 2-3 times
#   (benchmarks/throughput.py, 2026-11-25): bf16 was faster for every family, RNNsearch
#   1.08-1.10x, Luong 1.23x, RNNencdec 1.19x, the glimpses 1.21x, the Transformer 1.47x,
#   the CNN image models 1.46-1.57x; whether it changes what the models learn is measured
#   in docs/training.md (the quickstart at its step budget).
# - "cuda", a GPU with native bf16: an NVIDIA H200 (torch 2.11.0+cu130, 2026-11-28), the
#   shipped RNNsearch and Transformer with 8,192-token batches (benchmarks/throughput.py
#   --device cuda, and `attnmt train` itself): bf16 was slower for both, the Transformer's
#   step 176,000 target tokens/s against 209,000 in fp32, RNNsearch's 101,000 against
#   125,000 (docs/results.md, "On a GPU"). Models this small leave the GPU waiting for the
#   host, and bf16 adds casts there. The other families were not measured on a GPU: they
#   take the Xeon's list, and the printed reason says so.
BF16_FASTER = {
    "amx": frozenset({"transformer", "rnnencdec", "show-attend-tell", "show-tell"}),
    "avx512_bf16": frozenset(
        {"rnnsearch", "luong", "rnnencdec", "glimpses", "transformer"}
        | {"show-attend-tell", "show-tell"}
    ),
}
BF16_FASTER["cuda"] = BF16_FASTER["amx"] - {"transformer"}  # RNNsearch: not in either
MEASURED_ON = {
    "amx": "measured on an Intel Xeon with AMX",
    "avx512_bf16": "measured on an AMD EPYC Zen 4 with AVX512-BF16",
    "cuda": "measured on an NVIDIA H200 for rnnsearch and transformer; the other families "
    "on an Intel Xeon with AMX, not on a GPU",
}
# What bf16 costs where it is not native, as measured (docs/training.md): a 1024 x 1024
# matrix product on an AMD EPYC with AVX2 only.
SLOW_BF16 = "about 1 GFLOP/s against 166 in fp32 on an AVX2-only CPU"
# The CPU flags that decide speed here, recorded beside every run's figures.
NOTABLE_FLAGS = frozenset({"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})


@dataclass(frozen=True)
class Precision:
    """The precision a run trains in, and why: `name` is "fp32" or "bf16"."""

    name: str
    reason: str
    warning: str | None = None

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype for `torch.autocast`, or None for plain fp32."""
        return torch.bfloat16 if self.name == "bf16" else None


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty where /proc/cpuinfo is missing)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC", "Intel(R) Xeon(R) Platinum 8480+"), or the platform."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def native_bf16(device: torch.device) -> tuple[bool, str]:
    """Whether `device` runs bf16 matrix products natively, and what says so."""
    kind, why = bf16_kind(device)
    return kind is not None, why


def bf16_kind(device: torch.device) -> tuple[str | None, str]:
    """The kind of native bf16 `device` has (a key of `BF16_FASTER`: "cuda", "amx",
    "avx512_bf16"), or None where bf16 would be emulated; and what says so."""
    if device.type == "cuda":
        if _cuda_native_bf16():
            return "cuda", f"{torch.cuda.get_device_name(device)} supports bf16"
        return None, f"{torch.cuda.get_device_name(device)} has no native bf16"
    if device.type == "mps":
        return None, "bf16 autocast on Apple mps is not measured here"
    # Ask PyTorch first (it checks CPUID), then the kernel's flags; never the vendor name.
    amx = _torch_cpu_check("_is_amx_tile_supported")
    avx512_bf16 = _torch_cpu_check("_is_avx512_bf16_supported")
    flags = cpu_flags()
    if amx or "amx_bf16" in flags:
        return "amx", "the CPU has AMX"
    if avx512_bf16 or "avx512_bf16" in flags:
        return "avx512_bf16", "the CPU has AVX512-BF16 but no AMX"
    best = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return None, f"the CPU has no AMX or AVX512-BF16 ({best} only)"


def _cuda_native_bf16() -> bool:
    """bf16 in hardware (Ampere and later); torch's default check also counts emulation."""
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # an older torch without the argument: it reports hardware only
        return bool(torch.cuda.is_bf16_supported())


def _torch_cpu_check(name: str) -> bool:
    check = getattr(torch.cpu, name, None)
    try:
        return bool(check()) if check is not None else False
    except RuntimeError:
        return False


def choose_precision(requested: str, device: torch.device, model_name: str) -> Precision:
    """`train.precision` resolved for this hardware and model family (see `PRECISIONS`).

    `auto` gives bf16 only where it is native and was measured faster for the family on
    that kind of hardware (`BF16_FASTER`), fp32 otherwise; the reason names where it was
    measured. An explicit `bf16` is kept, with a warning where the hardware emulates it.
    """
    if requested not in PRECISIONS:
        raise UserError(
            f"train.precision must be one of {', '.join(PRECISIONS)}, got '{requested}'"
        )
    if requested == "fp32":
        return Precision("fp32", "train.precision is fp32")
    native, why = native_bf16(device)
    if requested == "bf16":
        if native:
            return Precision("bf16", f"train.precision is bf16 and {why}")
        warning = (
            f"train.precision is bf16 but {why}: bf16 is emulated there ({SLOW_BF16}), so "
            "training will be far slower; set train.precision=auto or fp32"
        )
        return Precision("bf16", f"train.precision is bf16; {why}", warning)
    if not native:
        return Precision("fp32", f"auto: {why}")
    kind, _ = bf16_kind(device)
    where = MEASURED_ON.get(kind or "", "not measured on this hardware")
    if kind not in BF16_FASTER or model_name not in BF16_FASTER[kind]:
        return Precision(
            "fp32", f"auto: {why}, but bf16 trained {model_name} slower than fp32 ({where})"
        )
    return Precision("bf16", f"auto: {why} and bf16 trained {model_name} faster ({where})")
