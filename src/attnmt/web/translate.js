// One typed line translated in the page as `attnmt translate EXPORT` translates it
// (attnmt.decoding.translator.Translator, one sentence at a time): the line's whitespace
// joined, its subwords (sentencepiece.js), cut to the run's source limit, EOS appended,
// searched (search.js over an OnnxModel of onnx_model.js), decoded back to text.
//
//   const model = await OnnxModel.load(ort, read);
//   const vocab = {src: new SentencePiece(srcJson), tgt: new SentencePiece(tgtJson)};
//   const sentence = await translateLine(model, vocab, "In the beginning", {beam: 5});
//   sentence.translation.text, sentence.translation.nbest, sentence.translation.attention
//
// The answer's names are those of the record the server sends
// (attnmt.decoding.records.sentence_record), its numbers not rounded.

import { joinWords } from "./sentencepiece.js";
import { EOS, searchOptions, searchRecord, translate } from "./search.js";

export const MAX_SOURCE_TOKENS = 400; // translator.MAX_SOURCE_TOKENS

// The longest source (subwords, EOS not counted) the export's run translates; longer are
// cut (translator.source_limit): MAX_SOURCE_TOKENS, or what an RNN's `location` score can
// read (model.max_source_len positions, the EOS included). `requested` lowers it.
export function sourceLimit(info, requested = null) {
  const model = info.run_config.model;
  const transformer = info.layout.family === "transformer"; // family(name).transformer
  let limit = MAX_SOURCE_TOKENS;
  let hard = null;
  if (!transformer && model.attention === "location") {
    hard = model.max_source_len - 1; // the EOS takes one position
    limit = Math.min(limit, hard);
  }
  if (requested !== null && requested !== undefined) {
    if (requested < 1) {
      throw new RangeError(`the source limit must be at least 1, got ${requested}`);
    }
    if (hard !== null && requested > hard) {
      throw new RangeError(
        `a source limit of ${requested} is more than this model can read: its location ` +
          `attention scores at most ${hard} source subwords plus the EOS`,
      );
    }
    limit = requested;
  }
  return limit;
}

// The attention a record shows by default (attention_choice.choose_attention): an RNN's
// one row; a Transformer's last-but-one layer (the only one of one), its heads' mean.
export function defaultChoice(info) {
  if (info.layout.family !== "transformer") return null;
  const layers = Number(info.run_config.model.layers);
  const heads = Number(info.run_config.model.heads);
  return { layers, heads, layer: layers > 1 ? layers - 1 : layers, head: null };
}

// Text of target ids up to the first EOS (SentencePieceSide.decode).
function decodeText(tgt, ids) {
  const end = ids.indexOf(EOS);
  return tgt.decode(end < 0 ? ids : ids.slice(0, end));
}

// The pieces of `ids` and the final "</s>" (attention_choice.labels: weights have an EOS).
function labels(side, ids) {
  return [...ids, EOS].map((id) => side.idToPiece(id));
}

// One line -> {source, ids, truncated, source_pieces, translation} where translation is
// null for a blank line, else {text, tokens, score, log_prob, target_pieces, attention
// (a row per token and the EOS, each (S) or (L, H, S) flattened; null without
// needWeights), nbest (with nBest > 1: [{text, tokens, score, log_prob, attention}],
// best first), search (with `record`: search.js searchRecord)}.
// options: search.js searchOptions (beam, alpha, nBest, maxLenRatio, maxLen,
// needWeights) and maxSourceLen (sourceLimit's `requested`); `prefix`: target ids
// forced first; `choice`: the record's attention (default: defaultChoice).
export async function translateLine(
  model,
  vocab,
  line,
  options = {},
  { prefix = null, record = false, onStep = null, choice } = {},
) {
  const { maxSourceLen = null, ...search } = options;
  const settings = searchOptions(search);
  if (settings.needWeights && !model.usesAttention) {
    throw new Error(
      `this export's model (${model.family}) has no attention, so it has no alignments ` +
        "or attention plots",
    );
  }
  if (settings.maxLen === null) settings.maxLen = model.maxOutputTokens; // translate_ids
  const limit = sourceLimit(model.info, maxSourceLen);
  const source = joinWords(line);
  const sentence = { source, ids: [], truncated: false, source_pieces: [], translation: null };
  if (!source) return sentence; // a blank line: nothing is decoded
  const ids = vocab.src.encode(source).ids;
  sentence.truncated = ids.length > limit;
  sentence.ids = ids.slice(0, limit);
  sentence.source_pieces = labels(vocab.src, sentence.ids);
  const src = [...sentence.ids, EOS]; // the search reads the EOS too
  const found = await translate(model, src, settings, { prefix, record, onStep });
  const entry = (h) => ({
    text: decodeText(vocab.tgt, h.tokens),
    tokens: h.tokens,
    score: h.score,
    log_prob: h.logProb,
    attention: h.weights ? h.weights.map((row) => Array.from(row)) : null,
  });
  const [best] = found.hypotheses;
  sentence.translation = {
    ...entry(best),
    target_pieces: labels(vocab.tgt, best.tokens),
    nbest: settings.nBest > 1 ? found.hypotheses.map(entry) : null,
    search: null,
  };
  if (found.tree) {
    const piece = (id) => vocab.tgt.idToPiece(id);
    sentence.translation.search = searchRecord(found.tree, {
      sourcePieces: sentence.source_pieces,
      piece,
      choice: choice === undefined ? defaultChoice(model.info) : choice,
    });
  }
  return sentence;
}
