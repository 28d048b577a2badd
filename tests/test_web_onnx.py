"""The page's decoder against `attnmt translate EXPORT`: src/attnmt/web/onnx_model.js runs
an ONNX export's graphs by onnxruntime-node, src/attnmt/web/translate.js tokenises a line
(sentencepiece.js), searches it (search.js) and detokenises; Python's `Translator` over
`load_export` does the same with onnxruntime and numpy. Every family the export supports:
the tiny trained runs of conftest (RNNsearch, a Transformer, RNNencdec without attention)
and a randomly initialised Luong model (an LSTM, input feeding, local-m's step count as a
state), each line decoded alone on both sides, greedy and beam 3 (n-best 2, the search
recorded), with and without a forced prefix.

Expected: the same source ids and pieces, the same tokens, text and target pieces, the
same n-best in the same order and the same recorded search (nodes, parents, fates);
scores, log-probabilities and attention within `TOLERANCE`. Both sides search alike to
the bit (tests/test_web_search.py); what can differ is what the graphs give: npm has no
onnxruntime-node 1.31.1 (the Python package's version), so node runs 1.30.0, another
build whose kernels may add in another order (float32: ~1e-7 relative, ~1e-5 on a
log-probability of -30). Measured here (Linux x86-64): log-probabilities and attention
equal to the bit, scores 1e-14 apart (the length penalty's pow, libm's against V8's).
1e-4 is the issue's bound for scores and the export's own for attention
(attnmt.export.onnx.TOLERANCE), with room for another CPU's kernels.

onnxruntime-node is installed once from the npm registry into a cache outside the
repository (`ORT_NODE_CACHE`) and checked against its recorded integrity hash; the tests
skip, saying why, without node, npm or the registry.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

from attnmt.data.vocab import EOS
from attnmt.decoding.records import search_record
from attnmt.decoding.translator import Translator
from attnmt.export.web_tokenizer import tokenizer_json
from attnmt.runtime import load_export
from attnmt.runtime.arrays import NumpyOps

NODE, NPM = shutil.which("node"), shutil.which("npm")
pytestmark = pytest.mark.skipif(
    NODE is None or NPM is None,
    reason="node and npm (Node.js) are not installed: the page's decoder cannot run here",
)

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "src" / "attnmt" / "web"
# The onnxruntime-node release nearest the Python package's (onnxruntime 1.31.1; npm's
# newest is 1.30.0), and its tarball's hash as `npm view onnxruntime-node@1.30.0
# dist.integrity` gives it. Its CPU library is in the tarball: installed without its
# install script (which fetches CUDA libraries from NuGet).
ORT_NODE_VERSION = "1.30.0"
ORT_NODE_INTEGRITY = "sha512-twhs1C2C/BFkz1yc5OY0KIU2GUq6DURO7hD4bx5Q2Qy3nAMJwRXW8xU3NVczE29VA9lolLOYepoD8fjTGOfIqw=="  # noqa: E501
ORT_NODE_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "attnmt"
    / f"onnxruntime-node-{ORT_NODE_VERSION}"
)
TOLERANCE = 1e-4  # scores, log-probabilities and attention (see the docstring)
ROUNDED = 1e-4 + 1e-9  # a search record rounds to 4 decimals: equal, or one unit apart

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "café", "naïve"]
WORDS += ["Ελληνικά", "λόγος", "Привет", "мир", "שלום", "עולם", "مرحبا", "بالعالم", "🙂", "🚀"]
LINES = [
    "the cat sat on the mat",
    "",
    "Привет мир 🙂",
    "naïve café λόγος Ελληνικά",
    "שלום עולם مرحبا بالعالم",
    "  dog\tran \u3000 far  ",  # whitespace as Python's str.split() reads it
    "🚀 the dog ran far on the mat 🙂",
    "Zebra 漢字 QWERTY",  # pieces the vocabulary lacks: <unk>
    "cafe\u0301 ﬁne",  # normalised (NFKC) before the pieces
    " ".join(WORDS[(7 * i) % len(WORDS)] for i in range(450)),  # past the 400-subword limit
]
# line -> a forced start of its translation: the untrained Transformer and RNNencdec end
# at once otherwise, so these are what carry their decoder states over several steps
PREFIXED = {0: "mat the on sat", 3: "Ελληνικά λόγος café naïve"}
SEARCHES = {  # name -> Translator's options
    "greedy": {"beam": 1, "n_best": 1},
    "beam 3": {"beam": 3, "n_best": 2},
}


# --- onnxruntime-node ---------------------------------------------------------------------


def _installed(folder: Path) -> bool:
    package = folder / "node_modules" / "onnxruntime-node" / "package.json"
    return package.is_file() and json.loads(package.read_text())["version"] == ORT_NODE_VERSION


def _integrity(folder: Path) -> str | None:
    """The hash npm checked the installed tarball against (its lock file records it)."""
    lock = json.loads((folder / "node_modules" / ".package-lock.json").read_text())
    return lock["packages"].get("node_modules/onnxruntime-node", {}).get("integrity")


def _install(folder: Path) -> str | None:
    """Install onnxruntime-node into `folder` (beside it, then renamed into place: never
    half); None when done, else why not."""
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".ort-node."))
    try:
        done = subprocess.run(
            [NPM, "install", "--prefix", str(tmp), "--ignore-scripts", "--no-audit", "--no-fund",
             "--no-update-notifier", "--fetch-retries=1", f"onnxruntime-node@{ORT_NODE_VERSION}"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0 or not _installed(tmp):
            return (done.stderr.strip().splitlines() or ["npm said nothing"])[0]  # its code
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
        return None
    except subprocess.TimeoutExpired:
        return "npm did not finish within 5 minutes"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def onnxruntime_node() -> Path:
    """The folder whose node_modules holds onnxruntime-node `ORT_NODE_VERSION`, installed
    on first use and checked against `ORT_NODE_INTEGRITY` every time."""
    try:
        ORT_NODE_CACHE.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{ORT_NODE_CACHE}.lock"):
            failed = None if _installed(ORT_NODE_CACHE) else _install(ORT_NODE_CACHE)
    except OSError as err:
        failed = f"its cache folder: {err}"
    if failed:
        pytest.skip(
            f"cannot install onnxruntime-node {ORT_NODE_VERSION} from the npm registry "
            f"({failed}): the page's decoder cannot run here"
        )
    found = _integrity(ORT_NODE_CACHE)
    assert found == ORT_NODE_INTEGRITY, (
        f"onnxruntime-node {ORT_NODE_VERSION} in {ORT_NODE_CACHE} has integrity {found}, not "
        f"the recorded {ORT_NODE_INTEGRITY}: remove the folder to fetch it again"
    )
    return ORT_NODE_CACHE


# --- the exports ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def luong_export(tiny_runs, tmp_path_factory) -> Path:
    """A Luong model (2 LSTM layers, concat score, local-m, input feeding), randomly
    initialised and sharpened as tests/test_onnx_export.py does (a random model's
    near-ties would decide nothing), exported with the vocabulary of the "rnn" run."""
    import torch

    from attnmt.decoding.runs import load_run
    from attnmt.export.onnx import export_onnx
    from attnmt.models import build_model

    loaded = load_run(tiny_runs["rnn"])
    cfg = dataclasses.replace(
        loaded.cfg.model, name="luong", layers=2, attention="concat", scope="local-m", window=2
    )
    torch.manual_seed(0)
    model = build_model(cfg, loaded.vocab.src_vocab_size, loaded.vocab.tgt_vocab_size).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    loaded = dataclasses.replace(
        loaded, model=model, cfg=dataclasses.replace(loaded.cfg, model=cfg)
    )
    return export_onnx(loaded, tmp_path_factory.mktemp("web_onnx") / "luong")


@pytest.fixture(scope="module")
def exports(tiny_exports, luong_export) -> dict[str, Path]:
    return {**tiny_exports, "luong": luong_export}


def _tokenizers(export: Path) -> dict:
    """{src, tgt}: the export's sentencepiece models as sentencepiece.js reads them."""
    info = json.loads((export / "attnmt.json").read_text(encoding="utf-8"))["vocab"]
    files = info["files"] * 2 if info["joint"] else info["files"]  # joint: one for both
    return {side: tokenizer_json(export / f) for side, f in zip(("src", "tgt"), files, strict=True)}


class StableOps(NumpyOps):
    """numpy's operations with a top-k that keeps, of equal values straddling the k-th
    place, the lower indices, as search.js does (tests/test_web_search.py). numpy's
    argpartition keeps an arbitrary one of them. The translations here do not depend on
    it (they are compared with the search `attnmt translate` runs), but a record can,
    where a pruned candidate ties one left unseen to the bit (the untrained RNNencdec's
    near-uniform rows have such ties): the recorded searches are compared with Python's
    search over these operations."""

    def topk(self, x, k):
        order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        return np.take_along_axis(x, order, -1), order


# --- both sides ------------------------------------------------------------------------------

DRIVER = """
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
const [web, ortFolder, casesPath] = process.argv.slice(2);
const ort = createRequire(join(ortFolder, "/"))("onnxruntime-node");
const url = (name) => pathToFileURL(join(web, name)).href;
const { OnnxModel, sessionOptions } = await import(url("onnx_model.js"));
const { SentencePiece } = await import(url("sentencepiece.js"));
const { translateLine } = await import(url("translate.js"));
const { exports, cases } = JSON.parse(readFileSync(casesPath, "utf8"));

const loaded = {};
for (const [name, given] of Object.entries(exports)) {
  const read = (file) => readFileSync(join(given.dir, file));
  const model = await OnnxModel.load(ort, read, sessionOptions(1));
  const vocab = { src: new SentencePiece(given.src), tgt: new SentencePiece(given.tgt) };
  loaded[name] = { model, vocab };
}
const out = [];
for (const c of cases) {
  const { model, vocab } = loaded[c.export];
  const options = { beam: c.beam, nBest: c.n_best, needWeights: model.usesAttention };
  const record = c.beam > 1;
  out.push(await translateLine(model, vocab, c.line, options, { prefix: c.prefix, record }));
}
process.stdout.write(JSON.stringify({ versions: ort.env.versions, sentences: out }));
"""


@pytest.fixture(scope="module")
def decoded(exports, onnxruntime_node, tmp_path_factory) -> dict:
    """Every case (export x search x line, and the prefixed lines) decoded by both: Python's
    `Translator` (one line at a time) and the page's modules, all in one node process."""
    cases, python = [], []
    for name, export in exports.items():
        loaded = load_export(export, threads=1)
        uses_attention = loaded.model.uses_attention
        stable = dataclasses.replace(loaded, model=copy.copy(loaded.model))
        stable.model.array_ops = StableOps()
        for search, options in SEARCHES.items():
            record = options["beam"] > 1
            translator = Translator(loaded, **options, need_weights=uses_attention)
            recorder = Translator(stable, **options, need_weights=uses_attention)
            todo = [(i, line, None) for i, line in enumerate(LINES)]
            todo += [(i, LINES[i], translator.prefix_ids(p)) for i, p in PREFIXED.items()]
            for i, line, prefix in todo:
                (sentence,) = translator.translate([line], prefixes=[prefix])
                tree = None
                if record and line.strip():  # the search again, recorded (`StableOps`)
                    (again,) = recorder.translate([line], prefixes=[prefix], record=True)
                    tree = search_record(again, recorder.vocab, recorder.choice)
                name_of = f"{name}, {search}, line {i}" + (" with a prefix" if prefix else "")
                cases.append({"export": name, "line": line, "prefix": prefix, **options})
                python.append((name_of, sentence, translator.vocab, tree))
    folder = tmp_path_factory.mktemp("web_onnx_driver")
    driver, given = folder / "driver.mjs", folder / "cases.json"
    driver.write_text(DRIVER, encoding="utf-8")
    inputs = {name: {"dir": str(path), **_tokenizers(path)} for name, path in exports.items()}
    given.write_text(json.dumps({"exports": inputs, "cases": cases}), encoding="utf-8")
    done = subprocess.run(
        [NODE, str(driver), str(WEB), str(onnxruntime_node), str(given)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    pairs = list(zip(python, answer["sentences"], strict=True))
    return {"versions": answer["versions"], "pairs": pairs}


def _close(got, expected, where: str, atol: float = TOLERANCE) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), expected, atol=atol, rtol=0,
                               err_msg=where)  # fmt: skip


def _same_hypothesis(js: dict, py, vocab, where: str) -> None:
    assert js["tokens"] == list(py.tokens), where
    assert js["text"] == vocab.tgt.decode(py.tokens), where
    _close(js["score"], py.score, f"{where}: score")
    _close(js["log_prob"], py.log_prob, f"{where}: log_prob")
    if py.weights is None:
        assert js["attention"] is None, where
        return
    rows = np.asarray(py.weights, dtype=np.float64)
    _close(js["attention"], rows.reshape(rows.shape[0], -1), f"{where}: attention")


def _same_search(js: dict, py: dict, where: str) -> None:
    """Two recorded searches (rounded to 4 decimals): the same tree, numbers one unit of
    the last decimal apart at most."""
    assert js["source_pieces"] == py["source_pieces"] and js["nbest"] == py["nbest"], where
    assert len(js["nodes"]) == len(py["nodes"]), where
    for a, b in zip(js["nodes"], py["nodes"], strict=True):
        at = f"{where}: node {b['id']}"
        exact = ("id", "parent", "depth", "token", "piece", "status", "best", "rank")
        assert {k: a[k] for k in exact} == {k: b[k] for k in exact}, at
        for key in ("log_prob", "cum_log_prob", "score"):
            _close(a[key], b[key], f"{at}: {key}", ROUNDED)
        assert [p for p, _ in a["rejected"]] == [p for p, _ in b["rejected"]], at
        _close([v for _, v in a["rejected"]], [v for _, v in b["rejected"]], at, ROUNDED)
        if b["attention"] is None:
            assert a["attention"] is None, at
        else:
            _close(a["attention"], b["attention"], f"{at}: attention", ROUNDED)


# --- the tests --------------------------------------------------------------------------------


def test_the_page_decodes_an_export_as_python_does(decoded):
    """Every case: the same sentence, hypothesis by hypothesis, and the same search."""
    assert decoded["versions"]["node"] == ORT_NODE_VERSION
    for (where, sentence, vocab, tree), js in decoded["pairs"]:
        assert js["source"] == sentence.source, where
        if sentence.translation is None:  # a blank line: nothing decoded
            assert js["translation"] is None and js["ids"] == [], where
            continue
        assert js["ids"] == sentence.ids and js["truncated"] == sentence.truncated, where
        assert js["source_pieces"] == vocab.src.id_pieces([*sentence.ids, EOS]), where
        result, got = sentence.translation, js["translation"]
        assert got["target_pieces"] == vocab.tgt.id_pieces([*result.tokens, EOS]), where
        _same_hypothesis(got, result, vocab, where)
        if result.nbest is None:
            assert got["nbest"] is None, where
        else:
            assert len(got["nbest"]) == len(result.nbest), where
            for rank, (a, b) in enumerate(zip(got["nbest"], result.nbest, strict=True)):
                _same_hypothesis(a, b, vocab, f"{where}, n-best {rank}")
        if tree is not None:
            _same_search(got["search"], tree, where)
        else:
            assert got["search"] is None, where


def test_the_cases_cover_what_they_say(decoded):
    """The cases reach what they are there for: a cut source, unknown pieces, searched
    outputs of several tokens (the trained RNNsearch, the sharpened Luong), forced prefixes
    of four tokens or more (every export), a second best in every n-best."""
    by_name = {where: (sentence, js) for (where, sentence, *_), js in decoded["pairs"]}
    assert {where.split(",")[0] for where in by_name} == {"rnn", "tf", "plain", "luong"}
    assert by_name["rnn, greedy, line 9"][0].truncated  # past 400 subwords
    assert 1 in by_name["rnn, greedy, line 7"][0].ids  # <unk>
    for name in ("rnn", "luong"):
        assert len(by_name[f"{name}, beam 3, line 0"][0].translation.tokens) >= 3, name
    for where, (sentence, js) in by_name.items():
        if sentence.prefix:
            assert len(sentence.prefix) >= 4, where
            assert js["translation"]["tokens"][: len(sentence.prefix)] == sentence.prefix
        if "beam" in where and sentence.translation is not None:
            assert len(sentence.translation.nbest) == 2, where


def test_a_bad_export_is_named_in_one_sentence(tiny_exports, onnxruntime_node, tmp_path):
    """A folder that is no ONNX export, and one whose graph is missing, refused by name."""
    broken = tmp_path / "broken"
    shutil.copytree(tiny_exports["rnn"], broken)
    (broken / "step.onnx").unlink()
    script = tmp_path / "bad.mjs"
    script.write_text(
        """
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
const [web, ortFolder, ...folders] = process.argv.slice(2);
const ort = createRequire(join(ortFolder, "/"))("onnxruntime-node");
const { OnnxModel } = await import(pathToFileURL(join(web, "onnx_model.js")).href);
for (const folder of folders) {
  try {
    await OnnxModel.load(ort, (file) => readFileSync(join(folder, file)));
    console.log("loaded");
  } catch (err) {
    console.log(err.message.split("\\n")[0]);
  }
}
""",
        encoding="utf-8",
    )
    done = subprocess.run(
        [NODE, str(script), str(WEB), str(onnxruntime_node), str(tmp_path), str(broken)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    missing, no_graph = done.stdout.splitlines()
    assert missing.startswith("cannot read the export's attnmt.json")
    assert no_graph.startswith("cannot load the graph step.onnx of the export")
