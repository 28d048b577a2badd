// `attnmt serve EXPORT_DIR` inside the page: the server's routes answered by a plain
// function, with the same JSON bodies, statuses and sentences as attnmt.serve.app over an
// ONNX export (tests/test_web_worker.py sends both the same requests). worker.js wraps it
// in a Web Worker; node runs it as is, given an onnxruntime module and a file reader.
//
//   const server = createServer({site, ort, read});   // read("models/rnn/attnmt.json")
//   const {status, data} = await server.handle("/api/translate", {text: "the cat"});
//   await server.handle("/api/translate/stream", body, {onEvent, signal});
//
// `site`: the parsed site.json ({attnmt, runtime, limits, models: [{name, dir, info}]},
// `info` the model's GET /api/models entry); `ort`: the onnxruntime module, or a function
// giving it (imported on first use); `read(path)`: a file of the site by its path relative
// to the site folder (bytes, a fetch Response or text). A model is loaded on first use.
// `onEvent(kind, data)`: the stream's "start" and "step" events, the server's payloads; its
// "done" payload is the answer. `signal` (an AbortSignal) stops the search at its next
// step: 499 {detail: "Stopped."}. `pause()`, if given, is awaited between search steps
// now and then, so that a worker hears a cancel while it decodes.
//
// What the server does and this does not: there is no API key, and the body's size is that
// of its JSON text. Requests are decoded one at a time, as the server's one decoding thread
// a model does (the queue holds `queue_size`, 64, a model), each within the timeout
// (limits.timeout, s: 504). A stream the search refuses once it started (a bad prefix id,
// the timeout) is the server's `error` event there, and here the answer's status and
// detail (422, 504): the worker has no stream of its own to end.

import { OnnxModel } from "./onnx_model.js";
import { attentionChoice, emptyResult, lineResult, scoreResult } from "./records.js";
import { EOS, nodeRecord } from "./search.js";
import { READ, SCORE, STREAM, TRANSLATE, queryInt, validate } from "./schemas.js";
import { SentencePiece } from "./sentencepiece.js";
import {
  UserError,
  checkRequest,
  cleanLine,
  commas,
  overBudget,
  scorePairs,
  translateLines,
} from "./service.js";
import { defaultChoice, sourceLimit } from "./translate.js";

// attnmt.serve.decoding.Settings' defaults; site.json's `limits` overrides them.
export const SETTINGS = {
  max_body_bytes: 1 << 20,
  max_lines: 256,
  max_line_chars: 2000,
  queue_size: 64,
  max_search_steps: 1 << 17,
  max_explain_passes: 1 << 12,
};
const MAX_EXAMPLES = 32; // validation.MAX_EXAMPLES
// attnmt.explain.names.EXPORT_EXPLAINS: what an export answers when asked to explain.
export const EXPORT_EXPLAINS =
  "explanations need the run itself: an ONNX export decodes and shows its attention " +
  "but has no gradients or masked re-reading; use the run (attnmt translate RUN)";
const PAUSE_MS = 25; // how often a search lets the worker hear a cancel

class HttpError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

export class Stopped extends Error {
  constructor() {
    super("Stopped.");
  }
}

// Python's repr() of a string, as the server's messages quote a model's name.
export function pyRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = "";
  for (const c of text) {
    const code = c.codePointAt(0);
    if (c === "\\" || c === quote) out += `\\${c}`;
    else if (c === "\n") out += "\\n";
    else if (c === "\r") out += "\\r";
    else if (c === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += c;
  }
  return quote + out + quote;
}

async function textOf(given) {
  given = await given;
  if (typeof given === "string") return given;
  if (given && typeof given.text === "function") {
    if (given.ok === false) throw new Error(`HTTP ${given.status} ${given.statusText ?? ""}`);
    return given.text();
  }
  return new TextDecoder("utf-8").decode(given);
}

// A model of the site as a loaded export: its OnnxModel, tokenizers, attention choice
// and source limit.
// The tokenizers are read while the graphs load (a first translation waits for both).
async function loadModel(runtime, read, entry) {
  const dir = entry.dir.endsWith("/") ? entry.dir : `${entry.dir}/`;
  const tokenizers = ["src", "tgt"].map(async (side) => {
    const file = `tokenizer-${side}.json`;
    try {
      return new SentencePiece(JSON.parse(await textOf(read(dir + file))));
    } catch (err) {
      throw new Error(`cannot read the tokenizer ${file}: ${err.message}`);
    }
  });
  tokenizers.forEach((t) => t.catch(() => {})); // awaited below, after the graphs
  const model = await OnnxModel.load(runtime, (file) => read(dir + file));
  const [src, tgt] = await Promise.all(tokenizers);
  const vocab = { src, tgt };
  return {
    model,
    vocab,
    choice: attentionChoice(model.info),
    searchChoice: defaultChoice(model.info),
    limit: sourceLimit(model.info),
  };
}

export function createServer({ site, ort, read, pause = null }) {
  const settings = { ...SETTINGS, ...(site.limits ?? {}) };
  const entries = new Map(site.models.map((m) => [m.name, m]));
  const names = [...entries.keys()];
  if (!names.length) throw new Error("site.json lists no model");
  const infos = new Map(site.models.map((m) => [m.name, m.info]));
  const queues = new Map(names.map((n) => [n, { waiting: 0, cancelled: 0, seconds: 0.1 }]));
  const loading = new Map();
  let runtime = null;
  let chain = Promise.resolve(); // one decoding at a time

  function named(name) {
    if (name === null || name === undefined) return names[0];
    if (!entries.has(name)) {
      const served = names.join(", ");
      throw new HttpError(404, `no model named ${pyRepr(name)} is served; served: ${served}`);
    }
    return name;
  }

  async function loaded(name) {
    if (!loading.has(name)) {
      const promise = (async () => {
        runtime ??= typeof ort === "function" ? await ort() : ort;
        return loadModel(runtime, read, entries.get(name));
      })();
      loading.set(name, promise);
      promise.catch(() => loading.delete(name)); // tried again on the next request
    }
    try {
      return await loading.get(name);
    } catch (err) {
      const why = `model ${pyRepr(name)} could not be loaded in the page: ${err.message}`;
      throw new HttpError(500, why);
    }
  }

  function tooMany(count, what) {
    if (count > settings.max_lines) {
      throw new HttpError(
        413,
        `the request has ${commas(count)} ${what}; this server takes at most ` +
          `${commas(settings.max_lines)} per request (--max-lines)`,
      );
    }
  }

  function noAttention(name) {
    const methods = infos.get(name).explain_methods;
    const instead = methods.length
      ? "leave them out, or ask for an explanation that needs none (explain: one of " +
        `${methods.join(", ")})`
      : "leave them out"; // an export explains nothing
    return new HttpError(
      422,
      `model ${pyRepr(name)} (${infos.get(name).model}) has no attention, so it has no ` +
        `'alignments' or 'weights'; ${instead}`,
    );
  }

  function checked(request) {
    try {
      return checkRequest(request);
    } catch (err) {
      if (err instanceof UserError) throw new HttpError(422, err.message);
      throw err;
    }
  }

  // What a decoding checks at each step: a cancel (499), its deadline (504, `late` the
  // sentence), and, now and then, the worker's events (`pause`).
  function guard(signal, late) {
    const timeout = Number(settings.timeout);
    const deadline = timeout > 0 ? Date.now() + timeout * 1000 : Infinity;
    let last = Date.now();
    return async () => {
      if (pause && Date.now() - last >= PAUSE_MS) {
        await pause();
        last = Date.now();
      }
      if (signal?.aborted) throw new Stopped();
      if (Date.now() > deadline) throw new HttpError(504, late);
    };
  }

  // The model with `check` awaited before each of its steps.
  function stoppable(model, check) {
    const wrapped = Object.create(model);
    wrapped.encode = async (...args) => (await check(), model.encode(...args));
    wrapped.step = async (...args) => (await check(), model.step(...args));
    return wrapped;
  }

  // Run `job(model)` after the decodings before it (ModelWorker's queue), `model` the
  // served model's, stopped by `signal` or the timeout: 503 past the queue's capacity.
  function queued(name, served, { signal = null, stream = false }, job) {
    const queue = queues.get(name);
    if (queue.waiting >= settings.queue_size) {
      const retry = Math.max(1, Math.min(60, Math.ceil(queue.waiting * queue.seconds)));
      throw new HttpError(
        503,
        `model ${pyRepr(name)} has ${settings.queue_size} requests waiting already ` +
          `(--queue-size); retry in ${retry} s`,
      );
    }
    const late = stream
      ? "the request took longer than the timeout"
      : `the request waited more than ${settings.timeout} s (--timeout); send less at once, ` +
        "or retry when the server is less busy";
    const check = guard(signal, late);
    queue.waiting += 1;
    let started = false;
    const run = chain.then(async () => {
      queue.waiting -= started ? 0 : 1;
      started = true;
      await check();
      const begun = Date.now();
      try {
        return await job(stoppable(served.model, check));
      } catch (err) {
        if (err instanceof Stopped || err.status === 504) queue.cancelled += 1;
        throw err;
      } finally {
        queue.seconds = 0.8 * queue.seconds + 0.2 * ((Date.now() - begun) / 1000);
      }
    });
    chain = run.catch(() => {});
    if (!signal) return run;
    return new Promise((resolve, reject) => {
      const gone = () => {
        if (!started) {
          started = true;
          queue.waiting -= 1;
          reject(new Stopped());
        }
      };
      signal.addEventListener("abort", gone, { once: true });
      run.then(resolve, reject).finally(() => signal.removeEventListener("abort", gone));
    });
  }

  // --- the routes ---------------------------------------------------------------------------

  function health() {
    const models = {};
    for (const [name, q] of queues) {
      models[name] = { waiting: q.waiting, capacity: settings.queue_size, cancelled: q.cancelled };
    }
    return { status: "ok", models };
  }

  // The app's `translate_checks` and `translate_options`: the model, the lines, the request.
  function translateChecks(body, stream) {
    const name = named(body.model);
    const info = infos.get(name);
    const lines = body.text !== null ? [body.text] : [...body.lines];
    tooMany(lines.length, "lines");
    if (!stream && body.explain !== null) throw new HttpError(422, EXPORT_EXPLAINS);
    const drawable = info.has_attention;
    if (!drawable && (body.alignments || body.weights)) throw noAttention(name);
    let prefix = body.prefix;
    if (typeof prefix === "string") {
      const [text, error] = cleanLine(prefix, settings.max_line_chars);
      if (error !== null) throw new HttpError(422, `prefix: ${error}`);
      prefix = text || null;
    } else if (prefix !== null) {
      prefix = prefix.length ? prefix : null;
    }
    const request = checked({
      beam: body.beam !== null ? body.beam : info.beam,
      alpha: body.alpha,
      n_best: body.n_best,
      links: body.alignments === null ? drawable : body.alignments,
      maps: body.weights ? "every" : null,
      search: stream || body.search,
      prefix,
      alternatives: body.alternatives,
      min_alternative_prob: body.min_alternative_prob,
    });
    return { name, lines, request };
  }

  // RunDecoder.__call__: each line cleaned (a bad one answered with its error), the
  // others translated, each answered with its record.
  async function decodeLines(served, model, lines, request, onStep) {
    const cleaned = lines.map((line) => cleanLine(line, settings.max_line_chars));
    const good = cleaned.flatMap(([, error], i) => (error === null ? [i] : []));
    const { vocab, choice } = served;
    const sentences = await translateLines(
      model,
      vocab,
      good.map((i) => cleaned[i][0]),
      request,
      { onStep, choice: served.searchChoice },
    );
    const results = cleaned.map(([text, error], n) => emptyResult(n + 1, text, "", error));
    const { links, maps, search } = request;
    const shown = { links, maps, threshold: null, search };
    good.forEach((i, k) => {
      results[i] = lineResult(i + 1, sentences[k], vocab, choice, shown);
    });
    return results;
  }

  async function translate(given, { onEvent = null, signal = null }, stream) {
    const [body, problem] = validate(stream ? STREAM : TRANSLATE, given);
    if (problem) return { status: 422, data: problem };
    const { name, lines, request } = translateChecks(body, stream);
    const served = await loaded(name);
    const limits = { settings, vocab: served.vocab, limit: served.limit };
    let onStep = null;
    let start = null;
    if (stream) {
      const [text] = cleanLine(lines[0], settings.max_line_chars);
      const ids = text ? served.vocab.src.encode(text).ids : [];
      const taken = [...ids.slice(0, served.limit), EOS];
      const pieces = taken.map((id) => served.vocab.src.idToPiece(id));
      start = { model: name, beam: request.beam, source: text, source_pieces: pieces };
      start.truncated = ids.length > served.limit;
      const piece = (id) => served.vocab.tgt.idToPiece(id);
      const choice = served.searchChoice;
      onStep = (nodes) => {
        const records = nodes.map((node) => nodeRecord(node, { piece, choice }));
        const depth = Math.max(0, ...records.map((r) => r.depth));
        onEvent?.("step", { depth, nodes: records });
      };
    }
    const over = overBudget(lines, request, "translate", limits);
    if (over) throw new HttpError(413, over);
    const job = queued(name, served, { signal, stream }, (model) =>
      decodeLines(served, model, lines, request, onStep),
    );
    if (start) onEvent?.("start", start);
    const translations = await job;
    return { status: 200, data: { model: name, beam: request.beam, translations } };
  }

  async function score(given, { signal = null }) {
    const [body, problem] = validate(SCORE, given);
    if (problem) return { status: 422, data: problem };
    const name = named(body.model);
    const pairs = body.pair !== null ? [body.pair] : [...body.pairs];
    tooMany(pairs.length, "pairs");
    if (body.explain !== null) throw new HttpError(422, EXPORT_EXPLAINS);
    if (!infos.get(name).has_attention && (body.alignments || body.weights)) {
      throw noAttention(name);
    }
    const request = checked({ links: body.alignments, maps: body.weights ? "every" : null });
    const served = await loaded(name);
    const scores = await queued(name, served, { signal }, async (model) => {
      const results = [];
      const todo = [];
      pairs.forEach(({ source, target }, i) => {
        const [src, badSrc] = cleanLine(source, settings.max_line_chars);
        const [tgt, badTgt] = cleanLine(target, settings.max_line_chars);
        const error = (badSrc && `source: ${badSrc}`) || (badTgt && `target: ${badTgt}`) || null;
        results.push({ ...emptyResult(i + 1, src, tgt, error), token_log_probs: [] });
        if (!error) todo.push([i, src, tgt]);
      });
      const given = todo.map(([, s, t]) => [s, t]);
      const scored = await scorePairs(model, served.vocab, given, request, served.limit);
      const shown = { links: request.links, maps: request.maps, threshold: null };
      todo.forEach(([i], k) => {
        if (scored[k] === null) return; // two empty sides: an empty answer
        const { sentence, tokenLogProbs } = scored[k];
        const { vocab, choice } = served;
        results[i] = scoreResult(i + 1, sentence, tokenLogProbs, vocab, choice, shown);
      });
      return results;
    });
    return { status: 200, data: { model: name, scores } };
  }

  function read_(given) {
    const [body, problem] = validate(READ, given);
    if (problem) return { status: 422, data: problem };
    const name = named(body.model);
    const detail =
      `model ${pyRepr(name)} (${infos.get(name).model}) reads text, not images; send ` +
      "sentences to POST /api/translate";
    return { status: 422, data: { detail } };
  }

  function examples(query) {
    const [, badN] = queryInt("n", query.get("n"), 4, 1, MAX_EXAMPLES);
    const [, badStart] = queryInt("start", query.get("start"), 0, 0, undefined);
    if (badN || badStart) {
      const errors = [...(badN?.errors ?? []), ...(badStart?.errors ?? [])];
      const detail = errors.map((e) => `${e.field}: ${e.message}`).join("; ");
      return { status: 422, data: { detail, errors } };
    }
    const name = named(query.get("model"));
    const detail =
      `model ${pyRepr(name)} (${infos.get(name).model}) reads text; examples are the test ` +
      "canvases of a run that reads images";
    return { status: 422, data: { detail } };
  }

  const POSTED = new Set(["/api/translate", "/api/translate/stream", "/api/score", "/api/read"]);

  async function route(url, body, options) {
    const path = url.pathname;
    if (POSTED.has(path) && body !== undefined) {
      const size = new TextEncoder().encode(JSON.stringify(body)).length;
      if (size > settings.max_body_bytes) {
        const detail =
          `the request body is ${commas(size)} bytes; this server takes at most ` +
          `${commas(settings.max_body_bytes)} bytes (--max-body-bytes)`;
        return { status: 413, data: { detail } };
      }
    }
    switch (path) {
      case "/api/health":
        return { status: 200, data: health() };
      case "/api/models":
        return { status: 200, data: { models: [...infos.values()] } };
      case "/api/model":
        return { status: 200, data: infos.get(named(url.searchParams.get("model"))) };
      case "/api/translate":
        return translate(body, options, false);
      case "/api/translate/stream":
        return translate(body, options, true);
      case "/api/score":
        return score(body, options);
      case "/api/read":
        return read_(body);
      case "/api/examples":
        return examples(url.searchParams);
      default:
        return { status: 404, data: { detail: "Not Found" } };
    }
  }

  // The answer of `path` (with its query) to `body` (the parsed JSON; undefined: none).
  async function handle(path, body, options = {}) {
    try {
      return await route(new URL(path, "http://attnmt.page/"), body, options);
    } catch (err) {
      if (err instanceof HttpError) return { status: err.status, data: { detail: err.message } };
      if (err instanceof Stopped) return { status: 499, data: { detail: "Stopped." } };
      if (err instanceof UserError) return { status: 422, data: { detail: err.message } };
      return { status: 500, data: { detail: `the page's decoder failed: ${err.message}` } };
    }
  }

  return { handle, settings, health };
}
