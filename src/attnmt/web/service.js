// How the page translates and scores with one ONNX export, as attnmt.service does for
// `attnmt serve EXPORT`: a request (`Request`: the service's fields and checks, same
// defaults, same sentences), a line cleaned as the server cleans it (`cleanLine`), the
// compute budget counted before any decoding (`overBudget`), the lines translated with the
// prefix and alternatives asked (`translateLines`) and pairs scored by forced decoding
// step by step (`scorePairs`, hypotheses.score_by_steps). Records: records.js.

import { joinWords } from "./sentencepiece.js";
import { EOS, alternatives, begin, lengthPenalty } from "./search.js";
import { translateLine } from "./translate.js";

export const IG_STEPS = 32; // attnmt.explain.names.IG_STEPS
const NOT_WORDS = [0, 2, 3]; // PAD, BOS, EOS: ids a prefix cannot force

// A refusal the server answers 422 (attnmt.errors.UserError).
export class UserError extends Error {}

// Python's `f"{n:,}"`.
export function commas(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

// --- the request (attnmt.service.Request) -------------------------------------------------

export const REQUEST = {
  beam: 1, // SearchOptions.beam
  alpha: 0.6,
  n_best: 1,
  max_len_ratio: 2.0,
  prefix: null,
  alternatives: null,
  min_alternative_prob: 0.0,
  search: false,
  links: true,
  maps: "every",
  threshold: null,
  explain: [],
  ig_steps: IG_STEPS,
};

// Python's str() of a number in a message (1.0 is "1.0").
function pyNumber(x) {
  return Number.isInteger(x) ? `${x}.0` : String(x);
}

// Request.check: the request itself, or a UserError naming the first impossible option.
export function checkRequest(given) {
  const r = { ...REQUEST, ...given };
  if (r.beam < 1) throw new UserError(`beam must be at least 1, got ${r.beam}`);
  if (r.alpha < 0) throw new UserError(`alpha must be >= 0, got ${pyNumber(r.alpha)}`);
  if (r.max_len_ratio <= 0) {
    throw new UserError(`max_len_ratio must be positive, got ${pyNumber(r.max_len_ratio)}`);
  }
  if (!(r.n_best >= 1 && r.n_best <= r.beam)) {
    throw new UserError(
      `n_best=${r.n_best} needs beam >= ${Math.max(r.n_best, 1)} ` +
        `(n_best is between 1 and beam, which is ${r.beam})`,
    );
  }
  if (r.alternatives !== null && r.alternatives < 1) {
    throw new UserError(`alternatives must be at least 1, got ${r.alternatives}`);
  }
  if (r.alternatives && r.n_best > 1) {
    throw new UserError("alternatives and n_best each list several outputs; use one");
  }
  if (!(r.min_alternative_prob >= 0 && r.min_alternative_prob <= 1)) {
    throw new UserError(
      `min_alternative_prob must be between 0 and 1, got ${pyNumber(r.min_alternative_prob)}`,
    );
  }
  if (r.threshold !== null && !(r.threshold > 0 && r.threshold <= 1)) {
    throw new UserError(`threshold must be in (0, 1], got ${pyNumber(r.threshold)}`);
  }
  if (r.ig_steps < 1) throw new UserError(`ig_steps must be at least 1, got ${r.ig_steps}`);
  return r;
}

// Request.draws: whether anything read off the attention is asked for.
function draws(request) {
  return request.links || request.maps !== null || request.search;
}

// --- a line as the server reads it (attnmt.serve.validation.clean_line) ----------------------

const CONTROL = /^\p{Cc}$/u;

function isSurrogate(c) {
  const code = c.charCodeAt(0);
  return c.length === 1 && code >= 0xd800 && code <= 0xdfff;
}

// [the line as the model reads it, why it cannot be translated (null if it can)]: control
// characters count as spaces, a lone surrogate is an error (shown as U+FFFD), whitespace
// runs are one space, and a line over `maxChars` characters (code points, as Python counts)
// is cut there and refused.
export function cleanLine(line, maxChars) {
  const chars = Array.from(line, (c) => (CONTROL.test(c) ? " " : c));
  const bad = chars.find(isSurrogate);
  if (bad !== undefined) {
    const shown = joinWords(chars.map((c) => (isSurrogate(c) ? "\ufffd" : c)).join(""));
    const code = bad.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
    return [
      shown,
      `the line holds U+${code}, a lone surrogate, which is not valid Unicode; send the ` +
        "text as UTF-8",
    ];
  }
  const text = joinWords(chars.join(""));
  const points = Array.from(text);
  if (points.length > maxChars) {
    return [
      points.slice(0, maxChars).join(""),
      `the line has ${commas(points.length)} characters; this server translates at most ` +
        `${commas(maxChars)} per line (--max-line-chars)`,
    ];
  }
  return [text, null];
}

// --- the budget (attnmt.serve.budget, RunDecoder.over_budget) --------------------------------

// The longest output the search allows a source of `source` subwords, EOS included
// (RunDecoder._output: the settings' max_len_ratio, 2.0; an export has no output cap).
function longestOutput(source) {
  return Math.trunc((source + 1) * REQUEST.max_len_ratio) + 5;
}

// Why translating `lines` (raw) with `request` is over the search budget, as the server's
// one sentence; null when within. Scoring searches nothing: never over.
export function overBudget(lines, request, task, { settings, vocab, limit }) {
  if (task === "score") return null;
  const searches = request.beam * (1 + (request.alternatives || 0));
  const steps = settings.max_search_steps;
  if (searches * lines.length * longestOutput(limit) <= steps) return null;
  const outputs = [];
  for (const line of lines) {
    const [text, error] = cleanLine(line, settings.max_line_chars);
    if (error !== null || !text) continue;
    outputs.push(longestOutput(Math.min(vocab.src.encode(text).ids.length, limit)));
  }
  const total = outputs.reduce((a, b) => a + b, 0);
  const asked = request.beam * total;
  if (asked <= steps) return null;
  const count = `${commas(outputs.length)} ${outputs.length === 1 ? "line" : "lines"}`;
  const search = request.beam === 1 ? "greedy search" : `beam ${request.beam}`;
  const lower = request.beam === 1 ? "" : "lower beam or ";
  return (
    `${search} on ${count} (up to ${commas(total)} output tokens) is ${commas(asked)} search ` +
    `steps, over this server's ${commas(steps)} (--max-search-steps): ${lower}send fewer or ` +
    "shorter lines"
  );
}

// --- translating (Service.translate) ------------------------------------------------------------

// Translator.prefix_ids: text split as a sentence is, or ids checked against the target
// vocabulary; null for none.
export function prefixIds(prefix, tgt) {
  if (prefix === null || prefix === undefined) return null;
  if (typeof prefix === "string") {
    const text = joinWords(prefix);
    return text ? tgt.encode(text).ids : null;
  }
  const bad = prefix.filter((i) => !(i >= 0 && i < tgt.size) || NOT_WORDS.includes(i));
  if (bad.length) {
    throw new UserError(
      `prefix token ${bad[0]} is not a word of this model's target vocabulary: give ids ` +
        `from 4 to ${tgt.size - 1} (or 1, unknown), or the prefix as text`,
    );
  }
  return prefix.length ? [...prefix] : null;
}

function searchSettings(model, request) {
  return {
    beam: request.beam,
    alpha: request.alpha,
    nBest: request.n_best,
    maxLenRatio: request.max_len_ratio,
    needWeights: model.usesAttention && draws(request),
  };
}

// One translate.js sentence per line (cleaned, error-free), with `prefix` (the forced ids)
// and `alternatives` (search.js's, each completed) as the request asks. `onStep(nodes)`
// hears each search step (the search is then recorded); `choice`: the record's attention.
export async function translateLines(model, vocab, lines, request, { onStep = null, choice } = {}) {
  const prefix = prefixIds(request.prefix, vocab.tgt);
  const options = searchSettings(model, request);
  const sentences = [];
  for (const line of lines) {
    const sentence = await translateLine(model, vocab, line, options, {
      prefix,
      record: request.search,
      onStep,
      choice,
    });
    sentence.prefix = prefix;
    sentence.alternatives = null;
    sentences.push(sentence);
  }
  if (request.alternatives) {
    for (const sentence of sentences) {
      if (!sentence.source) {
        sentence.alternatives = [];
        continue;
      }
      sentence.alternatives = await alternatives(model, [...sentence.ids, EOS], prefix, options, {
        count: request.alternatives,
        minProb: request.min_alternative_prob,
      });
    }
  }
  return sentences;
}

// --- scoring (Service.score, hypotheses.score_by_steps) ------------------------------------------

// Each (source, target) pair read by the model, one at a time: the target as a forced
// prefix, then one more step for its EOS. Returns per pair null (both sides empty) or
// {sentence (translate.js's shape, its translation the target), tokenLogProbs}.
export async function scorePairs(model, vocab, pairs, request, limit) {
  const needWeights = model.usesAttention && draws(request);
  const out = [];
  for (const [source, target] of pairs) {
    if (!(source || target)) {
      out.push(null);
      continue;
    }
    const encoded = vocab.src.encode(source).ids;
    const ids = encoded.slice(0, limit);
    const tokens = vocab.tgt.encode(target).ids;
    const start = await begin(model, [...ids, EOS], tokens.length ? tokens : null, needWeights);
    const prev = Int32Array.of(start.prev);
    const step = await model.step(prev, start.state, start.memory, needWeights);
    const tokenLogProbs = [...start.tokenLogProbs, step.logProbs[0][EOS]];
    let total = 0; // float64, one after another, as Python's sum()
    for (const x of tokenLogProbs) total += x;
    let attention = null;
    if (needWeights) {
      attention = [...(start.weights ?? []), step.weights[0]].map((r) => Array.from(r));
    }
    const sentence = {
      source,
      ids,
      truncated: encoded.length > limit,
      prefix: null,
      alternatives: null,
      translation: {
        text: target,
        tokens,
        score: total / lengthPenalty(tokenLogProbs.length, request.alpha),
        log_prob: total,
        attention,
        nbest: null,
        search: null,
      },
    };
    out.push({ sentence, tokenLogProbs });
  }
  return out;
}
