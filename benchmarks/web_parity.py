"""The static site against `attnmt translate`: the first verses of John decoded in
Chromium by the page's own decoder (web/worker.js on onnxruntime-web, WASM, one thread) and
by the Python onnxruntime runtime, over the same exports; then what the page costs.

    python benchmarks/web_parity.py                      # 200 verses, both reference models
    python benchmarks/web_parity.py --verses 20 --models rnnsearch-en-fr

What it measures (appended to benchmarks/results/web_parity.jsonl with the machine):

- **Parity**, beam 5 with the 5-best: the page's answer to POST /api/translate (the JSON
  `attnmt serve` gives) against `attnmt translate EXPORT --beam 5 --n-best 5 --alignments
  json` of the same export, field by field: the source and target pieces, the translation,
  the word links and every n-best translation equal; the scores (and log-probabilities)
  within 1e-4. Each difference is listed with the verse.
- **Speed**, sentences per second at beam 1 and 5, one sentence per request as the page
  sends them, against the Python runtime on one thread (`load_export(threads=1)`, the
  `Service` every face calls) one sentence at a time and in batches as `attnmt translate`
  batches a file. The page's worker runs onnxruntime-web on one WASM thread.
- **Page load**: a fresh browser context (nothing cached) opening the site from a local
  static server, typing John 6:47 and asking beam 5: seconds to the page listing its models
  and to the first translation shown (median of `--loads`, the first one too).
- **Size** of each model in the site, fp32 against `--quantize int8` (onnxruntime's dynamic
  quantisation of the matrix products), and how nearly int8 decodes like fp32 (identical
  translations, BLEU of each against Segond).
- **Memory** of the tab while decoding: the renderer process's peak resident set (sampled),
  the WASM memory of the worker's runtime (its largest `WebAssembly.Memory`) and the page's
  JS heap (Chrome's `Performance.getMetrics`).

The sites are built into runs/web-parity/ (fp32 and int8) by `attnmt export ... --format
web` unless there. Timed runs want idle cores: pause other work first.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import append_result, describe, write_block

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "runs" / "web-parity"
RESULTS = ROOT / "benchmarks" / "results" / "web_parity.jsonl"
DOC = ROOT / "docs" / "results.md"
MODELS = ("rnnsearch-en-fr", "transformer-en-fr")
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"),
    *("--disable-component-update", "--no-first-run", "--disable-sync"),
]
SCORE_TOLERANCE = 1e-4  # the issue's bound; the records round scores to 6 decimals
EQUAL_FIELDS = ("source_pieces", "target_pieces", "translation", "alignment")
CLOSE_FIELDS = ("score", "log_prob")
FIRST_VERSE = "John 6:47"

# The worker the benchmark starts in the page: the site's own web/worker.js, with a count
# of the WebAssembly memories its runtime makes (they only grow: the largest at the end is
# the peak) and a "ready" once it listens, so that no message is sent before.
HARNESS_JS = """\
const memories = [];
const Memory = WebAssembly.Memory;
WebAssembly.Memory = function (descriptor) {
  const memory = new Memory(descriptor);
  memories.push(memory);
  return memory;
};
WebAssembly.Memory.prototype = Memory.prototype;
for (const name of ["instantiate", "instantiateStreaming"]) {
  const original = WebAssembly[name];
  WebAssembly[name] = async (...args) => {
    const result = await original.apply(WebAssembly, args);
    const instance = result.instance ?? result;
    for (const value of Object.values(instance.exports ?? {})) {
      if (value instanceof Memory) memories.push(value);
    }
    return result;
  };
}
// The time inside the runtime's graph runs (the same module instance worker.js imports).
const site = await (await fetch("./site.json")).json();
const ortModule = await import(new URL(site.runtime.module, self.location.href).href);
const ort = ortModule.default && !ortModule.InferenceSession ? ortModule.default : ortModule;
const inGraphs = { ms: 0, calls: 0 };
const run = ort.InferenceSession.prototype.run;
ort.InferenceSession.prototype.run = async function (...args) {
  const started = performance.now();
  try {
    return await run.apply(this, args);
  } finally {
    inGraphs.ms += performance.now() - started;
    inGraphs.calls += 1;
  }
};
self.addEventListener("message", (event) => {
  if (event.data?.type !== "memory") return;
  const wasm = Math.max(0, ...memories.map((m) => m.buffer.byteLength));
  self.postMessage({ type: "memory", id: event.data.id, wasm, ...inGraphs });
  if (event.data.reset) Object.assign(inGraphs, { ms: 0, calls: 0 });
});
await import("./web/worker.js");
self.postMessage({ type: "ready" });
"""
HARNESS = "parity-worker.js"

# In the page: `window.parity`, a client of that worker (one request at a time, timed).
CLIENT_JS = """(harness) => {
  const worker = new Worker(harness, { type: "module" });
  const pending = new Map();
  let next = 0, ready;
  const started = new Promise((resolve) => { ready = resolve; });
  worker.onmessage = (event) => {
    const m = event.data || {};
    if (m.type === "ready") { ready(); return; }
    if (m.type !== "response" && m.type !== "memory") return;
    const resolve = pending.get(m.id);
    if (resolve) { pending.delete(m.id); resolve(m); }
  };
  const ask = (message) => new Promise((resolve) => {
    const id = ++next;
    pending.set(id, resolve);
    worker.postMessage({ ...message, id });
  });
  window.parity = {
    async init() {
      await started;
      const site = await (await fetch("site.json")).json();
      worker.postMessage({ type: "init", site, base: new URL(".", location.href).href });
    },
    async run(model, lines, extra) {
      const out = [];
      for (const text of lines) {
        const t0 = performance.now();
        const m = await ask({ type: "request", path: "/api/translate",
                              body: { model, text, ...extra } });
        out.push({ status: m.status, data: m.data, ms: performance.now() - t0 });
      }
      return out;
    },
    memory(reset = false) { return ask({ type: "memory", reset }); },
  };
}"""


# ------------------------------------------------------------------ data and sites


def john(count: int) -> list[tuple[str, str, str]]:
    """The first `count` verses of John: (reference, English (WEB), French (Segond))."""
    from attnmt.data.bible import book_number, load_pairs

    book = book_number("John")
    pairs = [p for p in load_pairs("en-web", "fr-segond") if p.book == book]
    return [(p.ref, p.src, p.tgt) for p in pairs[:count]]


def build_site(out: Path, runs: Sequence[Path], *, quantize: str | None = None) -> Path:
    """`attnmt export RUN... --format web -o OUT` (with `--quantize`), unless OUT holds a
    site of exactly these models already: then its page and modules are refreshed from
    this checkout (the exported models kept)."""
    names = sorted(run.name for run in runs)
    site = out / "site.json"
    if site.exists() and sorted(m["name"] for m in json.loads(site.read_text())["models"]) == names:
        from attnmt.export.web import PAGE_FILE, static_page, write_web
        from attnmt.serve.app import explorer_page

        write_web(out / "web")
        (out / PAGE_FILE).write_text(static_page(explorer_page()), encoding="utf-8")
        return out
    from attnmt.cli import main

    argv = ["export", *map(str, runs), "--format", "web", "-o", str(out), "--force"]
    if quantize:
        argv += ["--quantize", quantize]
    if main(argv) != 0:
        raise SystemExit(f"could not build the site {out}")
    return out


def site_sizes(site: Path) -> dict[str, int]:
    """Bytes of each model's folder in the site, and of the rest (page, runtime)."""
    sizes = {}
    for model in sorted((site / "models").iterdir()):
        sizes[model.name] = sum(f.stat().st_size for f in model.rglob("*") if f.is_file())
    total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    sizes["shared"] = total - sum(sizes.values())
    return sizes


# ------------------------------------------------------------------ the Python side


@contextlib.contextmanager
def one_core() -> Iterator[None]:
    """This thread (and the threads it starts: onnxruntime's) on one core."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def cli_records(export: Path, lines: Sequence[str], beam: int) -> list[dict]:
    """`attnmt translate EXPORT FILE --beam B --n-best B --alignments json`, one record per
    line, as a user runs it (in this process)."""
    from attnmt.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp) / "src.txt", Path(tmp) / "out.jsonl"
        source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        argv = ["translate", str(export), str(source), "--beam", str(beam)]
        argv += ["--n-best", str(beam), "--alignments", "json", "-o", str(out)]
        if main(argv) != 0:
            raise SystemExit(f"attnmt translate {export} failed")
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def python_speed(export: Path, lines: Sequence[str], beam: int, rounds: int) -> dict:
    """Sentences per second of the Python runtime on one thread: one line per call (as the
    page asks) and all lines in one call (batched, as `attnmt translate` reads a file);
    the median of `rounds`, the model loaded and warmed first."""
    from attnmt.runtime import load_export
    from attnmt.service import Request, Service

    with one_core():
        service = Service(load_export(export, threads=1))
        request = Request(beam=beam, n_best=beam, maps=None)
        service.records(service.translate(lines[:2], request), request)  # warm up
        single, batched = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            for line in lines:
                service.records(service.translate([line], request), request)
            single.append(time.perf_counter() - started)
            started = time.perf_counter()
            service.records(service.translate(list(lines), request), request)
            batched.append(time.perf_counter() - started)
    return {
        "single": round(len(lines) / statistics.median(single), 2),
        "batched": round(len(lines) / statistics.median(batched), 2),
    }


def python_graph_share(export: Path, lines: Sequence[str], beam: int) -> dict:
    """One pass one line at a time, as `python_speed`, with onnxruntime's `run` timed: the
    seconds in the graphs against the whole (the rest: the search and the records)."""
    import onnxruntime

    from attnmt.runtime import load_export
    from attnmt.service import Request, Service

    spent = {"s": 0.0, "calls": 0}
    run = onnxruntime.InferenceSession.run

    def timed(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return run(self, *args, **kwargs)
        finally:
            spent["s"] += time.perf_counter() - started
            spent["calls"] += 1

    with one_core():
        service = Service(load_export(export, threads=1))
        request = Request(beam=beam, n_best=beam, maps=None)
        service.records(service.translate(lines[:2], request), request)
        onnxruntime.InferenceSession.run = timed
        try:
            started = time.perf_counter()
            for line in lines:
                service.records(service.translate([line], request), request)
            total = time.perf_counter() - started
        finally:
            onnxruntime.InferenceSession.run = run
    return {"total_s": round(total, 3), "graphs_s": round(spent["s"], 3), "calls": spent["calls"]}


# ------------------------------------------------------------------ the page


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """`python -m http.server -d FOLDER` in a thread: its address."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class RendererMemory:
    """The peak resident set of Chromium's renderer processes (where the page and its
    worker run), sampled every `every` seconds in a thread while in use."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.peak, self._stop = every, 0, threading.Event()

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for proc in psutil.process_iter(["name", "cmdline", "memory_info"]):
                cmdline = proc.info.get("cmdline") or []
                if "chromium" in (proc.info.get("name") or "") and "--type=renderer" in cmdline:
                    total += proc.info["memory_info"].rss
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def __enter__(self) -> RendererMemory:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def browser(chromium: Path = CHROMIUM) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=str(chromium), headless=True,
                                     args=CHROMIUM_ARGS)  # fmt: skip
        try:
            yield instance
        finally:
            instance.close()


class PageDecoder:
    """The site's worker in a Chromium page on the site's origin, answering the routes of
    `attnmt serve` (window.parity of CLIENT_JS). Every request outside the site fails."""

    def __init__(self, chromium_browser, origin: str, site: Path) -> None:
        (site / HARNESS).write_text(HARNESS_JS, encoding="utf-8")
        self.outside: list[str] = []
        self.context = chromium_browser.new_context()
        self.context.route("**/*", self._route(origin))
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))
        self.page.goto(f"{origin}/site.json")  # a document on the site's origin
        self.page.evaluate(CLIENT_JS, HARNESS)
        self.page.evaluate("window.parity.init()")

    def _route(self, origin: str):
        def route(r) -> None:
            if r.request.url.startswith(f"{origin}/"):
                r.continue_()
            else:
                self.outside.append(r.request.url)
                r.abort()

        return route

    def run(self, model: str, lines: Sequence[str], **body) -> list[dict]:
        """One POST /api/translate per line: [{status, data, ms}]."""
        return self.page.evaluate(
            "([model, lines, extra]) => window.parity.run(model, lines, extra)",
            [model, list(lines), body],
        )

    def wasm_bytes(self) -> int:
        return int(self.page.evaluate("window.parity.memory()")["wasm"])

    def graph_time(self) -> dict:
        """{"ms", "calls"} spent in onnxruntime-web's `run` since the last call."""
        answer = self.page.evaluate("window.parity.memory(true)")
        return {"ms": answer["ms"], "calls": answer["calls"]}

    def js_heap(self) -> int:
        session = self.context.new_cdp_session(self.page)
        session.send("Performance.enable")
        metrics = {m["name"]: m["value"] for m in session.send("Performance.getMetrics")["metrics"]}
        return int(metrics.get("JSHeapUsedSize", 0))

    def close(self) -> None:
        self.context.close()


def page_load(chromium_browser, origin: str, model: str, text: str) -> dict:
    """Open the site in a fresh context (nothing cached), type `text`, ask beam 5: seconds
    from the navigation's start to the models listed, and to the model's translation."""
    context = chromium_browser.new_context(viewport={"width": 1400, "height": 1000})
    outside: list[str] = []

    def route(r) -> None:
        if r.request.url.startswith(f"{origin}/"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    finished: dict[str, float] = {}  # path -> seconds from the start to its last byte
    context.on("requestfinished",
               lambda r: finished.setdefault(r.url[len(origin):], time.perf_counter()))  # fmt: skip
    try:
        page = context.new_page()
        started = time.perf_counter()
        page.goto(f"{origin}/")
        panel = page.locator(f"section.panel[data-model='{model}']")
        panel.wait_for(timeout=60_000)
        listed = time.perf_counter() - started
        page.fill("#beam", "5")
        page.fill("#text", text)
        page.click("#translate")
        page.wait_for_function(
            "(model) => { const el = document.querySelector("
            "`section.panel[data-model='${model}'] .translation`);"
            " return el && el.textContent.trim().length > 0; }",
            arg=model,
            timeout=120_000,
        )
        shown = time.perf_counter() - started
        translation = panel.locator(".translation").inner_text().strip()
    finally:
        context.close()
    if outside:
        raise SystemExit(f"the page asked for something outside the site: {outside}")
    fetched = {path: round(at - started, 3) for path, at in finished.items()}
    model_files = [at for path, at in fetched.items() if path.startswith(f"/models/{model}/")]
    return {"listed_s": round(listed, 3), "first_translation_s": round(shown, 3),
            "runtime_fetched_s": max((at for path, at in fetched.items()
                                      if path.endswith(".wasm")), default=None),
            "model_fetched_s": max(model_files, default=None),
            "fetched": fetched, "translation": translation}  # fmt: skip


# ------------------------------------------------------------------ comparing


def differences(page: Sequence[dict], python: Sequence[dict], refs: Sequence[str]) -> dict:
    """Field-by-field differences of the page's records and `attnmt translate`'s, per verse:
    {"verses", "identical" (every field), "same_translation" (the best translation),
    "same_nbest" (the n-best translations, in order), "max_score_diff", "max_log_prob_diff",
    "listed": [...]}. Equal fields must be equal; the scores (length-normalised, the best
    and each n-best's) within SCORE_TOLERANCE; a log-probability, a sum over the target's
    pieces, within SCORE_TOLERANCE per piece (each step's log-probability within the
    bound, their sum within the bound times their number)."""
    listed, identical, same, same_nbest = [], 0, 0, 0
    worst = {"score": 0.0, "log_prob": 0.0}
    for ref, answer, expected in zip(refs, page, python, strict=True):
        if answer["status"] != 200:
            listed.append({"verse": ref, "field": "status", "page": answer["status"],
                           "python": 200, "detail": answer["data"]})  # fmt: skip
            continue
        got = answer["data"]["translations"][0]
        here = []
        for name in EQUAL_FIELDS:
            if got.get(name) != expected.get(name):
                here.append({"field": name, "page": got.get(name), "python": expected.get(name)})
        pieces = max(1, len(expected.get("target_pieces") or []))
        for name, bound in (("score", SCORE_TOLERANCE), ("log_prob", SCORE_TOLERANCE * pieces)):
            diff = abs(got[name] - expected[name])
            worst[name] = max(worst[name], diff)
            if diff > bound:
                here.append({"field": name, "page": got[name], "python": expected[name]})
        page_nbest = [h["translation"] for h in got.get("nbest") or []]
        python_nbest = [h["translation"] for h in expected.get("nbest") or []]
        same += got.get("translation") == expected.get("translation")
        same_nbest += page_nbest == python_nbest
        if page_nbest != python_nbest:
            here.append({"field": "nbest", "page": page_nbest, "python": python_nbest})
        else:
            for a, b in zip(got["nbest"], expected["nbest"], strict=True):
                worst["score"] = max(worst["score"], abs(a["score"] - b["score"]))
                if abs(a["score"] - b["score"]) > SCORE_TOLERANCE:
                    here.append({"field": "nbest score", "page": a["score"], "python": b["score"]})
        identical += not here
        listed += [{"verse": ref, **d} for d in here]
    return {"verses": len(page), "identical": identical, "same_translation": same,
            "same_nbest": same_nbest, "max_score_diff": worst["score"],
            "max_log_prob_diff": worst["log_prob"], "listed": listed}  # fmt: skip


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    import sacrebleu

    return round(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score, 2)


# ------------------------------------------------------------------ the run


def measure(args: argparse.Namespace) -> dict:
    verses = john(args.verses)
    refs, lines, french = (list(x) for x in zip(*verses, strict=True))
    first = next(text for ref, text, _ in verses if ref == FIRST_VERSE) if any(
        ref == FIRST_VERSE for ref, _, _ in verses) else lines[0]  # fmt: skip
    runs = [args.reference / name for name in args.models]
    sites = {"fp32": build_site(args.work / "site", runs)}
    if not args.no_int8:
        sites["int8"] = build_site(args.work / "site-int8", runs, quantize="int8")
    result: dict = {"verses": len(lines), "models": {}, "sizes": {}}
    for form, site in sites.items():
        result["sizes"][form] = site_sizes(site)

    with browser(args.chromium) as chromium:
        for form, site in sites.items():
            with static_server(site) as origin:
                if form == "fp32" and not args.parity_only:
                    loads = [page_load(chromium, origin, args.models[0], first)
                             for _ in range(args.loads)]  # fmt: skip
                    result["page_load"] = {
                        "first": loads[0],
                        "median_first_translation_s": statistics.median(
                            x["first_translation_s"] for x in loads),
                        "median_listed_s": statistics.median(x["listed_s"] for x in loads),
                        "loads": len(loads),
                    }  # fmt: skip
                decoder = PageDecoder(chromium, origin, site)
                try:
                    for name in args.models:
                        export = site / "models" / name
                        entry = result["models"].setdefault(name, {})
                        print(f"{form} {name}: attnmt translate, beam 5", flush=True)
                        python = cli_records(export, lines, 5)
                        print(f"{form} {name}: the page, beam 5", flush=True)
                        with RendererMemory() as memory:
                            decoder.run(name, lines[:1], beam=5, n_best=5)  # the model loads
                            page = decoder.run(name, lines, beam=5, n_best=5)
                        parity = differences(page, python, refs)
                        entry[form] = {
                            "parity": {**parity, "listed": parity["listed"][:20]},
                            "bleu_python": bleu([r["translation"] for r in python], french),
                            "bleu_page": bleu([a["data"]["translations"][0]["translation"]
                                               if a["status"] == 200 else "" for a in page],
                                              french),
                            "translations": [r["translation"] for r in python],
                            "memory": {"renderer_peak_rss": memory.peak,
                                       "wasm": decoder.wasm_bytes(),
                                       "page_js_heap": decoder.js_heap()},
                        }  # fmt: skip
                        if args.parity_only or (form != "fp32" and not args.speed_int8):
                            continue
                        speed = {}
                        for beam in (1, 5):
                            decoder.graph_time()  # counted from here
                            timed = [decoder.run(name, lines, beam=beam)
                                     for _ in range(args.rounds)]  # fmt: skip
                            graphs = decoder.graph_time()
                            seconds = statistics.median(sum(a["ms"] for a in t) / 1e3
                                                        for t in timed)  # fmt: skip
                            py = python_speed(export, lines, beam, args.rounds)
                            page_rate = round(len(lines) / seconds, 2)
                            whole = sum(a["ms"] for t in timed for a in t) / 1e3
                            speed[f"beam{beam}"] = {
                                "page": page_rate, "python_single": py["single"],
                                "python_batched": py["batched"],
                                "page_over_single": round(page_rate / py["single"], 3),
                                "page_over_batched": round(page_rate / py["batched"], 3),
                                "page_profile": {"total_s": round(whole / args.rounds, 3),
                                                 "graphs_s": round(graphs["ms"] / 1e3
                                                                   / args.rounds, 3),
                                                 "calls": graphs["calls"] // args.rounds},
                                "python_profile": python_graph_share(export, lines, beam),
                            }  # fmt: skip
                            print(f"{form} {name} beam {beam}: {speed[f'beam{beam}']}", flush=True)
                        entry[form]["speed"] = speed
                    if decoder.outside or decoder.errors:
                        raise SystemExit(f"outside: {decoder.outside}; errors: {decoder.errors}")
                finally:
                    decoder.close()
    for entry in result["models"].values():
        if "int8" in entry:
            a, b = entry["fp32"]["translations"], entry["int8"]["translations"]
            entry["int8_identical_to_fp32"] = sum(x == y for x, y in zip(a, b, strict=True))
        for form in entry.values():
            if isinstance(form, dict):
                form.pop("translations", None)
    return result


def cpu_id() -> str:
    """'family F model M' of this CPU (/proc/cpuinfo), beside lscpu's model name."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return ""
    fields = dict(re.findall(r"^(cpu family|model)\s*:\s*(\S+)", info, flags=re.MULTILINE))
    return f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"


def markdown(r: dict, timed: dict | None = None) -> str:
    """The block of docs/results.md between the web-parity markers: parity, size and
    memory from record `r`, speed and page load from `timed` (default `r`: the newest
    record that timed them, where `r` is a `--parity-only` one)."""
    timed = timed or r
    m = r["machine"]
    mb = 1e6
    lines = [
        f"Measured by `python benchmarks/web_parity.py` on {r['date']}: {m['cpu']} "
        f"({r.get('cpu_id', '')}; {', '.join(m['flags']) or 'no AVX-512'}), {m['cores']} cores, "
        f"Chromium {r['chromium']}, onnxruntime-web {r['ort_web']} (WASM, one thread) against "
        f"onnxruntime {r['ort']} (one thread); the first {r['verses']} verses of John.",
        "",
        f"**Parity**, beam 5 with the 5-best, the page against `attnmt translate EXPORT "
        f"--beam 5 --n-best 5 --alignments json` (pieces, translation, links and n-best "
        f"equal; scores within {SCORE_TOLERANCE:g}):",
        "",
        "| model | form | every field equal | best translation equal | n-best equal "
        "| largest score / log-prob difference | BLEU (page / Python) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, entry in r["models"].items():
        for form in ("fp32", "int8"):
            if form not in entry:
                continue
            e = entry[form]
            p = e["parity"]
            lines.append(
                f"| {name} | {form} | {p['identical']} of {p['verses']} | "
                f"{p['same_translation']} | {p['same_nbest']} | "
                f"{p['max_score_diff']:.1e} / {p['max_log_prob_diff']:.1e} | "
                f"{e['bleu_page']:.2f} / {e['bleu_python']:.2f} |"
            )
    int8 = [(e["int8"]["parity"]["same_translation"], e["int8"]["parity"]["verses"])
            for e in r["models"].values() if "int8" in e]  # fmt: skip
    if int8:
        lines += [
            "",
            "int8 is not exact across the two: the page's WebAssembly int8 kernels round "
            "differently from onnxruntime's native ones, so an int8 site gives the best "
            "translation of `attnmt translate` on the same int8 export for "
            + ", ".join(f"{same} of {n}" for same, n in int8)
            + " verses, not all. Only an fp32 site decodes as the Python runtime does.",
        ]
    differing = [(n, d) for n, e in r["models"].items() for d in e["fp32"]["parity"]["listed"]]
    if differing:
        lines += ["", "Differences in fp32:", ""]
        lines += [f"- {n}, {d['verse']}: {d['field']}: page {d['page']!r}, Python "
                  f"{d['python']!r}" for n, d in differing[:10]]  # fmt: skip
    lines += [
        "",
        "**Speed**, sentences per second, one sentence a request as the page sends them; "
        "the Python runtime one sentence a call and in batches (as `attnmt translate` "
        "reads a file); the share of each side's time inside the graphs (the rest: the "
        "search and the records):",
        "",
        "| model | beam | page | Python, one at a time | Python, batched | page ÷ one at a time "
        "| page ÷ batched | in the graphs: page / Python |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, entry in timed["models"].items():
        for beam, sp in entry["fp32"].get("speed", {}).items():
            pp, yp = sp["page_profile"], sp["python_profile"]
            lines.append(
                f"| {name} | {beam[4:]} | {sp['page']:.1f} | {sp['python_single']:.1f} | "
                f"{sp['python_batched']:.1f} | {sp['page_over_single']:.2f}x | "
                f"{sp['page_over_batched']:.2f}x | "
                f"{100 * pp['graphs_s'] / pp['total_s']:.0f}% of {pp['total_s']:.1f} s / "
                f"{100 * yp['graphs_s'] / yp['total_s']:.0f}% of {yp['total_s']:.1f} s |"
            )
    ratios = [(sp["page_profile"]["graphs_s"] / sp["python_profile"]["graphs_s"],
               sp["page_over_single"], sp["page_over_batched"])
              for entry in timed["models"].values()
              for sp in entry["fp32"].get("speed", {}).values()]  # fmt: skip
    if ratios:
        lines += [
            "",
            f"The page decodes at {min(r[1] for r in ratios):.2f}-"
            f"{max(r[1] for r in ratios):.2f}x the Python runtime's one-sentence-at-a-time "
            f"speed and {min(r[2] for r in ratios):.2f}-{max(r[2] for r in ratios):.2f}x its "
            "batched speed. Both spend most of their time in the graphs, and the same graphs "
            f"take {min(r[0] for r in ratios):.1f}-{max(r[0] for r in ratios):.1f}x as long "
            "in WebAssembly (128-bit SIMD, one thread) as in onnxruntime's native x86 kernels: "
            "the gap is the kernels, not the search written in JavaScript. Batching lets the "
            "native runtime run one graph call for many sentences; the page decodes the one "
            "sentence a reader asks for.",
        ]
    load = timed["page_load"]
    lines += [
        "",
        f"**Page load**, a fresh browser context (nothing cached) on a local static server, "
        f"John 6:47 at beam 5 with {', '.join(r['models'])} side by side: the models listed "
        f"after {load['median_listed_s']:.2f} s, the first translation shown after "
        f"{load['median_first_translation_s']:.2f} s (median of {load['loads']}; the very "
        f"first load {load['first']['first_translation_s']:.2f} s)."
        + (f" Of that first load: the runtime's binary arrived at "
           f"{load['first']['runtime_fetched_s']:.2f} s and the model's files at "
           f"{load['first']['model_fetched_s']:.2f} s; the rest is compiling the runtime, "
           "making the two graphs' sessions (for both models at once) and the decoding."
           if load["first"].get("model_fetched_s") else ""),
        "",
        "**Size** of each model in the site (the runtime and the page add "
        f"{r['sizes']['fp32']['shared'] / mb:.1f} MB once):",
        "",
        "| model | fp32 MB | int8 MB | int8 translations identical to fp32 |",
        "|---|---:|---:|---:|",
    ]
    for name, entry in r["models"].items():
        int8 = r["sizes"].get("int8", {}).get(name)
        same = entry.get("int8_identical_to_fp32")
        lines.append(
            f"| {name} | {r['sizes']['fp32'][name] / mb:.1f} | "
            f"{int8 / mb if int8 else float('nan'):.1f} | "
            f"{same if same is not None else '?'} of {r['verses']} |"
        )
    lines += [
        "",
        "**Memory** of the tab while decoding the verses (the renderer process's peak "
        "resident set, sampled every 0.2 s; the worker's WebAssembly memory; the page's JS "
        "heap):",
        "",
        "| model | form | renderer peak MB | WASM memory MB | page JS heap MB |",
        "|---|---|---:|---:|---:|",
    ]
    for name, entry in r["models"].items():
        for form in ("fp32", "int8"):
            if form in entry:
                mem = entry[form]["memory"]
                lines.append(
                    f"| {name} | {form} | {mem['renderer_peak_rss'] / mb:.0f} | "
                    f"{mem['wasm'] / mb:.0f} | {mem['page_js_heap'] / mb:.1f} |"
                )
    return "\n".join(lines)


def write_doc(text: str) -> None:
    write_block(DOC, "web-parity", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verses", type=int, default=200, help="first N verses of John")
    parser.add_argument("--models", type=lambda s: s.split(","), default=list(MODELS),
                        help="reference models, comma-separated")  # fmt: skip
    parser.add_argument("--reference", type=Path, default=ROOT / "reference")
    parser.add_argument("--work", type=Path, default=WORK, help="where the sites are built")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (median)")
    parser.add_argument("--loads", type=int, default=3, help="cold page loads (median)")
    parser.add_argument("--no-int8", action="store_true", help="skip the int8 site")
    parser.add_argument("--speed-int8", action="store_true", help="time the int8 site too")
    parser.add_argument("--chromium", type=Path, default=CHROMIUM)
    parser.add_argument("--parity-only", action="store_true",
                        help="parity, size and memory, not timed")  # fmt: skip
    parser.add_argument("--no-save", action="store_true", help="print, do not append")
    parser.add_argument("--doc-only", action="store_true",
                        help="rewrite docs/results.md's block from the last record")  # fmt: skip
    args = parser.parse_args()
    if args.doc_only:
        write_doc(markdown(*newest()))
        return
    started = time.time()
    result = measure(args)
    result.update(versions(args.chromium), date=time.strftime("%Y-%m-%d"), cpu_id=cpu_id())
    result["machine"] = describe(seconds=0.1)
    result["seconds"] = round(time.time() - started, 1)
    print(json.dumps(result, indent=1))
    if not args.no_save:
        result["parity_only"] = args.parity_only
        append_result(RESULTS, result)
        write_doc(markdown(*newest()))


def newest() -> tuple[dict, dict]:
    """The newest record, and the newest one that timed the page (they may be one)."""
    records = [json.loads(line) for line in RESULTS.read_text(encoding="utf-8").splitlines()]
    return records[-1], next(r for r in reversed(records) if "page_load" in r)


def versions(chromium: Path) -> dict:
    import subprocess

    import onnxruntime

    from attnmt.export.web import ORT_WEB_VERSION

    shown = subprocess.run([str(chromium), "--version"], capture_output=True, text=True)
    version = re.search(r"\d+(?:\.\d+){3}", shown.stdout or "")
    return {"chromium": version.group(0) if version else "?",
            "ort_web": ORT_WEB_VERSION, "ort": onnxruntime.__version__}  # fmt: skip


if __name__ == "__main__":
    main()
