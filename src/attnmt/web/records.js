// The record of a translated (or scored) line as `attnmt serve EXPORT` answers it: the
// port of attnmt.decoding.records (sentence_record, the maps, the n-best, the prefix,
// the alternatives, scored_record) and of the word views it reads the links off
// (attnmt.alignment.links: source_words, target_words, word_view). A record is the
// server's `LineResult` (attnmt.serve.schemas), field for field and in its order: the
// names, the rounding (6 decimals for scores, 5 for weights, 4 for a search's nodes) and
// the order of the maps are the server's.
//
//   const choice = attentionChoice(model.info);              // the map links are read off
//   const sentence = await translateLine(model, vocab, line, ...);   // translate.js
//   const result = lineResult(1, sentence, vocab, choice, {links: true, maps: "every"});
//
// `sentence` is translate.js's (its numbers unrounded), with `prefix` (the forced ids)
// and `alternatives` (search.js's, completed) set by service.js.

import { PYTHON_SPACE } from "./sentencepiece.js";
import { EOS, chosenRow, roundTo } from "./search.js";

export const SCORE_DIGITS = 6; // records.SCORE_DIGITS
export const WEIGHT_DIGITS = 5; // records.WEIGHT_DIGITS
const ATTENTION_SCALE = "weights"; // records.ATTENTION_SCALE
const WORD_START = "\u2581"; // "▁"

// --- which map counts (attention_choice) ------------------------------------------------

// The attention that aligns words (choose_attention with the server's defaults): an RNN's
// one map; a Transformer's last-but-one layer (its only one if it has one), the mean of its
// heads. `offset` is the family's align_offset, 0 for every family that exports.
export function attentionChoice(info) {
  if (info.layout.family !== "transformer") {
    return { transformer: false, layer: 1, head: null, layers: 1, heads: 1, offset: 0 };
  }
  const layers = Number(info.run_config.model.layers);
  const heads = Number(info.run_config.model.heads);
  const layer = layers > 1 ? layers - 1 : layers;
  return { transformer: true, layer, head: null, layers, heads, offset: 0 };
}

// AttentionChoice.describe: the map's name.
function describe(choice) {
  const sign = choice.offset > 0 ? "+" : "";
  const shift = choice.offset ? `, weights of step t${sign}${choice.offset}` : "";
  if (!choice.transformer) return `decoder attention${shift}`;
  const head = choice.head === null ? "mean of heads" : `head ${choice.head}`;
  return `layer ${choice.layer}, ${head}${shift}`;
}

// every_choice: an RNN's one map; a Transformer's layers, each its mean of heads, then
// each head.
function everyChoice(choice) {
  if (!choice.transformer) return [choice];
  const out = [];
  for (let layer = 1; layer <= choice.layers; layer++) {
    for (const head of [null, ...Array.from({ length: choice.heads }, (_, h) => h + 1)]) {
      out.push({ ...choice, layer, head });
    }
  }
  return out;
}

// select: the (T, S) matrix of `choice` from rows of weights ((S) or (L, H, S) flattened),
// each row a float32 array (search.js chosenRow: numpy's float32 mean of heads).
export function select(rows, choice) {
  if (!choice.transformer) return rows;
  const { layers, heads, layer, head } = choice;
  const pick = { layers, heads, layer, head };
  return rows.map((row) => chosenRow(Float32Array.from(row), pick));
}

// shift_rows: row t is row t + offset (clamped).
function shiftRows(matrix, offset) {
  if (!offset) return matrix;
  const last = matrix.length - 1;
  return matrix.map((_, t) => matrix[Math.min(Math.max(t + offset, 0), last)]);
}

// --- words (attnmt.alignment.links) -----------------------------------------------------

// Python's str.split(): the words between runs of whitespace.
export function pySplit(text) {
  return text.split(PYTHON_SPACE).filter((word) => word !== "");
}

const EDGE_SPACE = new RegExp(`^(?:${PYTHON_SPACE.source})|(?:${PYTHON_SPACE.source})$`, "g");

// subwords.word_of_pieces: a piece starting with "▁" starts a word (a lone "▁" starts the
// word the next piece continues).
function wordOfPieces(pieces) {
  let word = -1;
  let pendingStart = false;
  return pieces.map((piece) => {
    if ((piece.startsWith(WORD_START) && !pendingStart) || word < 0) word += 1;
    pendingStart = piece === WORD_START;
    return word;
  });
}

// links._groups: the ids split into runs of equal word index.
function groups(ids, wordOf) {
  const out = [];
  let previous = null;
  ids.forEach((token, i) => {
    if (wordOf[i] !== previous || !out.length) {
      out.push([]);
      previous = wordOf[i];
    }
    out[out.length - 1].push(token);
  });
  return out;
}

function sameIds(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

// source_words: the words of a source whose first `nIds` subword ids were read, and the
// word of each id.
export function sourceWords(side, text, nIds) {
  let words = pySplit(text);
  const perWord = words.map((word) => side.encode(word).ids);
  const whole = side.encode(text);
  let wordOf;
  if (sameIds(perWord.flat(), whole.ids)) {
    wordOf = perWord.flatMap((ids, w) => ids.map(() => w));
  } else {
    wordOf = wordOfPieces(whole.pieces);
    if (Math.max(-1, ...wordOf) + 1 !== words.length) {
      words = groups(whole.ids, wordOf).map(
        (ids) => side.decode(ids).replace(EDGE_SPACE, "") || "?",
      );
    }
  }
  wordOf = wordOf.slice(0, nIds);
  return { wordOf, words: words.slice(0, Math.max(-1, ...wordOf) + 1) };
}

// target_words: the words of an output (its ids, no EOS), from the pieces of the ids.
export function targetWords(side, tokens) {
  const wordOf = [];
  const words = [];
  const pieces = tokens.map((id) => side.idToPiece(id));
  for (const ids of groups(tokens, wordOfPieces(pieces))) {
    const parts = pySplit(side.decode(ids));
    for (const _ of ids) wordOf.push(parts.length ? words.length : -1);
    words.push(...parts);
  }
  return { wordOf, words };
}

// links._compact: the words that own pieces renumbered 0..K-1.
function compact(wordOf) {
  const present = [...new Set(wordOf.filter((w) => w >= 0))].sort((a, b) => a - b);
  const renumbered = new Map(present.map((w, i) => [w, i]));
  return { map: wordOf.map((w) => renumbered.get(w) ?? -1), present };
}

// word_view: a (T, S) subword matrix (EOS row and column included) merged to words (sum
// over a source word's pieces, mean over a target word's), in float64, and the links read
// off it: each target word to its most-weighed source word (the first on a tie), and with
// a threshold to every source word weighing that much; a row of zeros links nothing.
export function wordView(matrix, source, target, threshold = null) {
  const src = compact(source.wordOf);
  const tgt = compact(target.wordOf);
  const width = matrix.length ? matrix[0].length : 0;
  const rowsOf = tgt.present.map(() => []);
  tgt.map.forEach((w, t) => {
    if (w >= 0) rowsOf[w].push(t);
  });
  const byWord = rowsOf.map((rows) => {
    const share = 1.0 / rows.length; // numpy: the one-hot row over its sum
    const mean = new Float64Array(width);
    for (let s = 0; s < width; s++) {
      let sum = 0.0;
      for (const t of rows) sum += share * matrix[t][s];
      mean[s] = sum;
    }
    const out = new Float64Array(src.present.length);
    src.map.forEach((w, s) => {
      if (w >= 0) out[w] += mean[s];
    });
    return out;
  });
  const weights = target.words.map(() => new Array(source.words.length).fill(0));
  byWord.forEach((row, i) => {
    row.forEach((value, j) => {
      weights[tgt.present[i]][src.present[j]] = value;
    });
  });
  const links = [];
  weights.forEach((row, j) => {
    if (!row.some((value) => value !== 0)) return;
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    const linked = new Set([best]);
    if (threshold !== null) row.forEach((value, i) => value >= threshold && linked.add(i));
    for (const i of linked) links.push([i, j]);
  });
  links.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return { wordWeights: weights, links };
}

// format_pharaoh: sorted links as "i-j" pairs.
export function pharaoh(links) {
  return links.map(([i, j]) => `${i}-${j}`).join(" ");
}

export function roundedMatrix(matrix, digits = WEIGHT_DIGITS) {
  return matrix.map((row) => Array.from(row, (x) => roundTo(x, digits)));
}

// --- the maps -----------------------------------------------------------------------------

// One map (records._map and _placed): both levels, its links; and its word view.
function oneMap(choice, rows, src, tgt, threshold) {
  const matrix = select(rows, choice);
  const view = wordView(shiftRows(matrix, choice.offset), src, tgt, threshold);
  const entry = {
    layer: choice.transformer ? choice.layer : null,
    head: choice.transformer ? choice.head : null,
    name: describe(choice),
    method: "attention",
    scale: ATTENTION_SCALE,
    subword: roundedMatrix(matrix),
    word: roundedMatrix(view.wordWeights),
    alignment: pharaoh(view.links),
  };
  return { entry, view };
}

// records._maps: every map (or the aligning one), and the index of the one `choice` names.
function maps(rows, choice, which, src, tgt, threshold) {
  if (!rows) return { drawn: [], index: 0 };
  const choices = which === "every" ? everyChoice(choice) : [choice];
  const drawn = choices.map((one) => oneMap(one, rows, src, tgt, threshold));
  const index = choices.findIndex((c) => c.layer === choice.layer && c.head === choice.head);
  return { drawn, index: Math.max(index, 0) };
}

// --- the record -----------------------------------------------------------------------------

function labels(side, ids) {
  return [...ids, EOS].map((id) => side.idToPiece(id));
}

function decodeText(side, ids) {
  const end = ids.indexOf(EOS);
  return side.decode(end < 0 ? ids : ids.slice(0, end));
}

// A LineResult with the server's defaults (pydantic fills what a record leaves out).
export function emptyResult(line, source, translation = "", error = null) {
  return {
    line,
    source,
    translation,
    error,
    truncated: false,
    score: 0.0,
    log_prob: 0.0,
    source_pieces: [],
    target_pieces: [],
    source_words: [],
    target_words: [],
    alignment: "",
    links: [],
    attention: null,
    default_attention: null,
    explanations: null,
    nbest: null,
    prefix: null,
    search: null,
    alternatives: null,
  };
}

// sentence_record as the server answers it (a LineResult): `sentence` as translate.js
// gives it, numbered `line`. Options as Service.records passes them: links, maps ("every",
// "aligning" or null), threshold, search (show the recorded search).
export function lineResult(line, sentence, vocab, choice, options = {}) {
  const { links = true, maps: which = "every", threshold = null, search = true } = options;
  const done = sentence.translation;
  const record = emptyResult(line, sentence.source, done ? done.text : "");
  record.truncated = sentence.truncated;
  record.attention = which === null ? null : [];
  if (!done) return record; // a blank line: nothing was decoded
  record.score = roundTo(done.score, SCORE_DIGITS);
  record.log_prob = roundTo(done.log_prob ?? 0.0, SCORE_DIGITS);
  record.source_pieces = labels(vocab.src, sentence.ids);
  record.target_pieces = labels(vocab.tgt, done.tokens);
  if (links || which !== null || done.nbest) {
    const src = sourceWords(vocab.src, sentence.source, sentence.ids.length);
    const tgt = targetWords(vocab.tgt, done.tokens);
    const { drawn, index } = maps(done.attention, choice, which, src, tgt, threshold);
    if (links || which !== null) {
      record.source_words = src.words;
      record.target_words = tgt.words;
    }
    if (links && drawn.length) {
      record.alignment = drawn[index].entry.alignment;
      record.links = drawn[index].view.links;
    }
    if (which !== null) {
      record.attention = drawn.map((d) => d.entry);
      record.default_attention = drawn.length ? index : null;
    }
    if (done.nbest) {
      record.nbest = done.nbest.map((h) => nbestEntry(h, src, vocab, choice, threshold));
    }
  }
  return steered(record, sentence, vocab, choice, search);
}

// records._nbest_entry: one hypothesis, its links read as the best's are.
function nbestEntry(hyp, src, vocab, choice, threshold) {
  let links = [];
  if (hyp.attention) {
    const tgt = targetWords(vocab.tgt, hyp.tokens);
    const matrix = shiftRows(select(hyp.attention, choice), choice.offset);
    links = wordView(matrix, src, tgt, threshold).links;
  }
  return {
    translation: decodeText(vocab.tgt, hyp.tokens),
    score: roundTo(hyp.score, SCORE_DIGITS),
    log_prob: roundTo(hyp.log_prob, SCORE_DIGITS),
    alignment: pharaoh(links),
  };
}

// records._steered: the forced prefix, the recorded search (if shown), the alternatives.
function steered(record, sentence, vocab, choice, search) {
  if (sentence.prefix && sentence.prefix.length) {
    record.prefix = {
      text: vocab.tgt.decode(sentence.prefix),
      tokens: sentence.prefix.length,
      pieces: sentence.prefix.map((id) => vocab.tgt.idToPiece(id)),
      ids: [...sentence.prefix],
    };
  }
  if (search && sentence.translation.search) {
    const tree = sentence.translation.search;
    record.search = { ...tree, nodes: tree.nodes.map(searchNode) };
  }
  if (sentence.alternatives) {
    record.alternatives = sentence.alternatives.map((alt) => alternativeRecord(alt, vocab, choice));
  }
  return record;
}

// A node as the server's SearchNode lists it (no `attention_heads`).
function searchNode(node) {
  const { id, parent, depth, token, piece, status, log_prob, cum_log_prob, score } = node;
  const { best, rank, rejected, attention } = node;
  return {
    ...{ id, parent, depth, token, piece, status, log_prob, cum_log_prob, score },
    ...{ best, rank, rejected, attention },
  };
}

// records.alternative_record: search.js's {token, logProb, hypothesis}.
function alternativeRecord(alt, vocab, choice) {
  const hyp = alt.hypothesis;
  return {
    token: alt.token,
    piece: vocab.tgt.idToPiece(alt.token),
    prob: roundTo(Math.exp(alt.logProb), SCORE_DIGITS),
    log_prob_token: roundTo(alt.logProb, SCORE_DIGITS),
    translation: decodeText(vocab.tgt, hyp.tokens),
    score: roundTo(hyp.score, SCORE_DIGITS),
    log_prob: roundTo(hyp.logProb ?? 0.0, SCORE_DIGITS),
    target_pieces: labels(vocab.tgt, hyp.tokens),
    subword_weights: hyp.weights
      ? roundedMatrix(select(hyp.weights.map((row) => Array.from(row)), choice))
      : null,
  };
}

// records.scored_record as the server answers it (a ScoreResult): `sentence` as
// translate.js gives it, its translation the target given, and each target subword's
// log-probability (</s> last).
export function scoreResult(line, sentence, tokenLogProbs, vocab, choice, options = {}) {
  const record = lineResult(line, sentence, vocab, choice, { ...options, search: false });
  record.token_log_probs = tokenLogProbs.map((x) => roundTo(x, SCORE_DIGITS));
  return record;
}
