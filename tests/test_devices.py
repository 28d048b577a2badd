"""Device and precision choice with the hardware facts faked: CUDA, Apple mps, AMX,
AVX512-BF16 or AVX2 only, present or not. The defaults must never assume the build machine."""

from __future__ import annotations

import platform

import pytest
import torch

from attnmt import devices
from attnmt.devices import choose_precision, keep_freed_memory, native_bf16, pick_device
from attnmt.errors import UserError

CPU = torch.device("cpu")


@pytest.fixture
def hardware(monkeypatch):
    """Fake hardware: set `cuda`, `cuda_bf16`, `mps`, `amx`, `avx512_bf16` and `flags`."""

    class Facts:
        cuda = False
        cuda_bf16 = False
        mps = False
        amx = False
        avx512_bf16 = False
        flags: frozenset[str] = frozenset({"avx2", "fma"})

    facts = Facts()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: facts.cuda)

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return facts.cuda_bf16 or (including_emulation and facts.cuda)  # as torch does

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Fake GPU")
    monkeypatch.setattr(devices, "mps_available", lambda: facts.mps)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: facts.amx, raising=False)
    monkeypatch.setattr(
        torch.cpu, "_is_avx512_bf16_supported", lambda: facts.avx512_bf16, raising=False
    )
    monkeypatch.setattr(devices, "cpu_flags", lambda: facts.flags)
    return facts


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu"), (True, False, "cuda")],
)
def test_auto_device_is_cuda_then_mps_then_cpu(hardware, cuda, mps, expected):
    hardware.cuda, hardware.mps = cuda, mps
    assert pick_device("auto").type == expected


def test_an_explicit_device_that_is_missing_is_a_clear_error(hardware):
    with pytest.raises(UserError, match="'cuda' but no GPU is visible"):
        pick_device("cuda")
    with pytest.raises(UserError, match="--device is 'mps' but"):
        pick_device("mps", option="--device")
    with pytest.raises(UserError, match="must be one of auto, cpu, cuda, mps"):
        pick_device("tpu")


def test_cuda_keeps_the_local_rank(hardware):
    hardware.cuda = True
    assert pick_device("auto", local_rank=1) == torch.device("cuda", 1)


@pytest.mark.parametrize(
    ("amx", "avx512_bf16", "flags", "native"),
    [
        (True, False, {"avx2"}, True),  # torch reports AMX
        (False, True, {"avx2"}, True),  # torch reports AVX512-BF16
        (False, False, {"avx2", "amx_bf16"}, True),  # only the kernel's flags say so
        (False, False, {"avx2", "avx512f"}, False),  # AVX-512 without BF16
        (False, False, {"avx2", "fma"}, False),  # an AMD EPYC / most laptops
    ],
)
def test_native_bf16_on_the_cpu_comes_from_torch_and_the_flags(
    hardware, amx, avx512_bf16, flags, native
):
    hardware.amx, hardware.avx512_bf16, hardware.flags = amx, avx512_bf16, frozenset(flags)
    assert native_bf16(CPU)[0] is native


def test_auto_is_bf16_only_where_native_and_measured_faster(hardware):
    assert choose_precision("auto", CPU, "transformer").name == "fp32"  # AVX2 only
    hardware.amx = True
    chosen = choose_precision("auto", CPU, "transformer")
    assert chosen.name == "bf16" and chosen.autocast_dtype is torch.bfloat16
    assert "AMX" in chosen.reason
    # Recurrent models ran slower under bf16 even with AMX: fp32, saying why.
    for family in ("rnnsearch", "luong", "glimpses"):
        chosen = choose_precision("auto", CPU, family)
        assert chosen.name == "fp32" and "slower" in chosen.reason
    # The CNN image models (the captioner and its baseline alike) gain: bf16.
    for family in ("show-attend-tell", "show-tell"):
        assert choose_precision("auto", CPU, family).name == "bf16"
    hardware.amx = False
    assert choose_precision("auto", CPU, "show-attend-tell").name == "fp32"  # AVX2 only


def test_each_kind_of_native_bf16_has_its_own_measured_rule(hardware):
    """A rule measured on one CPU does not speak for another: RNNsearch ran slower in bf16
    on the Xeon with AMX, faster on the Zen 4 with AVX512-BF16 and no AMX."""
    hardware.amx = True
    on_xeon = choose_precision("auto", CPU, "rnnsearch")
    assert on_xeon.name == "fp32" and "measured on an Intel Xeon with AMX" in on_xeon.reason
    hardware.amx, hardware.avx512_bf16 = False, True
    hardware.flags = frozenset({"avx2", "avx512f", "avx512_bf16"})
    for family in ("rnnsearch", "luong", "transformer", "glimpses", "show-attend-tell"):
        on_zen4 = choose_precision("auto", CPU, family)
        assert on_zen4.name == "bf16", family
        assert "AVX512-BF16 but no AMX" in on_zen4.reason
        assert "measured on an AMD EPYC Zen 4" in on_zen4.reason
    assert choose_precision("auto", CPU, "a-new-family").name == "fp32"  # never measured
    # Every kind's list names real model families only.
    from attnmt.config.checks import MODELS

    for kind, families in devices.BF16_FASTER.items():
        assert families <= set(MODELS), kind


def test_auto_on_cuda_follows_the_gpu(hardware):
    hardware.cuda = True
    cuda = torch.device("cuda", 0)
    assert choose_precision("auto", cuda, "transformer").name == "fp32"
    hardware.cuda_bf16 = True
    # Measured on an H200: bf16 trained both slower; the other families follow the Xeon.
    for family in ("transformer", "rnnsearch"):
        chosen = choose_precision("auto", cuda, family)
        assert chosen.name == "fp32" and "H200" in chosen.reason, family
    chosen = choose_precision("auto", cuda, "rnnencdec")
    assert chosen.name == "bf16" and "not on a GPU" in chosen.reason
    assert choose_precision("auto", torch.device("mps"), "transformer").name == "fp32"


def test_explicit_bf16_without_native_support_trains_but_warns(hardware):
    chosen = choose_precision("bf16", CPU, "transformer")
    assert chosen.name == "bf16"
    assert "emulated" in chosen.warning and "train.precision=auto" in chosen.warning
    hardware.amx = True
    assert choose_precision("bf16", CPU, "rnnsearch").warning is None


def test_fp32_is_fp32_everywhere(hardware):
    hardware.amx = hardware.cuda = hardware.cuda_bf16 = True
    chosen = choose_precision("fp32", CPU, "transformer")
    assert chosen.name == "fp32" and chosen.autocast_dtype is None and chosen.warning is None


def test_no_shipped_config_selects_bf16_on_a_cpu_without_native_bf16(hardware):
    from pathlib import Path

    from attnmt.config import load_config

    configs = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))
    assert configs
    for path in configs:
        cfg = load_config(path)
        chosen = choose_precision(cfg.train.precision, CPU, cfg.model.name)
        assert chosen.name == "fp32", path.name
        assert cfg.train.max_steps > 0 and not cfg.train.max_minutes, path.name  # steps


def test_the_cpu_device_flushes_subnormal_floats():
    torch.set_flush_denormal(False)
    tiny = torch.tensor([1e-39, 1.0])  # 1e-39 is below fp32's smallest normal, 1.2e-38
    assert (tiny * 1.0)[0] > 0
    try:
        assert pick_device("cpu").type == "cpu"
        flushed = bool((tiny * 1.0)[0] == 0) and bool((tiny * 1.0)[1] == 1.0)
        # Only now ask whether this CPU can flush at all (x86 with SSE3: every machine
        # here): pick_device must have switched it on by itself.
        assert flushed == torch.set_flush_denormal(True)
    finally:
        torch.set_flush_denormal(False)


def _page_faults_of_a_step() -> int:
    """Minor page faults of a step-like pattern: small blocks, then a 64 MiB one, all freed."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    small = [torch.empty(16_000) for _ in range(100)]  # 64 KB each: below mmap's threshold
    torch.empty(16 * 2**20).fill_(1.0)  # 64 MiB: 16,384 pages of 4 KiB
    del small
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_memory_is_kept_for_the_next_step(monkeypatch):
    monkeypatch.delenv("ATTNMT_MALLOC_TOP_PAD", raising=False)
    assert keep_freed_memory()
    # By default every step's 64 MiB block is a fresh mmap that faults on each of its
    # pages (16,384 every step); once the heap has grown, the kept top serves it.
    faults = [_page_faults_of_a_step() for _ in range(8)]
    assert max(faults[-2:]) < 1_000, faults


def test_the_malloc_setting_can_be_switched_off_and_is_checked(monkeypatch):
    monkeypatch.setenv("ATTNMT_MALLOC_TOP_PAD", "0")
    assert not keep_freed_memory()
    monkeypatch.setenv("ATTNMT_MALLOC_TOP_PAD", "lots")
    with pytest.raises(UserError, match="ATTNMT_MALLOC_TOP_PAD must be a number of bytes"):
        keep_freed_memory()
