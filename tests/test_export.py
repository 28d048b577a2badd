"""`attnmt export --format ctranslate2` and `--quantize int8`: the exported model decodes
exactly as ours does, and quantised decoding stays close to fp32.

Three tiny runs are trained once for the module (seconds): a pre-norm Transformer with
shared, tied embeddings on a sentencepiece vocabulary (a small mixed-script TSV corpus:
the shape of configs/transformer.yaml), a post-norm Transformer with separate untied
embeddings on the reverse task (a symbol vocabulary), and an RNNsearch (not exportable).
"""

from __future__ import annotations

import io
import json
import random
import re
import sys
from pathlib import Path

import ctranslate2
import numpy as np
import pytest
import torch
from ctranslate2.specs.model_spec import OPTIONAL
from torch import Tensor
from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

from attnmt.attention import ConcatScore, LocalPredictor
from attnmt.cli import main
from attnmt.config import ModelConfig, load_config
from attnmt.data.batching import pad_batch
from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.hypotheses import max_lengths
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.quantize import quantize_model
from attnmt.decoding.runs import load_run
from attnmt.decoding.translator import MAX_SOURCE_TOKENS, Translator
from attnmt.errors import UserError
from attnmt.export.ctranslate2 import (
    INFO_FILE,
    MAX_POSITIONS,
    RunConverter,
    export_ctranslate2,
    vocabulary_tokens,
)
from attnmt.models import build_model
from attnmt.models.torch_ops import torch_ops
from attnmt.training import train
from conftest import TINY, WORDS, mixed_corpus

ROOT = Path(__file__).resolve().parents[1]
CPU_OPS = torch_ops(torch.device("cpu"))
TRANSFORMER = ["model.name=transformer", "model.heads=2", "model.layers=2", "model.ff_size=32"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    corpus = mixed_corpus(root)
    cache = f"data.cache_dir={root / 'cache'}"
    spm = [cache, "data.corpus=tsv", "data.drop_held_out=false", "data.vocab_size=120"]
    spm += [f"data.{split}_path={corpus}" for split in ("train", "dev", "test")]
    reverse = [cache, "data.corpus=reverse", "data.synthetic_train_size=200"]
    reverse += ["data.synthetic_max_len=6"]
    configs = {
        # Trained enough that some outputs end with EOS and some run to the length limit.
        "shared": [*spm, *TRANSFORMER, "model.share_embeddings=true", "train.lr=0.01"],
        "post": [*reverse, *TRANSFORMER, "model.pre_norm=false", "model.tie_embeddings=false"],
        "rnn": [*reverse, "train.max_steps=1"],
    }
    steps = {"shared": 30, "post": 20, "rnn": 1}
    for name, overrides in configs.items():
        cfg = [*TINY, *overrides, f"train.max_steps={steps[name]}", f"train.run_dir={root / name}"]
        train(load_config(None, cfg), progress=False)
    return {name: root / name for name in configs} | {"root": root}


def sentences(run: str) -> list[str]:
    rng = random.Random(3)
    if run == "post":  # the reverse task: symbols 0-50
        return [
            " ".join(str(rng.randrange(51)) for _ in range(rng.randint(1, 9))) for _ in range(12)
        ]
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9))) for _ in range(12)]


def ct2_greedy(translator, tokens: list[str], source: list[int], ratio: float = 2.0) -> list[int]:
    """CTranslate2's greedy search set up as ours: no PAD/BOS, EOS allowed first, and our
    per-sentence limit (we force EOS at the last step; CTranslate2 stops one before)."""
    (limit,) = max_lengths(torch.ones(1, len(source) + 1), ratio, CPU_OPS).tolist()  # EOS incl.
    (result,) = translator.translate_batch(
        [[tokens[i] for i in source]],
        beam_size=1,
        min_decoding_length=0,
        max_decoding_length=limit - 1,
        suppress_sequences=[[tokens[PAD]], [tokens[BOS]]],
    )
    index = {token: i for i, token in enumerate(tokens)}
    return [index[token] for token in result.hypotheses[0]]


@pytest.mark.parametrize("run", ["shared", "post"])
def test_ctranslate2_greedy_gives_exactly_our_tokens(runs, tmp_path, run):
    loaded = load_run(runs[run])
    out = export_ctranslate2(loaded, tmp_path / "ct2")
    translator = ctranslate2.Translator(str(out), device="cpu")
    tokens = vocabulary_tokens(loaded.vocab.tgt)
    sources = [loaded.vocab.src.encode(text) for text in sentences(run)]
    ours = translate_ids(loaded.model, sources, loaded.vocab.tgt.decode, SearchOptions(beam=1))
    theirs = [ct2_greedy(translator, tokens, source) for source in sources]
    assert [t.tokens for t in ours] == theirs
    # Both ways of ending are exercised: EOS chosen, and the length limit reached.
    limits = [int(max_lengths(torch.ones(1, len(s) + 1), 2.0, CPU_OPS)) for s in sources]
    ended = [len(t.tokens) < limit - 1 for t, limit in zip(ours, limits, strict=True)]
    if run == "shared":
        assert any(ended) and not all(ended)


@pytest.mark.parametrize("run", ["shared", "post"])
def test_forced_decoding_log_probs_agree(runs, tmp_path, run):
    """score_batch's log-probabilities of given targets are ours (teacher forcing)."""
    loaded = load_run(runs[run])
    out = export_ctranslate2(loaded, tmp_path / "ct2")
    translator = ctranslate2.Translator(str(out), device="cpu")
    src_tokens, tgt_tokens = (
        vocabulary_tokens(loaded.vocab.src),
        vocabulary_tokens(loaded.vocab.tgt),
    )
    texts = sentences(run)
    sources = [loaded.vocab.src.encode(text) for text in texts]
    targets = [loaded.vocab.tgt.encode(" ".join(reversed(text.split()))) for text in texts]
    results = translator.score_batch(
        [[src_tokens[i] for i in s] for s in sources], [[tgt_tokens[i] for i in t] for t in targets]
    )
    for source, target, result in zip(sources, targets, results, strict=True):
        src, src_mask = pad_batch([[*source, EOS]], "cpu")
        with torch.no_grad():
            logits = loaded.model(src, src_mask, torch.tensor([[BOS, *target]])).logits
        gold = torch.tensor([*target, EOS])
        ours = torch.log_softmax(logits[0].float(), dim=-1).gather(1, gold[:, None])[:, 0]
        assert result.tokens == [tgt_tokens[i] for i in gold]  # CTranslate2 appends </s>
        np.testing.assert_allclose(result.log_probs, ours.numpy(), atol=1e-4, rtol=0)


def test_our_positions_are_stored_because_ctranslate2s_differ(runs, tmp_path):
    """CTranslate2's built-in sinusoids put all sines before all cosines; ours interleave
    them (Vaswani §3.5), so the export stores our table, and without it scores change."""
    loaded = load_run(runs["shared"])

    class BuiltInPositions(RunConverter):
        def _load(self):
            spec = super()._load()
            spec.encoder.position_encodings.encodings = OPTIONAL  # CTranslate2's own
            spec.decoder.position_encodings.encodings = OPTIONAL
            return spec

    tokens = vocabulary_tokens(loaded.vocab.src)
    source = [[tokens[i] for i in loaded.vocab.src.encode("the cat sat on the mat")]]
    scores = []
    for name, converter in (("ours", RunConverter(loaded)), ("builtin", BuiltInPositions(loaded))):
        converter.convert(str(tmp_path / name))
        translator = ctranslate2.Translator(str(tmp_path / name), device="cpu")
        scores.append(translator.score_batch(source, source)[0].log_probs)
    assert np.abs(np.subtract(*scores)).max() > 1e-2
    assert MAX_POSITIONS >= 2 * (MAX_SOURCE_TOKENS + 1) + 5  # the longest default decode


def test_int8_export_translates_close_to_float32(runs, tmp_path):
    loaded = load_run(runs["shared"])
    float32 = ctranslate2.Translator(str(export_ctranslate2(loaded, tmp_path / "f32")))
    int8 = ctranslate2.Translator(
        str(export_ctranslate2(loaded, tmp_path / "i8", quantization="int8"))
    )
    tokens = vocabulary_tokens(loaded.vocab.tgt)
    source = [[tokens[i] for i in loaded.vocab.src.encode(text)] for text in sentences("shared")]
    a = np.concatenate([r.log_probs for r in float32.score_batch(source, source)])
    b = np.concatenate([r.log_probs for r in int8.score_batch(source, source)])
    gap = np.abs(np.exp(a) - np.exp(b))  # per-token probabilities
    # CTranslate2's int8 is one scheme on every CPU (a scale per weight row and per input
    # row, products exact in int32): only its fp32 parts (norms, softmax) round differently
    # by kind, which moves a rounded input by one step at most. Measured max/mean 0.011/0.001
    # (Intel Xeon AMX) and 0.0065/0.0008 (CT2_FORCE_CPU_ISA=AVX2): the bound is ~10x that.
    assert gap.max() < 0.1 and gap.mean() < 0.03
    assert json.loads((tmp_path / "i8" / INFO_FILE).read_text())["quantization"] == "int8"


def attnmt(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_writes_the_model_our_vocabulary_and_how_to_tokenise(runs, tmp_path, capsys):
    out = tmp_path / "exports" / "tf-ct2"
    code, stdout, _ = attnmt(
        capsys, "export", runs["shared"], "--format", "ctranslate2", "--out", out
    )
    assert code == 0 and str(out) in stdout
    loaded = load_run(runs["shared"])
    names = {p.name for p in out.iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json", INFO_FILE, "vocab"} <= names
    vocabulary = json.loads((out / "shared_vocabulary.json").read_text(encoding="utf-8"))
    assert vocabulary == vocabulary_tokens(loaded.vocab.src)
    assert vocabulary[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    info = json.loads((out / INFO_FILE).read_text(encoding="utf-8"))
    assert (info["run"], info["step"], info["model"]) == (runs["shared"].name, 30, "transformer")
    assert info["vocab"]["special_ids"] == {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
    assert all((out / f).is_file() for f in info["vocab"]["files"])
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["add_source_eos"] is True and config["decoder_start_token"] == "<s>"
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no leftovers
    # The default place: RUN/ctranslate2-int8 for an int8 export.
    assert attnmt(capsys, "export", runs["post"], "--quantize", "int8")[0] == 0
    assert (runs["post"] / "ctranslate2-int8" / "model.bin").is_file()


def test_an_existing_out_is_kept_unless_force(runs, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("keep me", encoding="utf-8")
    code, _, err = attnmt(capsys, "export", runs["post"], "--out", out)
    assert code == 2 and "already exists" in err and "--force" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert attnmt(capsys, "export", runs["post"], "--out", out, "--force")[0] == 0
    assert not (out / "mine.txt").exists() and (out / "model.bin").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # nothing left aside
    empty = tmp_path / "empty"
    empty.mkdir()
    assert attnmt(capsys, "export", runs["post"], "--out", empty)[0] == 0


def test_a_model_that_is_not_a_transformer_is_refused(runs, tmp_path, capsys):
    code, _, err = attnmt(capsys, "export", runs["rnn"], "--out", tmp_path / "x")
    assert code == 2
    assert "only Transformer runs" in err and "rnnsearch" in err and "--format onnx" in err
    assert "Traceback" not in err and not (tmp_path / "x").exists()


def test_a_failed_export_leaves_nothing(runs, tmp_path, monkeypatch):
    loaded = load_run(runs["post"])

    def broken(self):
        raise RuntimeError("disk full")

    monkeypatch.setattr(RunConverter, "_load", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        export_ctranslate2(loaded, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_the_docs_snippet_translates_as_attnmt_does(runs, tmp_path, monkeypatch, capsys):
    """docs/export.md's Python block, run on a tiny export in its place."""
    page = (ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "ctranslate2" in b]
    loaded = load_run(runs["shared"])
    export_ctranslate2(loaded, tmp_path / "exports" / "transformer-ct2")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(snippet, "docs/export.md", "exec"), namespace)
    printed = capsys.readouterr().out
    ours = Translator(loaded).translate(namespace["lines"])
    assert printed.strip() == str([s.translation.text for s in ours])


# --------------------------------------------------------------------------------------
# --quantize int8: PyTorch dynamic quantisation
# --------------------------------------------------------------------------------------


def dynamic_linears(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    return {n: m for n, m in model.named_modules() if isinstance(m, DynamicLinear)}


def int8_excess(model: torch.nn.Module, quantized: torch.nn.Module, run_forward) -> float:
    """The largest |int8 output − fp32 output| / bound over every output of every int8 linear
    map while `run_forward(quantized)` runs: ≤ 1 for a sound quantiser, on any CPU.

    The bound is what rounding to int8 can change, derived from the fp32 weights W (B, in)
    and each call's input x alone, whichever kernel (fbgemm, oneDNN; AVX2, AVX-512, AMX)
    does the integer product (exact in int32): the weights are rounded to a step s_w =
    max|W|/127 (one symmetric scale per matrix), |ΔW| ≤ s_w/2; the input is rounded to a
    step s_x = (max(x, 0) − min(x, 0))/127 over the call (7-bit `reduce_range`, the coarsest
    any engine uses), |Δx| ≤ s_x with the zero point's own rounding. So per output
        |Δy_j| ≤ s_x Σ_i (|W_ji| + s_w/2) + (s_w/2) Σ_i |x_i|,
    plus fp32 rounding of both products (1e-5 of Σ|W||x|). A quantiser that zeroes the
    weights, doubles a scale or keeps fewer bits breaks it (tested below)."""
    seen: list[tuple[str, Tensor, Tensor]] = []
    hooks = [
        module.register_forward_hook(lambda m, args, out, n=name: seen.append((n, args[0], out)))
        for name, module in dynamic_linears(quantized).items()
    ]
    try:
        with torch.no_grad():
            run_forward(quantized)
    finally:
        for hook in hooks:
            hook.remove()
    assert seen, "no int8 linear map ran"
    worst = 0.0
    for name, x, out in seen:
        reference = model.get_submodule(name)
        weight, bias = reference.weight.detach(), reference.bias
        x = x.reshape(-1, weight.shape[1])  # (N, in)
        exact = torch.nn.functional.linear(x, weight, bias)  # (N, out)
        s_w = weight.abs().max() / 127
        s_x = (x.max().clamp(min=0) - x.min().clamp(max=0)) / 127
        magnitude = x.abs() @ weight.abs().T  # (N, out)
        bound = s_x * (weight.abs().sum(1) + s_w / 2 * weight.shape[1])  # (out,)
        bound = bound + s_w / 2 * x.abs().sum(1, keepdim=True) + 1e-5 * magnitude + 1e-6
        worst = max(worst, ((out.reshape(exact.shape) - exact).abs() / bound).max().item())
    return worst


def break_weights(quantized: torch.nn.Module, how: str) -> None:
    """Mutate every int8 linear map as a broken quantiser would."""
    for module in dynamic_linears(quantized).values():
        weight, bias = module.weight(), module.bias()
        ints = torch.zeros_like(weight.int_repr()) if how == "zeroed" else weight.int_repr()
        scale = weight.q_scale() * (2 if how == "scale x2" else 1)
        if how == "4 bits":  # every weight on a grid 16 times coarser
            ints = (ints.float() / 16).round().mul(16).clamp(-128, 127).to(torch.int8)
        module.set_weight_bias(
            torch._make_per_tensor_quantized_tensor(ints, scale, weight.q_zero_point()), bias
        )


def forced_logits(model, sources, outputs) -> list[Tensor]:
    """Each sentence's (T, V) logits with its target forced to `outputs` (+ EOS)."""
    result = []
    with torch.no_grad():
        for source, tokens in zip(sources, outputs, strict=True):
            src, src_mask = pad_batch([[*source, EOS]], "cpu")
            tgt = torch.tensor([[BOS, *tokens]])
            result.append(model(src, src_mask, tgt).logits[0])  # (T, V)
    return result


def test_int8_model_decodes_close_to_float32(runs):
    """What int8 must keep on every CPU kind: each linear map within the bound rounding
    allows (`int8_excess`), and greedy decoding that picks fp32's token wherever fp32's
    margin over the runner-up is more than twice the int8 logit error at that step (there
    no rounding can change the argmax); after the first step where it is not, the outputs
    may part (a near-tie that one CPU's rounding tips either way)."""
    loaded = load_run(runs["shared"])
    quantized = quantize_model(loaded.model, "int8")
    assert isinstance(loaded.model.generator, torch.nn.Linear)  # the original is untouched
    assert not isinstance(quantized.generator, torch.nn.Linear)
    sources = [loaded.vocab.src.encode(text) for text in sentences("shared")]
    fp32 = translate_ids(loaded.model, sources, str)
    outputs = [t.tokens for t in fp32]

    def forward(model):
        forced_logits(model, sources, outputs)
        translate_ids(model, sources, str)

    assert int8_excess(loaded.model, quantized, forward) <= 1
    int8 = translate_ids(quantized, sources, str)
    reference = forced_logits(loaded.model, sources, outputs)
    rounded = forced_logits(quantized, sources, outputs)
    checked = 0
    for a, b, p, q in zip(fp32, int8, reference, rounded, strict=True):
        error = (p - q).abs().amax(-1)  # (T,) the int8 logit error at each step
        top = p.topk(2, dim=-1).values  # (T, 2)
        safe = (top[:, 0] - top[:, 1] > 2 * error).long().cumprod(0).sum().item()
        target = [*a.tokens, EOS]
        # An output that ran to its length limit got its EOS forced, not chosen.
        safe = min(safe, len(target) - (p[-1].argmax().item() != EOS))
        assert [*b.tokens, EOS][:safe] == target[:safe]
        assert q[:safe].argmax(-1).tolist() == target[:safe]
        checked += safe
    print(f"int8: {checked} of {sum(len(p) for p in reference)} steps beyond the error")
    assert checked > 0  # not vacuous: some steps have a margin beyond the int8 error


@pytest.mark.parametrize("how", ["zeroed", "scale x2", "4 bits"])
def test_int8_bound_fails_a_broken_quantiser(runs, how):
    loaded = load_run(runs["shared"])
    quantized = quantize_model(loaded.model, "int8")
    sources = [loaded.vocab.src.encode(text) for text in sentences("shared")]
    break_weights(quantized, how)
    assert int8_excess(loaded.model, quantized, lambda m: translate_ids(m, sources, str)) > 1


def test_quantize_keeps_linear_maps_whose_weights_are_read():
    """Luong's concat score and local-p read W_a / W_p themselves: those stay fp32."""
    cfg = ModelConfig(
        name="luong", attention="concat", scope="local-p", embed_size=8, hidden_size=8
    )
    model = build_model(cfg, 12, 12).eval()
    quantized = quantize_model(model, "int8")
    kept = [m for m in quantized.modules() if isinstance(m, ConcatScore | LocalPredictor)]
    assert kept and all(isinstance(c, torch.nn.Linear) for m in kept for c in m.children())
    translate_ids(quantized, [[4, 5, 6], [7]], str, SearchOptions(max_len_ratio=1.0))  # runs


def test_translate_and_evaluate_quantize_int8(runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(b"1 2 3\n\n7 8\n"), encoding="utf-8")
    )
    code, out, _ = attnmt(capsys, "translate", runs["post"], "--quantize", "int8")
    assert code == 0 and len(out.split("\n")) == 4
    code, out, _ = attnmt(
        capsys, "evaluate", runs["post"], "--quantize", "int8", "--limit", "3", "--out", tmp_path
    )
    assert code == 0 and "on cpu" in out
    assert json.loads((tmp_path / "test-beam1.json").read_text())["quantize"] == "int8"


def test_quantize_on_a_gpu_is_a_clear_error(runs, capsys):
    code, _, err = attnmt(
        capsys, "translate", runs["post"], "--quantize", "int8", "--device", "cuda"
    )
    assert code == 2 and "CPU only" in err and "--device cpu" in err
    with pytest.raises(UserError, match="must be one of"):
        quantize_model(torch.nn.Linear(2, 2), "int4")
