// Greedy and beam search in JavaScript, as attnmt.decoding.search runs them: the same
// tokens, scores, n-best lists and recorded search tree for the same step model. The
// static explorer decodes an ONNX export in the page with it (issue 62); nothing here
// knows about ONNX. A dependency-free ES module: the browser and node both import it.
//
// One sentence at a time (the page decodes one line at a time): the beams of that
// sentence are the rows of the step model's batch.
//
// The step model, what attnmt.decoding.step_model.StepModel asks of a Python model:
//
//     memory = await model.encode(src)             // src: the source ids, EOS included
//     state = await model.initState(memory)
//     const {logProbs, state, weights} = await model.step(prev, state, memory, needWeights)
//     model.select(fields, rows)                   // memory or state: rows picked, in order
//
//   prev: an Int32Array, one token per row; logProbs: one Float32Array of V
//   log-probabilities per row (the export's graph ends in the log-softmax: the search
//   never takes one); weights: one Float32Array per row, the attention that produced
//   the token, (S) for an RNN, (L, H, S) flattened for a Transformer, or null.
//   `select` may return a promise (an export may select on the device).
//
// Float arithmetic is the Python search's, operation for operation: the running
// log-probabilities are float32 (Math.fround after each addition, as numpy's float32
// arrays add), a prefix's log-probability is numpy's pairwise float32 sum, and the
// length penalty, the scores and the record's rounding are float64 as Python's floats.
// Ties between equal scores go to the lower index, as numpy's top-k orders them (see
// `topk` for where numpy's own choice is arbitrary).

export const PAD = 0;
export const UNK = 1;
export const BOS = 2;
export const EOS = 3;
const NEVER_EMITTED = [PAD, BOS]; // not words: never output (PAD is no target, BOS a start)

// The fate of a candidate in a recorded search (attnmt.decoding.search_tree).
export const ROOT = "root"; // the start: BOS read
export const FORCED = "forced"; // a token of an imposed prefix
export const KEPT = "kept"; // entered the beam and was extended at the next step
export const PRUNED = "pruned"; // among the step's 2K best candidates, but lost the ranking
export const FINISHED = "finished"; // an EOS candidate that became a finished hypothesis
export const ENDED = "ended"; // in the beam when the search stopped

export const SEARCH_DIGITS = 4; // decimals of a search node's numbers (records.SEARCH_DIGITS)

const fround = Math.fround;

// --- options, lengths, scores ---------------------------------------------------------

// The search's settings with SearchOptions' defaults (attnmt.decoding.options), in
// camelCase: beam, alpha, nBest, maxLenRatio, maxLen (null: the source alone limits),
// needWeights.
export function searchOptions(given = {}) {
  const options = {
    beam: 1,
    alpha: 0.6,
    nBest: 1,
    maxLenRatio: 2.0,
    maxLen: null,
    needWeights: false,
    ...given,
  };
  if (!(options.nBest >= 1 && options.nBest <= options.beam)) {
    throw new RangeError(
      `n_best must be between 1 and beam=${options.beam}, got ${options.nBest}`,
    );
  }
  return options;
}

// GNMT's length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14).
export function lengthPenalty(length, alpha) {
  return ((5.0 + length) / 6.0) ** alpha;
}

// The output's maximum length, EOS included (hypotheses.output_limits): the source length
// (EOS included) times maxLenRatio, plus 5, capped at maxLen, and always room for the
// prefix and an EOS. numpy multiplies a float32 length by the ratio in float32 (0.7 x 10
// is 6.9999999 there, 7 in float64), then truncates.
export function outputLimit(sourceLength, options, prefixLength = 0) {
  let limit = Math.trunc(fround(fround(sourceLength) * fround(options.maxLenRatio))) + 5;
  if (options.maxLen !== null && options.maxLen !== undefined) {
    limit = Math.min(limit, options.maxLen);
  }
  return Math.max(limit, prefixLength + 1);
}

// numpy's sum of a float32 array (`np.add.reduce`): pairwise summation in float32, eight
// accumulators over blocks of up to 128 (numpy/_core/src/umath/loops_utils.h.src). A
// prefix's log-probability is this sum in Python, so it is here.
export function sumFloat32(values) {
  return fround(0 + pairwiseSum(values, 0, values.length));
}

function pairwiseSum(values, start, n) {
  if (n < 8) {
    let sum = -0;
    for (let i = 0; i < n; i++) sum = fround(sum + values[start + i]);
    return sum;
  }
  if (n <= 128) {
    const r = [];
    for (let j = 0; j < 8; j++) r.push(fround(values[start + j]));
    let i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (let j = 0; j < 8; j++) r[j] = fround(r[j] + values[start + i + j]);
    }
    let sum = fround(
      fround(fround(r[0] + r[1]) + fround(r[2] + r[3])) +
        fround(fround(r[4] + r[5]) + fround(r[6] + r[7])),
    );
    for (; i < n; i++) sum = fround(sum + values[start + i]);
    return sum;
  }
  let half = Math.floor(n / 2);
  half -= half % 8;
  return fround(pairwiseSum(values, start, half) + pairwiseSum(values, start + half, n - half));
}

// The k largest values (largest first) and their indices. Equal values: the lower index
// first, and the lower indices are the ones kept when equal values straddle the k-th
// place. numpy's top-k (runtime.arrays.NumpyOps.topk) orders what it keeps the same way,
// but which of equal values straddling the k-th place it keeps is argpartition's choice,
// arbitrary; -inf against -inf there is never extended, so only exact ties between
// finite log-probabilities at a boundary could make the two searches part.
export function topk(values, k) {
  k = Math.min(k, values.length);
  const top = new Array(k);
  const index = new Array(k);
  let size = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (size === k) {
      if (!(v > top[k - 1])) continue; // an equal value keeps the earlier index in
      size--; // the last one leaves
    }
    let j = size++;
    for (; j > 0 && v > top[j - 1]; j--) {
      top[j] = top[j - 1];
      index[j] = index[j - 1];
    }
    top[j] = v;
    index[j] = i;
  }
  return { values: top, index };
}

// The first largest value's index (numpy's argmax).
function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

// A copy of a row of log-probabilities with PAD and BOS barred; at the length limit
// everything but EOS.
function masked(row, atLimit) {
  const out = Float32Array.from(row);
  if (atLimit) {
    const eos = out[EOS];
    out.fill(-Infinity);
    out[EOS] = eos;
  } else {
    for (const token of NEVER_EMITTED) out[token] = -Infinity;
  }
  return out;
}

// --- the start: encoder and forced prefix --------------------------------------------------

// Encode the source and read a forced prefix (hypotheses.begin): the decoder positioned
// after it, with each forced token's log-probability and attention row.
export async function begin(model, src, prefix = null, needWeights = false) {
  const memory = await model.encode(src);
  let state = await model.initState(memory);
  let prev = BOS;
  const tokens = prefix ? [...prefix] : [];
  const tokenLogProbs = [];
  const weights = [];
  for (const token of tokens) {
    const out = await model.step(Int32Array.of(prev), state, memory, needWeights);
    state = out.state;
    prev = token;
    tokenLogProbs.push(out.logProbs[0][token]);
    if (needWeights) weights.push(out.weights[0]);
  }
  return {
    memory,
    state,
    prev,
    tokens,
    tokenLogProbs,
    logProb: sumFloat32(tokenLogProbs), // float32, as numpy sums the row
    weights: weights.length ? weights : null,
    get length() {
      return this.tokens.length;
    },
  };
}

// --- greedy ---------------------------------------------------------------------------

// Greedy decoding (search.greedy): the likeliest token at each step, scored as beam
// search scores (`alpha` ranks nothing here). Returns one hypothesis:
// {tokens (no EOS), score, logProb, weights (a row per token and the EOS, or null), node}.
export async function greedy(model, src, options = {}, { prefix = null, start = null } = {}) {
  options = searchOptions(options);
  const needWeights = options.needWeights;
  start = start ?? (await begin(model, src, prefix, needWeights));
  const limit = outputLimit(src.length, options, start.length);
  const { memory } = start;
  let { state, prev } = start;
  let logProb = start.logProb;
  let length = start.length;
  const tokens = [...start.tokens];
  const weights = needWeights && start.weights ? [...start.weights] : [];
  for (let step = start.length; step < limit; step++) {
    const out = await model.step(Int32Array.of(prev), state, memory, needWeights);
    state = out.state;
    const row = masked(out.logProbs[0], false);
    const best = step >= limit - 1 ? EOS : argmax(row);
    logProb = fround(logProb + row[best]);
    length += 1;
    tokens.push(best);
    if (needWeights) weights.push(out.weights[0]);
    prev = best;
    if (best === EOS) break;
  }
  return {
    tokens: tokens.filter((t) => t !== EOS),
    score: logProb / lengthPenalty(length, options.alpha),
    logProb,
    weights: needWeights ? weights : null,
    node: null,
  };
}

// --- beam search ----------------------------------------------------------------------

// Beam search (search.beam_search) of K = options.beam beams. Returns
// {hypotheses: the nBest best, best first, each as greedy's; tree: the recorded search
// (with `record`, or `onStep`), else null}. A hypothesis that emits EOS leaves the beam
// for the finished list; the search stops when K have finished, when no beam is left, or
// at the length limit (the live beams then end as they stand). `onStep(nodes)` gets each
// step's new nodes as they are made, after the nodes they extend (again: their
// `rejected` is new), as the server streams them. With K = 1 this is greedy decoding.
export async function beamSearch(
  model,
  src,
  options = {},
  { prefix = null, start = null, record = false, onStep = null } = {},
) {
  options = searchOptions(options);
  const { alpha, needWeights } = options;
  const k = options.beam;
  start = start ?? (await begin(model, src, prefix, needWeights));
  const limit = outputLimit(src.length, options, start.length);
  const expand = new Array(k).fill(0); // K rows, each the start's
  const memory = await model.select(start.memory, expand);
  let state = await model.select(start.state, expand);
  let prev = new Int32Array(k).fill(start.prev);
  // Only the first beam is live at the start: the others are copies.
  let beamScores = new Float32Array(k).fill(-Infinity);
  beamScores[0] = start.logProb;
  let history = expand.map(() => [...start.tokens]);
  let weightHistory = null; // per row, the attention rows of its tokens
  if (needWeights && start.weights && start.length) {
    weightHistory = expand.map(() => [...start.weights]);
  }
  const done = []; // the finished hypotheses, in the order they finished
  const recorder = record || onStep ? new Recorder(start, k, alpha, onStep) : null;
  for (let step = start.length; step < limit; step++) {
    const out = await model.step(prev, state, memory, needWeights);
    state = out.state;
    const atLimit = step >= limit - 1; // only EOS may follow there
    const rows = out.logProbs.map((row) => masked(row, atLimit));
    // Each beam's best 2K tokens, then the best 2K of those K x 2K candidates (the
    // sentence's best 2K are among them): K live beams survive even if K end in EOS.
    const vocab = rows[0].length;
    const perBeam = Math.min(2 * k, vocab);
    const beamTop = rows.map((row) => topk(row, perBeam));
    const candidates = new Float32Array(k * perBeam);
    for (let r = 0; r < k; r++) {
      for (let j = 0; j < perBeam; j++) {
        candidates[r * perBeam + j] = fround(beamScores[r] + beamTop[r].values[j]);
      }
    }
    const best = topk(candidates, Math.min(2 * k, k * perBeam));
    const origins = best.index.map((i) => Math.floor(i / perBeam)); // the beam each extends
    const tokensAt = best.index.map((i) => beamTop[Math.floor(i / perBeam)].index[i % perBeam]);
    const stepWeights = needWeights ? out.weights : null;
    if (needWeights) {
      weightHistory = stepWeights.map((row, r) => [...(weightHistory ? weightHistory[r] : []), row]);
    }
    recorder?.readStep(step, beamTop, beamScores, stepWeights);
    // Rank the candidates: an EOS finishes a hypothesis while fewer than K have finished;
    // the best K others stay in the beam. Rows past the live ones hold -inf copies.
    const scores = new Float32Array(k).fill(-Infinity);
    const keptRows = new Array(k).fill(0);
    const keptTokens = new Array(k).fill(EOS);
    let live = 0;
    const fates = []; // [candidate, status] in rank order
    for (let j = 0; j < 2 * k && j < best.values.length; j++) {
      const score = best.values[j];
      if (score === -Infinity) break;
      const row = origins[j];
      if (tokensAt[j] === EOS) {
        if (done.length < k) {
          done.push(finish(history[row], score, weightHistory, row, alpha));
          fates.push([j, FINISHED]);
        } else {
          fates.push([j, PRUNED]);
        }
      } else if (live < k) {
        scores[live] = score;
        keptRows[live] = row;
        keptTokens[live] = tokensAt[j];
        live += 1;
        fates.push([j, KEPT]);
      }
      if (done.length >= k || live >= k) break;
    }
    const ends = done.length >= k || atLimit || live === 0;
    recorder?.sentence(best.values, origins, tokensAt, fates, ends, done);
    if (ends) break;
    history = keptRows.map((r, i) => [...history[r], keptTokens[i]]);
    if (weightHistory) weightHistory = keptRows.map((r) => weightHistory[r]);
    state = await model.select(state, keptRows);
    prev = Int32Array.from(keptTokens);
    beamScores = scores;
  }
  // Best first; equal scores keep the order they finished in (a stable sort, as Python's).
  const hypotheses = [...done].sort((a, b) => b.score - a.score).slice(0, options.nBest);
  const tree = recorder ? recorder.close(hypotheses) : null;
  return { hypotheses, tree };
}

// A finished hypothesis from beam `row`: its tokens, score and weights (search._finish).
function finish(tokens, logProb, weightHistory, row, alpha) {
  const length = tokens.length + 1; // the EOS counts, as in greedy's score
  return {
    tokens: [...tokens],
    score: logProb / lengthPenalty(length, alpha),
    logProb,
    weights: weightHistory ? [...weightHistory[row]] : null,
    node: null,
  };
}

// --- the recorded search ------------------------------------------------------------------

// Builds the search tree while beamSearch runs (search_tree.Recorder): a node per
// candidate of each step's 2K best, with its parent, token, scores and fate, the tokens
// an expanded hypothesis produced that went nowhere as its `rejected`, and the attention
// row that produced it. `rows` maps each beam row to the node of the hypothesis it holds
// (null: a copy, never live).
//
// A node: {id, parent, depth, token, status, logProb (the token's), cumLogProb (the
// hypothesis'), score (cumLogProb over the length penalty of `depth` tokens), best (on
// the best hypothesis' path), rank (a finished node's place in the n-best), rejected
// ([token, logProb] pairs), weights (a Float32Array, or null)}.
class Recorder {
  constructor(start, k, alpha, onStep) {
    this.k = k;
    this.alpha = alpha;
    this.onStep = onStep;
    this.tree = { beam: k, alpha, nodes: [], nbest: [] };
    let node = this.add(null, 0, BOS, ROOT, 0.0, 0.0, 0.0, null);
    const made = [node];
    let cum = 0.0; // float64, as Python adds its floats
    start.tokens.forEach((token, t) => {
      const logProb = start.tokenLogProbs[t];
      cum += logProb;
      const score = cum / lengthPenalty(t + 1, alpha);
      const weights = start.weights ? start.weights[t] : null;
      node = this.add(node.id, t + 1, token, FORCED, logProb, cum, score, weights);
      made.push(node);
    });
    this.rows = [node.id, ...new Array(k - 1).fill(null)];
    if (onStep) onStep(made);
  }

  add(parent, depth, token, status, logProb, cumLogProb, score, weights) {
    const node = {
      id: this.tree.nodes.length,
      parent,
      depth,
      token,
      status,
      logProb,
      cumLogProb,
      score,
      best: false,
      rank: null,
      rejected: [],
      weights,
    };
    this.tree.nodes.push(node);
    return node;
  }

  readStep(step, beamTop, beamScores, stepWeights) {
    this.depth = step + 1;
    this.penalty = lengthPenalty(this.depth, this.alpha);
    this.beamTop = beamTop;
    this.beamScores = beamScores;
    this.weights = stepWeights;
  }

  // The fate the search gave each of the step's 2K best candidates (`fates`: [j, status]
  // for those it weighed; the rest were pruned).
  sentence(scores, origins, tokens, fates, ends, done) {
    const fate = new Map(fates);
    const finished = fates.filter(([, status]) => status === FINISHED).length;
    const made = [];
    const kept = [];
    let endedHere = 0;
    const children = new Map(); // row -> tokens that went on (kept, finished or ended)
    for (let j = 0; j < scores.length; j++) {
      const score = scores[j];
      if (score === -Infinity) break;
      let status = fate.get(j) ?? PRUNED;
      const row = origins[j];
      const parent = this.rows[row];
      if (parent === null) continue; // a copy beam of the first step: never live
      if (status === KEPT && ends) status = ENDED;
      const node = this.add(
        parent,
        this.depth,
        tokens[j],
        status,
        score - this.beamScores[row],
        score,
        score / this.penalty,
        this.weights ? this.weights[row] : null,
      );
      made.push(node);
      if (status === FINISHED) {
        // the i-th finished this step is done[done.length - finished + i]
        done[done.length - finished + endedHere].node = node.id;
        endedHere += 1;
      }
      if (status === KEPT || status === FINISHED || status === ENDED) {
        if (!children.has(row)) children.set(row, new Set());
        children.get(row).add(tokens[j]);
      }
      if (status === KEPT) kept.push(node.id);
    }
    for (let row = 0; row < this.k; row++) {
      // what each expanded hypothesis produced that went nowhere
      const parent = this.rows[row];
      if (parent === null) continue;
      const taken = children.get(row) ?? new Set();
      const { values, index } = this.beamTop[row];
      this.tree.nodes[parent].rejected = index
        .map((token, i) => [token, values[i]])
        .filter(([token, lp]) => !taken.has(token) && lp !== -Infinity);
    }
    const expanded = [...new Set(this.rows.filter((p) => p !== null))].sort((a, b) => a - b);
    if (!ends) this.rows = [...kept, ...new Array(this.k - kept.length).fill(null)];
    if (this.onStep) this.onStep([...expanded.map((p) => this.tree.nodes[p]), ...made]);
  }

  close(hypotheses) {
    const tree = this.tree;
    tree.nbest = hypotheses.filter((h) => h.node !== null).map((h) => h.node);
    tree.nbest.forEach((id, rank) => {
      tree.nodes[id].rank = rank;
    });
    if (tree.nbest.length) {
      for (let node = tree.nodes[tree.nbest[0]]; node; node = tree.nodes[node.parent]) {
        node.best = true;
        if (node.parent === null) break;
      }
    }
    return tree;
  }
}

// --- what a page calls ----------------------------------------------------------------------

// One sentence searched as attnmt translate searches it (decode_ids.translate_ids):
// greedy for beam 1 and n-best 1 unrecorded, else beam search (a recorded greedy search
// is beam search with K = 1, which finds the same). Returns {hypotheses, tree}.
export async function translate(
  model,
  src,
  options = {},
  { prefix = null, record = false, onStep = null } = {},
) {
  options = searchOptions(options);
  if (options.beam === 1 && options.nBest === 1 && !record && !onStep) {
    return { hypotheses: [await greedy(model, src, options, { prefix })], tree: null };
  }
  return beamSearch(model, src, options, { prefix, record, onStep });
}

// The `count` likeliest next tokens after `prefix` (search.alternatives: CTranslate2's
// return_alternatives), each completed by greedy search (beam 1) or by beam search's best.
// One whose probability is below `minProb` is not expanded, but the likeliest always is;
// EOS among them is an output that ends after the prefix. Scores are those of the whole
// output. Returns [{token, logProb (the token's, after the prefix), hypothesis}], in the
// order of the tokens' probability. Python searches the alternatives as one batch; here
// each is searched alone, which gives each the same search.
export async function alternatives(
  model,
  src,
  prefix = null,
  options = {},
  { count = 5, minProb = 0.0 } = {},
) {
  if (count < 1) throw new RangeError(`count must be at least 1, got ${count}`);
  options = searchOptions(options);
  const { alpha, needWeights } = options;
  const start = await begin(model, src, prefix, needWeights);
  const out = await model.step(Int32Array.of(start.prev), start.state, start.memory, needWeights);
  const row = masked(out.logProbs[0], false);
  const top = topk(row, Math.min(count, row.length - NEVER_EMITTED.length));
  const cut = minProb > 0 ? Math.log(minProb) : -Infinity;
  const chosen = top.index
    .map((token, i) => [token, top.values[i], i])
    .filter(([, lp, i]) => (i === 0 || lp >= cut) && lp > -Infinity);
  // the prefix's attention rows and the alternative's
  const rowWeights = needWeights ? out.weights[0] : null;
  const both = rowWeights ? [...(start.weights ?? []), rowWeights] : null;
  const answers = [];
  for (const [token, logProb] of chosen) {
    let hypothesis;
    if (token === EOS) {
      // the output ends after the prefix (float64, as Python adds its floats)
      const total = start.logProb + logProb;
      hypothesis = {
        tokens: [...start.tokens],
        score: total / lengthPenalty(start.length + 1, alpha),
        logProb: total,
        weights: both ? [...both] : null,
        node: null,
      };
    } else {
      const branch = {
        memory: await model.select(start.memory, [0]),
        state: await model.select(out.state, [0]),
        prev: token,
        tokens: [...start.tokens, token],
        tokenLogProbs: [...start.tokenLogProbs, logProb],
        logProb: fround(start.logProb + logProb),
        weights: both ? [...both] : null,
        get length() {
          return this.tokens.length;
        },
      };
      if (options.beam === 1) {
        hypothesis = await greedy(model, src, options, { start: branch });
      } else {
        const one = { ...options, nBest: 1 };
        hypothesis = (await beamSearch(model, src, one, { start: branch })).hypotheses[0];
      }
    }
    answers.push({ token, logProb, hypothesis });
  }
  return answers;
}

// --- the record --------------------------------------------------------------------------

// A number rounded to `digits` decimals as Python's round() does it: the nearest decimal
// to the double's exact value, an exact half to the even neighbour. toFixed rounds the
// exact value too but halves up; an exact half at 4 decimals is an odd multiple of 1/32.
export function roundTo(x, digits) {
  if (!Number.isFinite(x)) return x;
  const scaled = x * 2 ** (digits + 1); // exact: a power of two
  if (Number.isInteger(scaled) && Math.abs(scaled % 2) === 1) {
    const low = Math.floor(x * 10 ** digits); // exact for such x
    return (low % 2 === 0 ? low : low + 1) / 10 ** digits;
  }
  return Number(x.toFixed(digits));
}

// The (S) row of the attention that counts (attention_choice.select): an RNN's row as it
// is (choice null); a Transformer's (L, H, S) row, choice {layers, heads, layer, head}
// (1-based; head null: the mean of the layer's heads); an ensemble's (M, S), choice
// {members}: their mean. Means in float32, summed in order, as numpy's mean.
export function chosenRow(row, choice) {
  if (!choice || !(choice.members || choice.layers)) return row;
  const parts = choice.members ? choice.members : choice.layers * choice.heads;
  const width = row.length / parts;
  let base = 0;
  let count = choice.members || 0;
  if (!choice.members) {
    base = (choice.layer - 1) * choice.heads * width;
    if (choice.head !== null && choice.head !== undefined) {
      return row.subarray(base + (choice.head - 1) * width, base + choice.head * width);
    }
    count = choice.heads;
  }
  const mean = new Float32Array(width);
  for (let s = 0; s < width; s++) {
    let sum = 0;
    for (let h = 0; h < count; h++) sum = fround(sum + row[base + h * width + s]);
    mean[s] = fround(sum / count);
  }
  return mean;
}

// One node as JSON (records.node_record): `piece(id)` names a target token; `choice` the
// attention that counts (chosenRow); `heads`: a Transformer's every layer and head too.
export function nodeRecord(node, { piece, choice = null, heads = false }) {
  const d = SEARCH_DIGITS;
  const record = {
    id: node.id,
    parent: node.parent,
    depth: node.depth,
    token: node.token,
    piece: piece(node.token),
    status: node.status,
    log_prob: roundTo(node.logProb, d),
    cum_log_prob: roundTo(node.cumLogProb, d),
    score: roundTo(node.score, d),
    best: node.best,
    rank: node.rank,
    rejected: node.rejected.map(([token, lp]) => [piece(token), roundTo(lp, d)]),
    attention: null,
  };
  if (node.weights) {
    record.attention = Array.from(chosenRow(node.weights, choice), (w) => roundTo(w, d));
    if (heads && choice && choice.layers) {
      const width = node.weights.length / (choice.layers * choice.heads);
      record.attention_heads = [];
      for (let l = 0; l < choice.layers; l++) {
        const layer = [];
        for (let h = 0; h < choice.heads; h++) {
          const at = (l * choice.heads + h) * width;
          layer.push(Array.from(node.weights.subarray(at, at + width), (w) => roundTo(w, d)));
        }
        record.attention_heads.push(layer);
      }
    }
  }
  return record;
}

// A sentence's recorded search as JSON (records.search_record): `sourcePieces` the source
// subwords read, "</s>" last.
export function searchRecord(tree, { sourcePieces, piece, choice = null, heads = false }) {
  return {
    beam: tree.beam,
    alpha: tree.alpha,
    source_pieces: [...sourcePieces],
    nodes: tree.nodes.map((node) => nodeRecord(node, { piece, choice, heads })),
    nbest: [...tree.nbest],
  };
}
