"""The JavaScript search (src/attnmt/web/search.js) against `attnmt.decoding.search`: the
same step models, defined once here as data (tables of log-probabilities and attention
rows), searched by both; the same tokens, log-probabilities, scores, weights, n-best
order and recorded search, node for node.

The step model reads its next row from a code of the hypothesis' history, so a beam
whose state the search reorders wrongly reads the wrong row. Its log-probabilities are
float32, as an ONNX export's step graph gives them (the graph ends in the log-softmax;
neither search takes one). Both searches add them in float32 in the same order, so the
log-probabilities must be equal to the bit; the scores divide them by the length
penalty in float64, where only `pow` (libm's against V8's) could differ in the last bit:
hence `SCORE_TOLERANCE`. The records are compared as JSON, equal after rounding.

One node process runs every case (tests skip without node).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from attnmt.data.vocab import EOS
from attnmt.decoding.attention_choice import AttentionChoice
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.hypotheses import begin
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.records import search_record
from attnmt.decoding.search import alternatives, beam_search, greedy
from attnmt.runtime.arrays import NUMPY, NumpyOps

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    NODE is None, reason="node (Node.js) is not installed: the JavaScript search cannot run"
)

SEARCH_JS = Path(__file__).resolve().parents[1] / "src" / "attnmt" / "web" / "search.js"
SCORE_TOLERANCE = 1e-12  # relative: a last-bit difference of pow() in float64, nothing more
V, ROWS = 12, 23  # vocabulary (PAD UNK BOS EOS and 8 words); rows of a table
PIECES = ["<pad>", "<unk>", "<s>", "</s>", *(f"▁w{i}" for i in range(4, V))]
LAYERS, HEADS = 2, 3  # a Transformer's weights: (L, H, S) per step
# Attention weights at an exact half of the record's 4th decimal (odd multiples of 1/32):
# Python's round() takes the even neighbour, JavaScript's toFixed() the one above.
HALVES = np.array([13, 1, 9, 5, 4]) / 32


# --- the step models, as data ---------------------------------------------------------------


def _table(seed: int, width: int, *, eos: float = 0.0, layout: str = "rnn", ties: bool = False):
    """A step model: ROWS rows of float32 log-probabilities over V tokens (log-softmax in
    float64 of normal logits, `eos` added to EOS's; `ties`: logits in steps of 0.5, so
    that rows hold equal log-probabilities), and an attention row per table row over
    `width` source positions, a softmax of cosines ((S,) "rnn", (L, H, S) "transformer");
    an RNN's first rows are `HALVES` turned, weights that round at an exact half."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(ROWS, V)) * 1.5
    if ties:
        logits = np.round(logits * 2) / 2
    logits[:, EOS] += eos
    log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    parts = (1,) if layout == "rnn" else (LAYERS, HEADS)
    code = np.arange(ROWS).reshape(ROWS, *([1] * len(parts)), 1)
    part = np.arange(int(np.prod(parts))).reshape(1, *parts, 1)
    position = np.arange(width)
    energy = 2.0 * np.cos(1.3 * code + 0.7 * position * (part + 1) + part)
    weights = np.exp(energy) / np.exp(energy).sum(-1, keepdims=True)
    if layout == "rnn":
        weights = weights[:, 0]
        if width == len(HALVES):
            weights[:8] = [np.roll(HALVES, r) for r in range(8)]
    return {
        "log_probs": log_probs.astype(np.float32).tolist(),
        "weights": weights.astype(np.float32).reshape(ROWS, -1).tolist(),
        "layout": layout,
    }


class Rows:
    """A memory or a state: one code per row; `select` picks rows."""

    def __init__(self, codes: np.ndarray) -> None:
        self.codes = codes

    def select(self, rows) -> Rows:
        return Rows(self.codes[np.asarray(rows, dtype=np.int64)])


class TableModel:
    """`StepModel` over a `_table`: the memory is the source's id sum, the state a code of
    the history read so far, and each step reads table row code' = (5 code + 3 prev +
    memory) mod ROWS (search.js's driver below does the same)."""

    uses_attention, reads_images, max_output_tokens = True, False, None

    def __init__(self, table: dict, ops: NumpyOps = NUMPY) -> None:
        self.array_ops = ops
        self.log_probs = np.asarray(table["log_probs"], dtype=np.float32)  # (ROWS, V)
        weights = np.asarray(table["weights"], dtype=np.float32)
        if table["layout"] == "transformer":
            weights = weights.reshape(ROWS, LAYERS, HEADS, -1)
        self.weights = weights  # (ROWS, S) or (ROWS, L, H, S)

    def encode(self, src, src_mask):
        return Rows(src.sum(1) % ROWS)

    def init_state(self, memory):
        return Rows(memory.codes * 0 + 1)

    def step_log_probs(self, prev, state, memory, *, need_weights=False):
        codes = (5 * state.codes + 3 * prev + memory.codes) % ROWS
        weights = self.weights[codes] if need_weights else None
        return self.log_probs[codes], Rows(codes), weights


class StableOps(NumpyOps):
    """numpy's operations with a top-k that keeps, of equal values straddling the k-th
    place, the lower indices (a stable sort), as search.js does; numpy's argpartition
    keeps an arbitrary one of them."""

    def topk(self, x, k):
        order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        return np.take_along_axis(x, order, -1), order


# --- the cases ------------------------------------------------------------------------------

SHORT = [5, 6, 7, 8, EOS]  # source ids as the search reads them, EOS included
LONG = [4 + i % 8 for i in range(59)] + [EOS]  # 60: float32 limit 67, float64 68 (ratio 1.05)
RNN = _table(1, len(SHORT))
TRANSFORMER = _table(2, len(SHORT), layout="transformer")
EOS_EARLY = _table(3, len(SHORT), eos=2.5)
NO_EOS = _table(4, len(LONG), eos=-9.0)
TIES = _table(5, len(SHORT), ties=True)
# 10 tokens: numpy sums their log-probabilities pairwise, not in order (another float32)
LONG_PREFIX = [7, 7, 4, 4, 4, 4, 9, 8, 9, 6]
MEAN = {"layers": LAYERS, "heads": HEADS, "layer": 1, "head": None}  # the default choice
HEAD = {"layers": LAYERS, "heads": HEADS, "layer": 2, "head": 3}


def _case(name, kind, table, options, src=SHORT, prefix=None, choice=None, **extra):
    return {
        "name": name,
        "kind": kind,  # greedy, beam, alternatives, translate
        "table": table,
        "src": src,
        "prefix": prefix,
        "options": {"need_weights": True, **options},
        "choice": choice,
        "count": extra.get("count", 5),
        "min_prob": extra.get("min_prob", 0.0),
        "record": extra.get("record", kind == "beam"),
        "stream": extra.get("stream", False),
        "stable": extra.get("stable", False),  # compared with `StableOps`' search
    }


CASES = [
    _case("greedy", "greedy", RNN, {"alpha": 0.6}),
    _case("greedy, prefix", "greedy", TRANSFORMER, {"alpha": 1.0}, prefix=[6, 9]),
    _case("greedy, length cap", "greedy", NO_EOS, {"alpha": 0.0, "max_len": 6}, src=LONG),
    _case("greedy, EOS first", "greedy", EOS_EARLY, {"alpha": 0.6}),
    _case("beam 1", "beam", RNN, {"beam": 1, "alpha": 0.0}, stream=True),
    _case("beam 2, prefix", "beam", RNN, {"beam": 2, "alpha": 0.6}, prefix=[7], stream=True),
    _case("beam 2, n-best 2", "beam", TRANSFORMER, {"beam": 2, "n_best": 2, "alpha": 1.0},
          choice=HEAD),
    _case("beam 5, n-best 5", "beam", TRANSFORMER, {"beam": 5, "n_best": 5, "alpha": 1.0},
          choice=MEAN),
    _case("beam 5, prefix", "beam", RNN, {"beam": 5, "alpha": 0.6}, prefix=[4, 11, 5]),
    _case("greedy, long prefix", "greedy", RNN, {"alpha": 0.6}, prefix=LONG_PREFIX),
    _case("beam 2, long prefix", "beam", RNN, {"beam": 2, "alpha": 0.6}, prefix=LONG_PREFIX),
    _case("beam 2, EOS early", "beam", EOS_EARLY, {"beam": 2, "n_best": 2, "alpha": 0.6}),
    _case("beam 5, EOS early", "beam", EOS_EARLY, {"beam": 5, "n_best": 5, "alpha": 0.0},
          stream=True),
    _case("beam 2, limit", "beam", NO_EOS, {"beam": 2, "n_best": 2, "alpha": 0.6,
          "max_len_ratio": 1.05}, src=LONG),
    _case("beam 5, limit", "beam", NO_EOS, {"beam": 5, "n_best": 3, "alpha": 1.0, "max_len": 7},
          src=LONG),
    _case("alternatives, greedy", "alternatives", EOS_EARLY, {"alpha": 0.6}, prefix=[5],
          min_prob=0.05),
    _case("alternatives, beam 3", "alternatives", TRANSFORMER, {"beam": 3, "alpha": 0.6}, count=4),
    _case("alternatives, EOS", "alternatives", EOS_EARLY, {"beam": 2, "alpha": 1.0}, count=6),
    _case("alternatives, one", "alternatives", RNN, {"alpha": 0.0}, prefix=[8, 8], min_prob=0.9),
    _case("translate, beam 1", "translate", RNN, {"alpha": 0.6}, record=False),
    _case("translate, recorded", "translate", RNN, {"beam": 1, "alpha": 0.6}, record=True),
    _case("ties, greedy", "greedy", TIES, {"alpha": 0.6}),
    _case("ties, beam 2", "beam", TIES, {"beam": 2, "n_best": 2}, stable=True),
    _case("ties, beam 5", "beam", TIES, {"beam": 5, "n_best": 5, "alpha": 0.0}, stable=True),
    _case("ties, alternatives", "alternatives", TIES, {"beam": 2}, count=8, stable=True),
]  # fmt: skip


# --- the JavaScript side ----------------------------------------------------------------------

DRIVER = """
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const [searchPath, casesPath] = process.argv.slice(2);
const search = await import(pathToFileURL(searchPath).href);
const { cases, pieces, rows } = JSON.parse(readFileSync(casesPath, "utf8"));

// TableModel of tests/test_web_search.py: memory and state are one code per row.
function tableModel(table) {
  const logProbs = table.log_probs.map((row) => Float32Array.from(row));
  const weights = table.weights.map((row) => Float32Array.from(row));
  return {
    encode: async (src) => [src.reduce((a, b) => a + b, 0) % rows],
    initState: async (memory) => memory.map(() => 1),
    step: async (prev, state, memory, needWeights) => {
      const codes = state.map((code, r) => (5 * code + 3 * prev[r] + memory[r]) % rows);
      return {
        logProbs: codes.map((c) => logProbs[c]),
        state: codes,
        weights: needWeights ? codes.map((c) => weights[c]) : null,
      };
    },
    select: async (fields, indices) => indices.map((i) => fields[i]),
  };
}

const camel = (o) => ({ beam: o.beam ?? 1, alpha: o.alpha ?? 0.6, nBest: o.n_best ?? 1,
  maxLenRatio: o.max_len_ratio ?? 2.0, maxLen: o.max_len ?? null, needWeights: o.need_weights });
const hyp = (h) => ({ tokens: h.tokens, score: h.score, log_prob: h.logProb,
  weights: h.weights && h.weights.map((row) => Array.from(row)) });
const piece = (id) => pieces[id];

const out = [];
for (const c of cases) {
  const model = tableModel(c.table);
  const options = camel(c.options);
  const streamed = [];
  const onStep = c.stream ? (nodes) => streamed.push(nodes.map((n) => n.id)) : null;
  const answer = { streamed };
  let found;
  if (c.kind === "greedy") {
    answer.hypotheses = [hyp(await search.greedy(model, c.src, options, { prefix: c.prefix }))];
  } else if (c.kind === "alternatives") {
    const alts = await search.alternatives(model, c.src, c.prefix, options,
      { count: c.count, minProb: c.min_prob });
    answer.alternatives = alts.map((a) => ({ token: a.token, log_prob: a.logProb,
      hypothesis: hyp(a.hypothesis) }));
  } else {
    const run = c.kind === "beam" ? search.beamSearch : search.translate;
    found = await run(model, c.src, options, { prefix: c.prefix, record: c.record, onStep });
    answer.hypotheses = found.hypotheses.map(hyp);
    answer.record = found.tree && search.searchRecord(found.tree, {
      sourcePieces: c.src.map(piece), piece, choice: c.choice, heads: c.choice !== null });
  }
  out.push(answer);
}
process.stdout.write(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def js_answers(tmp_path_factory) -> list[dict]:
    """Every case searched by search.js, in one node process."""
    folder = tmp_path_factory.mktemp("web_search")
    driver, cases = folder / "driver.mjs", folder / "cases.json"
    driver.write_text(DRIVER, encoding="utf-8")
    cases.write_text(json.dumps({"cases": CASES, "pieces": PIECES, "rows": ROWS}), "utf-8")
    done = subprocess.run(
        [NODE, str(driver), str(SEARCH_JS), str(cases)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# --- the Python side ------------------------------------------------------------------------


class Pieces:
    """A vocabulary side with names only (what the records read)."""

    def id_pieces(self, ids):
        return [PIECES[i] for i in ids]


VOCAB = SimpleNamespace(src=Pieces(), tgt=Pieces())


def _choice(case) -> AttentionChoice:
    given = case["choice"]
    if given is None:
        return AttentionChoice()
    return AttentionChoice(True, given["layer"], given["head"], given["layers"], given["heads"])


def _record(case, tree) -> dict:
    sentence = SimpleNamespace(translation=SimpleNamespace(search=tree), ids=case["src"][:-1])
    heads = case["choice"] is not None
    return search_record(sentence, VOCAB, _choice(case), heads=heads)


def _python(case) -> dict:
    """The case searched by attnmt.decoding.search, as the driver reports it."""
    model = TableModel(case["table"], StableOps() if case["stable"] else NUMPY)
    src, mask = NUMPY.pad([case["src"]])
    prefix = np.asarray([case["prefix"]], dtype=np.int64) if case["prefix"] else None
    options = SearchOptions(**case["options"])
    streamed: list[list[int]] = []
    answer: dict = {"streamed": streamed}
    if case["kind"] == "greedy":
        answer["hypotheses"] = greedy(model, src, mask, options, prefix=prefix)
    elif case["kind"] == "alternatives":
        answer["alternatives"] = alternatives(
            model, src, mask, prefix, options, count=case["count"], min_prob=case["min_prob"]
        )
    elif case["kind"] == "beam":
        trees: list | None = [] if case["record"] else None
        hook = (lambda b, nodes: streamed.append([n.id for n in nodes])) if case["stream"] else None
        answer["hypotheses"] = beam_search(
            model, src, mask, options, prefix=prefix, trees=trees, on_step=hook
        )[0]
        answer["record"] = _record(case, trees[0]) if trees else None
    else:  # translate: what `attnmt translate` runs for the sentence
        prefixes = [case["prefix"]] if case["prefix"] else None
        (done,) = translate_ids(
            model, [case["src"][:-1]], str, options, prefixes=prefixes,
            record_search=case["record"],
        )  # fmt: skip
        answer["hypotheses"] = done.nbest or [done]
        answer["record"] = None if done.search is None else _record(case, done.search)
    return answer


def _same_hypothesis(py, js, where: str) -> None:
    assert js["tokens"] == list(py.tokens), where
    assert js["log_prob"] == py.log_prob, where  # float32 sums, added in the same order
    assert js["score"] == pytest.approx(py.score, rel=SCORE_TOLERANCE, abs=0), where
    if py.weights is None:
        assert js["weights"] is None, where
    else:
        expected = np.asarray(py.weights, dtype=np.float32).reshape(len(js["weights"]), -1)
        assert np.array_equal(np.asarray(js["weights"], dtype=np.float32), expected), where


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_javascript_search_is_python_search(index, js_answers):
    case, js = CASES[index], js_answers[index]
    py = _python(case)
    if "alternatives" in py:
        got = [(a["token"], a["log_prob"]) for a in js["alternatives"]]
        assert got == [(token, lp) for token, lp, _ in py["alternatives"]]
        for (token, _, hyp), alt in zip(py["alternatives"], js["alternatives"], strict=True):
            _same_hypothesis(hyp, alt["hypothesis"], f"alternative {token}")
        return
    assert len(js["hypotheses"]) == len(py["hypotheses"])  # the n-best, in order
    for rank, (hyp, found) in enumerate(zip(py["hypotheses"], js["hypotheses"], strict=True)):
        _same_hypothesis(hyp, found, f"hypothesis {rank}")
    if "record" in py:
        assert js["record"] == py["record"]
    assert js["streamed"] == py["streamed"]


def test_the_cases_cover_what_they_say():
    """The data do what the cases are named for: EOS early, the length limit, ties, a
    skipped alternative (read from Python's search)."""
    by_name = {c["name"]: _python(c) for c in CASES}
    nodes = by_name["beam 2, limit"]["record"]["nodes"]
    # float32: 60 x 1.05 = 62.99999 -> 62 + 5 = 67 tokens, EOS included (float64: 68)
    assert max(n["depth"] for n in nodes) == 67
    assert max(n["depth"] for n in by_name["beam 5, limit"]["record"]["nodes"]) == 7
    ended = by_name["beam 5, EOS early"]["record"]["nodes"]
    assert any(n["status"] == "ended" for n in ended)
    assert len(by_name["greedy, EOS first"]["hypotheses"][0].tokens) <= 1
    statuses = {n["status"] for n in by_name["beam 5, n-best 5"]["record"]["nodes"]}
    assert {"root", "kept", "pruned", "finished"} <= statuses
    assert EOS in [token for token, _, _ in by_name["alternatives, EOS"]["alternatives"]]
    assert len(by_name["alternatives, one"]["alternatives"]) == 1
    table = np.asarray(TIES["log_probs"])
    assert any(len(set(row)) < len(row) for row in table)  # equal log-probabilities
    tied = [h.score for h in by_name["ties, beam 5"]["hypotheses"]]
    assert len(set(tied)) < len(tied)  # equal scores in the n-best: the order they finished
    rows = [n["attention"] for n in by_name["beam 5, prefix"]["record"]["nodes"][1:]]
    assert any(0.0312 in row for row in rows)  # round(1 / 32, 4): the even neighbour
    start = begin(TableModel(RNN), *NUMPY.pad([SHORT]), np.asarray([LONG_PREFIX]))
    in_order = np.float32(0)
    for lp in start.token_log_probs[0]:
        in_order += lp
    assert start.log_prob[0] != in_order  # numpy's pairwise sum is another float32
