// An attnmt ONNX export (`attnmt export RUN --format onnx`) as the step model search.js
// decodes with, in the page (onnxruntime-web) or in node (onnxruntime-node): the same
// graphs, inputs and state handling as attnmt.runtime.model.OnnxModel, so the search
// reads the same log-probabilities and attention rows as `attnmt translate EXPORT`.
//
//   import * as ort from "onnxruntime-web";          // or onnxruntime-node
//   const model = await OnnxModel.load(ort, (name) => fetch(`export/${name}`));
//   const found = await translate(model, src, {beam: 5, needWeights: true}); // search.js
//
// `read(name)` gives a file of the export folder by its relative name ("attnmt.json",
// "encoder.onnx", ...): its bytes (an ArrayBuffer or a Uint8Array), a fetch Response, or
// for the manifest its text; a page fetches them, node reads them from disk.
//
// The export folder as read here (attnmt.export.onnx writes it):
//   attnmt.json   format "onnx"; graphs {encoder, step}: the two files; layout {family,
//                 memory, state, axes, zeros, equal_lengths, attention}
//                 (attnmt.export.onnx_graphs.FlatLayout); run_config: the run's config
//                 (translate.js reads its source limit there); vocab: the tokeniser files.
//   encoder.onnx  src (B, S) int64, src_mask (B, S) bool -> "memory.<name>" for each
//                 layout.memory, then "state.<name>" for each layout.state the encoder
//                 gives (those not in layout.zeros).
//   step.onnx     prev (B,) int64, src_mask (B, S) bool, rows (B,) int64, "memory.<name>",
//                 "state.<name>" (B' rows) -> log_probs (B, V) float32 (the graph ends in
//                 the log-softmax), "new_state.<name>" (B rows), attention (B, S) or
//                 (B, L, H, S) when layout.attention is not null.
//
// As in Python: a memory selects its rows at once (a beam's K copies of the sentence);
// a state selects lazily, its pending rows given to the next step as `rows`, which the
// graph gathers itself (a Transformer's caches are most of what a step moves). State
// fields in layout.zeros start as float32 zeros of the shape given there (a Transformer's
// empty caches, local-m's step count). An export has no output limit of its own
// (maxOutputTokens null): the source length limits an output (search.js outputLimit).
//
// One sentence at a time (search.js's interface): `encode(src)` reads one source with no
// padding. Python encodes an LSTM encoder's sentences of each length apart
// (layout.equal_lengths) so that none is padded; a lone sentence never is, so here it
// needs nothing more.

const EXPORT_FORMAT = "onnx"; // attnmt.runtime.model.FORMAT
const INFO_FILE = "attnmt.json"; // attnmt.rundir.EXPORT_INFO

// The session options attnmt.runtime.sessions.session_options sets: operators one after
// another, `threads` for each (Python's default is the cores the process may use; one here,
// as the parity test runs both sides), no spinning between the search's many small calls.
// onnxruntime-web's WASM backend takes its threads from ort.env.wasm.numThreads instead.
export function sessionOptions(threads = 1) {
  return {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
    extra: { session: { intra_op: { allow_spinning: "0" }, inter_op: { allow_spinning: "0" } } },
  };
}

// A file's bytes as a Uint8Array, from what `read` gave.
async function bytesOf(given) {
  given = await given;
  if (given instanceof Uint8Array) return given;
  if (given instanceof ArrayBuffer) return new Uint8Array(given);
  if (ArrayBuffer.isView(given)) {
    return new Uint8Array(given.buffer, given.byteOffset, given.byteLength);
  }
  if (given && typeof given.arrayBuffer === "function") {
    // a fetch Response: a missing file is an error, not an HTML page
    if (given.ok === false) throw new Error(`HTTP ${given.status} ${given.statusText ?? ""}`);
    return new Uint8Array(await given.arrayBuffer());
  }
  if (typeof given === "string") return new TextEncoder().encode(given);
  throw new TypeError(`read() gave ${Object.prototype.toString.call(given)}, not bytes`);
}

// The number of elements of a tensor of `dims`.
function count(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

function int64(values) {
  return BigInt64Array.from(values, (v) => BigInt(v));
}

// Named batch-first tensors, a memory or a state (runtime.model.Fields). `initial`: the
// state fields the encoder gave (read by initState); `rows`: a lazy state's pending
// selection (plain numbers), which the next step graph takes itself.
export class Fields {
  constructor(arrays, { initial = null, rows = null, lazy = false } = {}) {
    this.arrays = arrays;
    this.initial = initial;
    this.rows = rows;
    this.lazy = lazy;
  }
}

export class OnnxModel {
  // ort: the onnxruntime module (onnxruntime-web or onnxruntime-node: the same API);
  // info: the parsed attnmt.json; encoder, decoder: its two InferenceSessions.
  constructor(ort, info, encoder, decoder) {
    this.ort = ort;
    this.info = info;
    const layout = info.layout;
    this.family = layout.family;
    this.memoryNames = layout.memory;
    this.stateNames = layout.state;
    this.zeros = layout.zeros ?? {}; // {name: shape after the batch axis}
    this.equalLengths = Boolean(layout.equal_lengths);
    this.usesAttention = layout.attention !== null && layout.attention !== undefined;
    this.readsImages = false; // only the text families export
    this.maxOutputTokens = null; // only the source length limits an output
    this.encoder = encoder;
    this.decoder = decoder;
    this.encoderOutputs = [...encoder.outputNames];
    this.stepInputs = [...decoder.inputNames];
    this.stepOutputs = [...decoder.outputNames];
    this.rowsInput = this.stepInputs.includes("rows"); // the step graph selects the state
    this.checkGraphs();
  }

  // Load the export that `read(name)` reads (see the header). `options`: onnxruntime
  // session options (default: `sessionOptions()`, one thread).
  static async load(ort, read, options = sessionOptions()) {
    let info;
    try {
      const text = new TextDecoder("utf-8").decode(await bytesOf(read(INFO_FILE)));
      info = JSON.parse(text);
    } catch (err) {
      throw new Error(`cannot read the export's ${INFO_FILE}: ${err.message}`);
    }
    if (info.format !== EXPORT_FORMAT || !info.layout || !info.graphs) {
      throw new Error(
        `this is a ${JSON.stringify(info.format)} export; decoding here needs an ONNX one ` +
          "(attnmt export RUN --format onnx)",
      );
    }
    // Both graphs are read at once; their sessions are made one after the other.
    const files = [info.graphs.encoder, info.graphs.step];
    const bytes = files.map(async (file) => bytesOf(await read(file)));
    bytes.forEach((b) => b.catch(() => {})); // awaited in turn below
    const sessions = [];
    for (const [i, file] of files.entries()) {
      try {
        sessions.push(await ort.InferenceSession.create(await bytes[i], options));
      } catch (err) {
        throw new Error(`cannot load the graph ${file} of the export: ${err.message}`);
      }
    }
    return new OnnxModel(ort, info, ...sessions);
  }

  // The graphs take and give what the manifest's layout says (an export written by
  // another version of attnmt would fail here, by name, rather than mid-search).
  checkGraphs() {
    const given = this.stateNames.filter((name) => !(name in this.zeros));
    const expected = {
      "encoder input": [this.encoder.inputNames, ["src", "src_mask"]],
      "encoder output": [
        this.encoderOutputs,
        [...this.memoryNames.map((n) => `memory.${n}`), ...given.map((n) => `state.${n}`)],
      ],
      "step input": [
        this.stepInputs,
        [
          "prev",
          "src_mask",
          ...this.memoryNames.map((n) => `memory.${n}`),
          ...this.stateNames.map((n) => `state.${n}`),
        ],
      ],
      "step output": [
        this.stepOutputs,
        [
          "log_probs",
          ...this.stateNames.map((n) => `new_state.${n}`),
          ...(this.usesAttention ? ["attention"] : []),
        ],
      ],
    };
    for (const [what, [names, needed]] of Object.entries(expected)) {
      const missing = needed.filter((name) => !names.includes(name));
      if (missing.length) {
        throw new Error(
          `the export's graphs do not match its ${INFO_FILE}: no ${what} ${missing.join(", ")}`,
        );
      }
    }
  }

  // src: the source ids of one sentence, EOS included -> the memory (one row): the
  // encoder's memory fields and the source mask, and the state fields it gave.
  async encode(src) {
    const width = src.length;
    const ids = new this.ort.Tensor("int64", int64(src), [1, width]); // (1, S)
    const mask = new this.ort.Tensor("bool", new Uint8Array(width).fill(1), [1, width]);
    const outputs = await this.encoder.run({ src: ids, src_mask: mask });
    const arrays = { mask };
    const initial = {};
    for (const name of this.encoderOutputs) {
      const dot = name.indexOf(".");
      const [kind, field] = [name.slice(0, dot), name.slice(dot + 1)];
      (kind === "memory" ? arrays : initial)[field] = outputs[name];
    }
    return new Fields(arrays, { initial });
  }

  // The decoder's state before the first step: the encoder's fields and the zeros.
  async initState(memory) {
    const batch = memory.arrays.mask.dims[0];
    const arrays = { ...(memory.initial ?? {}) };
    for (const [name, shape] of Object.entries(this.zeros)) {
      const dims = [batch, ...shape];
      arrays[name] = new this.ort.Tensor("float32", new Float32Array(count(dims)), dims);
    }
    const state = {};
    for (const name of this.stateNames) state[name] = arrays[name];
    return new Fields(state, { lazy: this.rowsInput });
  }

  // One decoder step over the rows of `state`: prev (Int32Array, one token per row) ->
  // {logProbs: a Float32Array of V log-probabilities per row, state, weights: a
  // Float32Array per row ((S), or (L, H, S) flattened) or null}.
  async step(prev, state, memory, needWeights = false) {
    const batch = prev.length;
    const feed = {
      prev: new this.ort.Tensor("int64", int64(prev), [batch]),
      src_mask: memory.arrays.mask,
    };
    for (const name of this.memoryNames) feed[`memory.${name}`] = memory.arrays[name];
    let arrays = state.arrays;
    if (this.rowsInput) {
      const rows = state.rows ?? Array.from({ length: batch }, (_, i) => i);
      feed.rows = new this.ort.Tensor("int64", int64(rows), [batch]);
    } else if (state.rows !== null) {
      arrays = this.gather(state.arrays, state.rows);
    }
    for (const name of this.stateNames) feed[`state.${name}`] = arrays[name];
    const outputs = await this.decoder.run(feed);
    const newState = {};
    for (const name of this.stateNames) newState[name] = outputs[`new_state.${name}`];
    const logProbs = rowsOf(outputs.log_probs, batch, false); // float32, as Python's
    let weights = null;
    if (needWeights && outputs.attention) weights = rowsOf(outputs.attention, batch, true);
    return { logProbs, state: new Fields(newState, { lazy: this.rowsInput }), weights };
  }

  // Rows `rows` of a memory (taken now) or a state (taken by the next step).
  select(fields, rows) {
    rows = Array.from(rows, Number);
    if (fields.lazy) {
      const taken = fields.rows === null ? rows : rows.map((i) => fields.rows[i]);
      return new Fields(fields.arrays, { rows: taken, lazy: true });
    }
    return new Fields(this.gather(fields.arrays, rows));
  }

  // Each tensor's rows `rows` (along its first axis), copied into new tensors.
  gather(arrays, rows) {
    const out = {};
    for (const [name, tensor] of Object.entries(arrays)) {
      const [batch, ...rest] = tensor.dims;
      const size = count(rest);
      const data = tensor.data;
      const taken = new data.constructor(rows.length * size);
      rows.forEach((row, i) => {
        if (row < 0 || row >= batch) throw new RangeError(`row ${row} of ${batch}`);
        taken.set(data.subarray(row * size, (row + 1) * size), i * size);
      });
      out[name] = new this.ort.Tensor(tensor.type, taken, [rows.length, ...rest]);
    }
    return out;
  }
}

// A (B, ...) tensor as B Float32Arrays of its rows: views of its data, or copies (`copy`:
// rows a search keeps beyond the step, the attention).
function rowsOf(tensor, batch, copy) {
  const data = tensor.data;
  const width = data.length / batch;
  const rows = [];
  for (let r = 0; r < batch; r++) {
    const row = data.subarray(r * width, (r + 1) * width);
    rows.push(copy ? row.slice() : row);
  }
  return rows;
}
