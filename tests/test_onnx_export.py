"""`attnmt export RUN --format onnx`: every text family's encoder and decoder step as ONNX
graphs, verified against PyTorch when written, decoded by `attnmt.runtime` (onnxruntime,
numpy, our own search) as our decoder decodes the run.

The trained tiny runs of conftest (RNNsearch, a Transformer, RNNencdec) are compared
through `Translator` (greedy and beam, n-best, attention, alignments); every other variant
(Luong's scores, scopes and input feeding, local-m in RNNsearch, hard attention's
deterministic paths) is a randomly initialised model exported and checked step by step
(the export's own verification, here with its numbers asserted) and by search.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.cli import main
from attnmt.data.batching import pad_batch
from attnmt.data.vocab import BOS, EOS
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.decoding.search import beam_search
from attnmt.decoding.step_model import StepModel
from attnmt.decoding.translator import Translator
from attnmt.errors import UserError
from attnmt.export.onnx import TOLERANCE, export_onnx
from attnmt.models import build_model
from attnmt.runtime import OnnxModel, load_export

LINES = ["the cat sat on the mat", "", "Привет мир 🙂", "dog ran far", "naïve café λόγος"]


@pytest.fixture(scope="module")
def exports(tiny_exports):
    """run name -> its ONNX export (fp32), made once for the run (tests/conftest.py)."""
    return tiny_exports


def _outputs(loaded, **options):
    translator = Translator(loaded, need_weights=loaded.model.uses_attention, **options)
    return translator, translator.translate(LINES)


@pytest.mark.parametrize("name", ["rnn", "tf", "plain"])
@pytest.mark.parametrize("beam", [1, 4])
def test_the_export_decodes_as_the_run_does(tiny_runs, exports, name, beam):
    n_best = 1 if beam == 1 else 3
    ours, expected = _outputs(load_run(tiny_runs[name]), beam=beam, n_best=n_best)
    theirs, got = _outputs(load_export(exports[name]), beam=beam, n_best=n_best)
    for a, b in zip(expected, got, strict=True):
        if a.translation is None:
            assert b.translation is None
            continue
        hyps_a = a.translation.nbest or [a.translation]
        hyps_b = b.translation.nbest or [b.translation]
        assert [h.tokens for h in hyps_b] == [h.tokens for h in hyps_a]
        for h, g in zip(hyps_a, hyps_b, strict=True):
            assert g.score == pytest.approx(h.score, abs=1e-4)
        assert b.translation.text == a.translation.text
        if a.translation.weights is not None:
            np.testing.assert_allclose(
                np.asarray(b.translation.weights), a.translation.weights.numpy(), atol=1e-4
            )
            assert theirs.words(b).links == ours.words(a).links


@pytest.mark.parametrize("name", ["rnn", "tf", "plain"])
def test_the_export_is_a_step_model_giving_log_probabilities(tiny_runs, exports, name):
    """The search asks the same of an export as of a torch model (`StepModel`), and its
    step gives what the run's `step_log_probs` gives: log-probabilities."""
    model = OnnxModel(exports[name])
    loaded = load_run(tiny_runs[name])
    assert isinstance(model, StepModel) and isinstance(loaded.model, StepModel)
    assert model.uses_attention is loaded.model.uses_attention is (name != "plain")
    assert model.max_output_tokens is None
    src, mask = model.array_ops.pad([[5, 6, 7, EOS], [8, EOS]])
    memory = model.encode(src, mask)
    prev = np.full((2,), BOS, dtype=np.int64)
    log_probs, _, _ = model.step_log_probs(prev, model.init_state(memory), memory)
    assert log_probs.dtype == np.float32
    np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-5)
    src_t, mask_t = torch.from_numpy(src), torch.from_numpy(mask)
    memory_t = loaded.model.encode(src_t, mask_t)
    with torch.no_grad():
        expected, _, _ = loaded.model.step_log_probs(
            torch.from_numpy(prev), loaded.model.init_state(memory_t), memory_t
        )
    np.testing.assert_allclose(log_probs, expected.numpy(), atol=1e-4)


def test_the_export_describes_itself_and_its_verification(exports):
    info = json.loads((exports["tf"] / "attnmt.json").read_text())
    assert info["format"] == "onnx" and info["model"] == "transformer"
    assert info["layout"]["state"] == ["self_k0", "self_v0", "self_k1", "self_v1"]
    assert info["layout"]["attention"] == ["batch", "layer", "head", "src_len"]
    for key, limit in TOLERANCE.items():
        assert 0 <= info["verified"][key] <= limit
    assert sorted(p.name for p in (exports["tf"] / "vocab").iterdir())
    model = OnnxModel(exports["tf"])
    # Free axes by name: another batch and length run (the example had 3 sentences of 7).
    names = {i.name: i.shape for i in model.decoder.get_inputs()}
    assert names["state.self_k1"][0] == "state_batch" and names["state.self_k1"][2] == "tgt_len"
    assert names["src_mask"] == ["batch", "src_len"] and names["rows"] == ["batch"]
    outputs = {o.name: o.shape for o in model.decoder.get_outputs()}
    assert outputs["new_state.self_v0"][0] == "batch" and outputs["log_probs"][0] == "batch"


def test_the_runtime_topk_graph_is_onnxruntime_topk():
    """The one-operator graph `attnmt.runtime.arrays` keeps as bytes is what onnx.helper
    makes of onnxruntime's TopK (so that the runtime needs no onnx package)."""
    from onnx import TensorProto, helper

    from attnmt.runtime.arrays import TOPK_GRAPH, NumpyOps, OnnxRuntimeOps

    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1, largest=1, sorted=1)],
        "topk",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "v"]),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("values", TensorProto.FLOAT, ["n", "k"]),
            helper.make_tensor_value_info("indices", TensorProto.INT64, ["n", "k"]),
        ],
    )
    made = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10, producer_name="attnmt"
    )
    assert made.SerializeToString() == TOPK_GRAPH
    x = np.random.default_rng(0).standard_normal((6, 5, 4000)).astype(np.float32)
    expected = torch.from_numpy(x).topk(10, dim=-1)
    for ops in (NumpyOps(), OnnxRuntimeOps(1)):  # numpy's partial sort, onnxruntime's TopK
        values, index = ops.topk(x, 10)
        np.testing.assert_array_equal(values, expected.values.numpy())
        np.testing.assert_array_equal(index, expected.indices.numpy())


# Every Luong score and scope, input feeding on and off, local-m in RNNsearch (its step
# count as a tensor), and hard attention's two deterministic inference paths: six exports.
VARIANTS = {
    "luong-dot": {"name": "luong", "attention": "dot"},
    "luong-general-local-p-no-feeding": {
        **{"name": "luong", "attention": "general", "scope": "local-p", "window": 2},
        "input_feeding": False,
    },
    "luong-concat-local-m": {
        "name": "luong",
        "attention": "concat",
        "scope": "local-m",
        "window": 2,
    },
    "luong-location": {"name": "luong", "attention": "location", "max_source_len": 32},
    "rnnsearch-local-m-hard-argmax": {
        **{"name": "rnnsearch", "scope": "local-m", "window": 2},
        **{"mode": "hard", "hard_eval": "argmax"},
    },
    "luong-hard-soft": {
        "name": "luong",
        "attention": "general",
        "mode": "hard",
        "hard_eval": "soft",
    },
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variant_exports_and_searches_as_ours(tiny_runs, tmp_path, variant):
    loaded = load_run(tiny_runs["rnn"])
    cfg = dataclasses.replace(loaded.cfg.model, layers=2, **VARIANTS[variant])
    torch.manual_seed(0)
    model = build_model(cfg, loaded.vocab.src_vocab_size, loaded.vocab.tgt_vocab_size).eval()
    with torch.no_grad():  # peaked outputs: a random model's near-ties would decide nothing
        for p in model.parameters():
            p.mul_(4.0)
    loaded = dataclasses.replace(
        loaded, model=model, cfg=dataclasses.replace(loaded.cfg, model=cfg)
    )
    out = export_onnx(loaded, tmp_path / variant)
    info = json.loads((out / "attnmt.json").read_text())
    assert info["verified"]["log_probs"] <= TOLERANCE["log_probs"]
    assert info["verified"]["attention"] <= TOLERANCE["attention"]
    assert info["layout"]["equal_lengths"] == (cfg.name == "luong")
    onnx_model = OnnxModel(out)
    ids = [[*loaded.vocab.src.encode(line), EOS] for line in LINES if line]
    src, mask = pad_batch(ids, torch.device("cpu"))
    expected = beam_search(model, src, mask, SearchOptions(beam=3, need_weights=True))
    got = beam_search(
        onnx_model, src.numpy(), mask.numpy(), SearchOptions(beam=3, need_weights=True)
    )
    for (a,), (b,) in zip(expected, got, strict=True):
        assert b.tokens == a.tokens
        assert b.score == pytest.approx(a.score, abs=1e-4)
        np.testing.assert_allclose(b.weights, a.weights.numpy(), atol=1e-4)


def test_a_quantised_export_is_smaller_and_still_translates(tiny_runs, tmp_path, capsys):
    out = tmp_path / "int8"
    assert main(["export", str(tiny_runs["rnn"]), "--format", "onnx", "-o", str(out),
                 "--quantize", "int8"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "verified against PyTorch" in printed and "int8 changes" in printed
    info = json.loads((out / "attnmt.json").read_text())
    assert info["quantization"] == "int8" and "int8_differences" in info
    sentences = Translator(load_export(out), beam=2).translate(LINES)
    assert sentences[0].translation.tokens  # translates (its numbers: docs/export.md)


def test_a_tied_embedding_quantises_to_a_graph_that_loads(tiny_exports, tmp_path):
    """The Transformer's target embedding is its output layer (tied): onnxruntime's
    quantiser rewrote the shared weight for the matrix product and the lookup read it
    transposed, a graph that no longer loaded (the reference Transformer). Untied first, the
    int8 graphs load, look the embedding up unchanged and translate near the fp32 ones."""
    import onnx

    from attnmt.export.onnx import quantize_int8, untie_lookups

    out = tmp_path / "tf-int8"
    shutil.copytree(tiny_exports["tf"], out)
    step = onnx.load(str(out / "step.onnx"))
    assert untie_lookups(step) == ["model.generator.weight"]  # looked up and multiplied
    assert untie_lookups(onnx.load(str(out / "encoder.onnx"))) == []  # looked up only
    quantize_int8(out)
    quantised = onnx.load(str(out / "step.onnx"))
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in quantised.graph.initializer}
    original = onnx.load(str(tiny_exports["tf"] / "step.onnx"))
    (generator,) = [i for i in original.graph.initializer if i.name == "model.generator.weight"]
    # The lookup reads its own quantised copy, the embedding as it was (not transposed),
    # each entry within half a quantisation step of the fp32 one.
    name = "model.generator.weight.lookup"
    scale, zero = weights[f"{name}_scale"], weights[f"{name}_zero_point"]
    lookup = (weights[f"{name}_quantized"].astype(np.float32) - zero) * scale
    expected = onnx.numpy_helper.to_array(generator)
    np.testing.assert_allclose(lookup, expected, atol=scale / 2 * 1.001)
    assert weights["model.generator.weight_quantized"].dtype == np.int8  # the product's
    for sentence in Translator(load_export(out), beam=2).translate(LINES):  # loads, decodes
        assert (sentence.translation is None) == (not sentence.source)


def test_bad_exports_are_refused_in_one_sentence(tiny_runs, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    code = main(["export", str(tiny_runs["rnn"]), "--format", "onnx", "-o", str(taken)])
    assert code == 2 and (taken / "keep.txt").read_text() == "mine"
    assert "already exists and is not empty" in capsys.readouterr().err
    code = main(["export", str(tiny_runs["rnn"]), "--format", "onnx", "--quantize", "int16"])
    assert code == 2 and "--quantize int8" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"no attnmt\.json"):
        load_export(tmp_path)
    code = main(["translate", str(taken.parent / "nothing-here"), "-"])
    assert code == 2


def test_translate_refuses_what_only_our_decoder_does(exports, capsys, monkeypatch):
    """The one loader (`attnmt.decoding.loading`) refuses the same for the command line
    and `attnmt.load`, naming the option as each spells it; the CPU an export runs on is
    no refusal."""
    from attnmt import load

    for flag in (["--quantize", "int8"], ["--device", "cuda"]):
        code = main(["translate", str(exports["rnn"]), "-", *flag])
        assert code == 2
        assert f"{flag[0]} works with a run, not an ONNX export" in capsys.readouterr().err
        with pytest.raises(UserError, match=f"^{flag[0][2:]} works with a run, not an ONNX"):
            load(exports["rnn"], **{flag[0][2:]: flag[1]})
    explain = ["--explain", "attention", "--alignments", "json"]
    code = main(["translate", str(exports["rnn"]), "-", *explain])
    assert code == 2 and "--explain works with a run" in capsys.readouterr().err
    with pytest.raises(UserError, match="an ONNX export is decoded alone"):
        load([exports["rnn"], exports["rnn"]])
    assert load(exports["rnn"], device="cpu").loaded.model.__class__.__name__ == "OnnxModel"


def test_the_ctranslate2_types_listed_are_ctranslate2s():
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    from attnmt.cli import export as cli_export
    from attnmt.export import ctranslate2 as ct2_export

    assert sorted(cli_export.CT2_TYPES) == sorted(ACCEPTED_MODEL_TYPES)
    assert cli_export.MAX_POSITIONS == ct2_export.MAX_POSITIONS


# What the runtime's install leaves out (docs/export.md, pyproject.toml's extras): a test
# process that cannot import them translates with an export as the run does.
NOT_IN_THE_RUNTIME = ("torch", "matplotlib", "fastapi", "uvicorn", "sacrebleu", "sklearn", "onnx")
BLOCKER = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is not installed here (the runtime's install)")
sys.meta_path.insert(0, Block())
from attnmt.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_runtime_translates_without_torch(tiny_runs, exports, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    code = BLOCKER.format(blocked=NOT_IN_THE_RUNTIME)
    args = [str(source), "--beam", "3", "--alignments", "json"]
    done = subprocess.run(
        [sys.executable, "-c", code, "translate", str(exports["rnn"]), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert main(["translate", str(tiny_runs["rnn"]), *args, "-o", str(tmp_path / "run.jsonl")]) == 0
    expected = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    for a, b in zip(expected, got, strict=True):
        assert b["translation"] == a["translation"] and b["links"] == a["links"]
        assert b["score"] == pytest.approx(a["score"], abs=1e-4)
    # ...and the blocker blocks: the run itself needs torch.
    blocked = subprocess.run(
        [sys.executable, "-c", code, "translate", str(tiny_runs["rnn"]), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert blocked.returncode != 0 and "torch is not installed here" in blocked.stderr


def test_attnmt_load_translates_an_export_without_torch(tiny_runs, exports):
    """The Python face is as torch-free as the command line: `attnmt.load(EXPORT_DIR)`
    translates in a process that cannot import torch (matplotlib stays: the results draw
    themselves), and gives the run's translation and links."""
    import attnmt

    code = (
        BLOCKER.split("from attnmt.cli")[0].format(blocked=("torch",))
        + "import json, attnmt\n"
        + f"done = attnmt.load({str(exports['rnn'])!r}).translate({LINES[0]!r}, beam=3)\n"
        + "print(json.dumps([done.text, done.record['links']]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text, links = json.loads(done.stdout)
    run = attnmt.load(tiny_runs["rnn"]).translate(LINES[0], beam=3)
    assert text == run.text and links == run.record["links"]


def test_the_docs_python_block_translates_with_an_export(exports, tmp_path, monkeypatch, capsys):
    """docs/export.md's runtime block, run on a tiny export in its place."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "export.md").read_text()
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "load_export" in b]
    place = tmp_path / "runs" / "quickstart" / "onnx"
    shutil.copytree(exports["rnn"], place)
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "docs/export.md", "exec"), {})
    printed = capsys.readouterr().out
    translator = Translator(load_export(place), beam=5)
    (sentence,) = translator.translate(["In the beginning was the Word."])
    assert printed.startswith(sentence.translation.text)


def test_the_server_serves_an_export_as_the_run(tiny_runs, exports):
    """`attnmt serve EXPORT_DIR`: the page's answers (translation, attention, the search,
    forced scores) from the ONNX graphs equal the run's; explanations are refused."""
    from fastapi.testclient import TestClient

    from attnmt.serve import RunDecoder, Settings, create_app

    settings = Settings()
    decoders = {
        "run": RunDecoder("run", load_run(tiny_runs["rnn"]), settings),
        "onnx": RunDecoder("onnx", load_export(exports["rnn"]), settings),
    }
    with TestClient(create_app(decoders, settings)) as client:
        answers = {}
        for name in decoders:
            request = {"model": name, "text": LINES[0], "beam": 3, "search": True, "weights": True}
            translated = client.post("/api/translate", json=request)
            pair = {"source": LINES[3], "target": LINES[0]}
            scored = client.post("/api/score", json={"model": name, "pair": pair})
            assert translated.status_code == 200 and scored.status_code == 200
            answers[name] = (translated.json()["translations"][0], scored.json()["scores"][0])
        (run_t, run_s), (onnx_t, onnx_s) = answers["run"], answers["onnx"]
        assert onnx_t["translation"] == run_t["translation"]
        assert onnx_t["alignment"] == run_t["alignment"]
        for a, b in zip(run_t["attention"], onnx_t["attention"], strict=True):
            np.testing.assert_allclose(b["subword"], a["subword"], atol=1e-4)
        assert len(onnx_t["search"]["nodes"]) == len(run_t["search"]["nodes"])
        assert onnx_s["log_prob"] == pytest.approx(run_s["log_prob"], abs=1e-4)
        np.testing.assert_allclose(onnx_s["token_log_probs"], run_s["token_log_probs"], atol=1e-4)
        refused = client.post(
            "/api/translate", json={"model": "onnx", "text": "cat", "explain": "occlusion"}
        )
        assert refused.status_code == 422 and "ONNX export" in refused.json()["detail"]
        models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
        assert models["onnx"]["explain_methods"] == []
        assert models["onnx"]["parameters"] == models["run"]["parameters"]


def test_the_python_api_loads_an_export(tiny_runs, exports):
    """`attnmt.load(EXPORT_DIR)` (the notebooks' face): translate, score and align as the
    run does; an explanation is refused in one sentence."""
    import attnmt

    run, export = attnmt.load(tiny_runs["rnn"]), attnmt.load(exports["rnn"])
    a = run.translate(LINES[0], beam=3, alternatives=2)
    b = export.translate(LINES[0], beam=3, alternatives=2)
    assert b.text == a.text and b.links == a.links
    assert b.score == pytest.approx(a.score, abs=1e-4)
    assert [x["translation"] for x in b.alternatives] == [x["translation"] for x in a.alternatives]
    assert export.score(LINES[3], LINES[0]).log_prob == pytest.approx(
        run.score(LINES[3], LINES[0]).log_prob, abs=1e-4
    )
    with pytest.raises(UserError, match="ONNX export"):
        export.translate(LINES[0], explain="occlusion")
    with pytest.raises(UserError, match="--quantize int8"):
        attnmt.load(exports["rnn"], quantize="int8")


def test_graphs_that_do_not_reproduce_the_model_are_not_written(tiny_runs, tmp_path, monkeypatch):
    """The verification's refusal: one sentence with the differences, nothing left behind."""
    from attnmt.export import onnx as onnx_export

    monkeypatch.setattr(onnx_export, "export_graphs", lambda *args: None)
    monkeypatch.setattr(onnx_export, "verify", lambda *a: {"log_probs": 0.5, "attention": 0.0})
    with pytest.raises(UserError, match=r"do not reproduce the model: they differ in log_probs"):
        export_onnx(load_run(tiny_runs["rnn"]), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
