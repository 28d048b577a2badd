// SentencePiece encoding and decoding in the browser (and node), exactly as the Python
// `sentencepiece` package does it for attnmt's models: same normalisation, same pieces,
// same ids, same decoded text.
//
//   import { SentencePiece } from "./sentencepiece.js";
//   const sp = new SentencePiece(json);  // json: attnmt.export.web_tokenizer.tokenizer_json
//   sp.encode("In the beginning");       // {ids: [...], pieces: ["▁In", "▁the", ...]}
//   sp.decode(ids);                      // "In the beginning"
//   sp.encode(joinWords(line));          // a typed line as `attnmt translate` encodes it
//
// No dependency: the code follows sentencepiece's C++ step by step (0.2.2 and later; checked
// against 0.2.3), and the comments name the function each part mirrors.
//   normalizer.cc  Normalizer::Normalize, NormalizePrefix: the model's precompiled charsmap
//                  (a Darts double-array trie over UTF-8 bytes, nmt_nfkc for ours), longest
//                  match first, then whitespace handling;
//   unigram_model.cc  Model::EncodeOptimized: Viterbi over the pieces' scores;
//   bpe_model.cc  Model::SampleEncode without dropout: merges by score;
//   sentencepiece_processor.cc  PopulateSentencePieceText (runs of unknown pieces become
//                  one piece) and Decode.
// Everything runs on UTF-8 bytes, as sentencepiece does, so positions and ties agree.
// A JavaScript string with a lone surrogate half (which Python cannot encode at all) is
// read as U+FFFD, as TextEncoder writes it.

const FORMAT = "attnmt-sentencepiece/1";
const SPACE = "\u2581"; // "▁": a piece starting with it starts a word
const SPACE_UTF8 = [0xe2, 0x96, 0x81];
const UNK_PENALTY = 10; // unigram_model.cc kUnkPenalty: unknown scores min score - 10
const MAX_RULE_MATCHES = 32; // normalizer.h kMaxTrieResultsSize

const utf8 = new TextEncoder();
const text8 = new TextDecoder("utf-8");

// The length of the UTF-8 character whose first byte is `lead` (string_util::OneCharLen).
const CHAR_LENGTH = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
function charLength(lead) {
  return CHAR_LENGTH[lead >> 4];
}

function bytesOf(charsmap) {
  if (typeof charsmap !== "string") return new Uint8Array(charsmap ?? []);
  const binary = atob(charsmap);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

// Python's `" ".join(line.split())`, which `attnmt translate` and the server apply to a
// line before encoding it: the characters Python's str.split() splits on (Unicode's
// White_Space and the four separators U+001C-U+001F). Not the same as JavaScript's \s,
// and not what the normaliser does: nmt_nfkc deletes U+001C-U+001F instead.
export const PYTHON_SPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

export function joinWords(line) {
  return line.split(PYTHON_SPACE).filter((word) => word !== "").join(" ");
}

// --------------------------------------------------------------------------------------
// Normalisation (normalizer.cc)
// --------------------------------------------------------------------------------------

class Normalizer {
  // spec: {add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, charsmap}, the
  // charsmap as base64 or bytes: <trie size, 4 bytes little-endian><trie><replacements>,
  // each replacement ending in a 0 byte.
  constructor(spec) {
    this.addDummyPrefix = spec.add_dummy_prefix;
    this.removeExtra = spec.remove_extra_whitespaces;
    this.escape = spec.escape_whitespaces;
    this.units = null; // no charsmap: the identity normaliser
    const blob = bytesOf(spec.charsmap);
    if (blob.length > 0) {
      const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
      const trieSize = view.getUint32(0, true);
      this.units = new Uint32Array(trieSize / 4);
      for (let i = 0; i < this.units.length; i++) {
        this.units[i] = view.getUint32(4 + 4 * i, true);
      }
      this.replacements = blob.subarray(4 + trieSize);
    }
  }

  // The longest charsmap rule matching `bytes` from `pos`: [start, end) of its replacement
  // in this.replacements and the number of input bytes it consumes, or null.
  // Darts-clone's commonPrefixSearch: a unit packs a label (the byte that leads to it),
  // an offset to its children and a has-leaf bit; a leaf's unit holds the value. As in
  // NormalizePrefix, only the first 32 matches count (sentencepiece's charsmaps never have
  // more).
  longestRule(bytes, pos) {
    const units = this.units;
    const offset = (unit) => ((unit >>> 10) << ((unit & 0x200) >>> 6)) >>> 0;
    let node = offset(units[0]);
    let found = null;
    let matches = 0;
    for (let i = pos; i < bytes.length && matches < MAX_RULE_MATCHES; i++) {
      node ^= bytes[i];
      const unit = units[node];
      if (unit === undefined || (unit & 0x800000ff) !== bytes[i]) break;
      node ^= offset(unit);
      if ((unit >>> 8) & 1) {
        found = [units[node] & 0x7fffffff, i + 1 - pos];
        matches++;
      }
    }
    if (found === null || found[0] >= this.replacements.length) return null;
    const [start, consumed] = found;
    const end = this.replacements.indexOf(0, start);
    return [start, end < 0 ? this.replacements.length : end, consumed];
  }

  // NormalizePrefix: what the input at `pos` becomes ([source, start, end]) and how many
  // input bytes that consumes. Without a rule, one character is kept as it is.
  prefix(bytes, pos) {
    const rule = this.units === null ? null : this.longestRule(bytes, pos);
    if (rule !== null) return [this.replacements, rule[0], rule[1], rule[2]];
    const length = Math.min(charLength(bytes[pos]), bytes.length - pos);
    return [bytes, pos, pos + length, length];
  }

  // Normalize: UTF-8 bytes in, normalised UTF-8 bytes out, spaces as "▁", a "▁" in front
  // (add_dummy_prefix), runs of spaces as one and none at either end (remove_extra).
  normalize(bytes) {
    const n = bytes.length;
    let pos = 0;
    if (this.removeExtra) {
      // leading characters that normalise to exactly one space
      while (pos < n) {
        const [source, start, end, consumed] = this.prefix(bytes, pos);
        if (end - start !== 1 || source[start] !== 0x20) break;
        pos += consumed;
      }
    }
    if (pos >= n) return new Uint8Array(0);
    const out = [];
    const space = this.escape ? SPACE_UTF8 : [0x20];
    if (this.addDummyPrefix) out.push(...space);
    let prevSpace = this.removeExtra;
    while (pos < n) {
      const [source, first, end, consumed] = this.prefix(bytes, pos);
      let start = first;
      // drop the spaces this piece starts with after one that ended in a space
      while (prevSpace && start < end && source[start] === 0x20) start++;
      if (start < end) {
        for (let k = start; k < end; k++) {
          if (this.escape && source[k] === 0x20) out.push(...SPACE_UTF8);
          else out.push(source[k]);
        }
        prevSpace = source[end - 1] === 0x20;
      }
      pos += consumed;
      if (!this.removeExtra) prevSpace = false;
    }
    if (this.removeExtra) {
      const endsWithSpace = () =>
        out.length >= space.length && space.every((b, k) => out[out.length - space.length + k] === b);
      while (endsWithSpace()) out.length -= space.length;
    }
    return Uint8Array.from(out);
  }
}

// --------------------------------------------------------------------------------------
// The two models
// --------------------------------------------------------------------------------------

// unigram_model.cc Model::EncodeOptimized: the best path of pieces through the normalised
// bytes, as [piece, id] pairs. A character no piece covers alone is an unknown piece scored
// min score - 10. Path scores are float32 sums (Math.fround after every addition), and a
// candidate must be strictly better to replace the path found first, so ties and rounding
// go as in C++. As sentencepiece does since 0.2.2, when the score at a start passes +-1e5
// it is subtracted from every path score from there on (float32 precision in long input).
const SCORE_RESET = 100000;

function unigramEncode(model, norm) {
  const size = norm.length;
  const best = new Float64Array(size + 1); // best path score ending here (a float32)
  const from = new Int32Array(size + 1).fill(-1); // where its last piece starts
  const ids = new Int32Array(size + 1);
  let frontier = 0; // the furthest end any piece has reached
  for (let start = 0; start < size; ) {
    let till = best[start];
    if (till < -SCORE_RESET || till > SCORE_RESET) {
      for (let i = start; i <= frontier; i++) {
        if (i === start || from[i] !== -1) best[i] = Math.fround(best[i] - till);
      }
      till = 0;
    }
    const mblen = Math.min(charLength(norm[start]), size - start);
    let single = false; // a piece covers exactly this one character
    let node = 0;
    for (let k = start; k < size; k++) {
      node = model.trieNext.get(node * 256 + norm[k]);
      if (node === undefined) break;
      const id = model.trieId[node];
      if (id < 0) continue;
      const end = k + 1;
      frontier = Math.max(frontier, end);
      const candidate = Math.fround(model.scores[id] + till);
      if (from[end] === -1 || candidate > best[end]) {
        best[end] = candidate;
        from[end] = start;
        ids[end] = id;
      }
      if (end - start === mblen) single = true;
    }
    if (!single) {
      const end = start + mblen;
      frontier = Math.max(frontier, end);
      const candidate = Math.fround(model.unkScore + till);
      if (from[end] === -1 || candidate > best[end]) {
        best[end] = candidate;
        from[end] = start;
        ids[end] = model.unk;
      }
    }
    start += mblen;
  }
  const path = [];
  for (let end = size; end > 0; end = from[end]) path.push([from[end], end, ids[end]]);
  return path.reverse().map(([start, end, id]) => [text8.decode(norm.subarray(start, end)), id]);
}

// bpe_model.cc Model::SampleEncode (no dropout): start from characters, repeatedly merge
// the adjacent pair whose merged piece has the highest score (the leftmost among equals),
// until no adjacent pair is a piece. <unk> and control pieces never take part in a merge,
// and a symbol left that is no piece (or is one of them) is <unk>.
function bpeEncode(model, norm) {
  const chars = Array.from(text8.decode(norm));
  if (chars.length === 0) return [];
  const symbols = chars.map((piece, i) => ({
    piece,
    prev: i - 1,
    next: i + 1 < chars.length ? i + 1 : -1,
  }));
  const agenda = new PairHeap();
  const addPair = (left, right) => {
    if (left === -1 || right === -1) return;
    const piece = symbols[left].piece + symbols[right].piece;
    const id = model.pieceIds.get(piece);
    if (id === undefined) return;
    agenda.push({ left, right, bits: model.scoreBits[id], size: piece.length });
  };
  for (let i = 1; i < symbols.length; i++) addPair(i - 1, i);
  while (agenda.size > 0) {
    const top = agenda.pop();
    const left = symbols[top.left];
    const right = symbols[top.right];
    // a pair one of whose symbols has changed since it was queued is stale
    if (!left.piece || !right.piece || left.piece.length + right.piece.length !== top.size) {
      continue;
    }
    left.piece += right.piece;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.piece = "";
    addPair(left.prev, top.left);
    addPair(top.left, left.next);
  }
  const out = [];
  for (let i = 0; i !== -1; i = symbols[i].next) {
    const piece = symbols[i].piece;
    out.push([piece, model.pieceIds.get(piece) ?? model.unk]);
  }
  return out;
}

// A binary max-heap of candidate merges: higher score first, then the leftmost. Scores
// are compared as sentencepiece's SymbolPairComparator does, by their float32 bits (the
// same order as the floats, except that -0 ranks below +0: BPE's first merge has -0).
class PairHeap {
  constructor() {
    this.items = [];
  }
  get size() {
    return this.items.length;
  }
  // a before b: C++'s comparator(b, a), "b ranks below a"
  before(a, b) {
    const i1 = b.bits;
    const i2 = a.bits;
    let below;
    if ((i1 & i2) < 0) below = i1 > i2; // both negative: larger bits, smaller float
    else if ((i1 ^ i2) < 0) below = i1 < 0; // signs differ
    else below = i1 < i2;
    return below || (i1 === i2 && b.left > a.left);
  }
  push(item) {
    const items = this.items;
    items.push(item);
    for (let i = items.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!this.before(items[i], items[parent])) break;
      [items[i], items[parent]] = [items[parent], items[i]];
      i = parent;
    }
  }
  pop() {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0) {
      items[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && this.before(items[l], items[m])) m = l;
        if (r < items.length && this.before(items[r], items[m])) m = r;
        if (m === i) break;
        [items[i], items[m]] = [items[m], items[i]];
        i = m;
      }
    }
    return top;
  }
}

// --------------------------------------------------------------------------------------
// The processor
// --------------------------------------------------------------------------------------

export class SentencePiece {
  // data: the JSON of attnmt.export.web_tokenizer.tokenizer_json (parsed).
  constructor(data) {
    if (data.format !== FORMAT) {
      throw new Error(`not a tokenizer this code reads: format ${data.format}, expected ${FORMAT}`);
    }
    this.modelType = data.model_type;
    if (this.modelType !== "unigram" && this.modelType !== "bpe") {
      throw new Error(`unknown sentencepiece model type: ${this.modelType}`);
    }
    this.pieces = data.pieces;
    this.scores = Float32Array.from(data.scores); // float32, as in the model file
    this.unk = data.unk;
    this.unkSurface = data.unk_surface;
    this.control = new Set(data.control);
    this.normalizer = new Normalizer(data.normalizer);

    this.scoreBits = new Int32Array(this.scores.buffer); // the same floats as int32 bits

    // The pieces that can be matched or merged: all but <unk> and the control pieces.
    this.pieceIds = new Map();
    let minScore = Infinity;
    for (let id = 0; id < this.pieces.length; id++) {
      if (id === this.unk || this.control.has(id)) continue;
      this.pieceIds.set(this.pieces[id], id);
      minScore = Math.min(minScore, this.scores[id]);
    }
    this.unkScore = Math.fround(minScore - UNK_PENALTY);

    // Unigram: a byte trie of the pieces; node 0 is the root, an edge is keyed
    // node * 256 + byte, trieId[node] the id of the piece ending there (-1: none).
    if (this.modelType === "unigram") {
      this.trieNext = new Map();
      this.trieId = [-1];
      for (const [piece, id] of this.pieceIds) {
        let node = 0;
        for (const byte of utf8.encode(piece)) {
          const key = node * 256 + byte;
          let next = this.trieNext.get(key);
          if (next === undefined) {
            next = this.trieId.length;
            this.trieId.push(-1);
            this.trieNext.set(key, next);
          }
          node = next;
        }
        this.trieId[node] = id;
      }
    }
  }

  get size() {
    return this.pieces.length;
  }

  // The normalised text as sentencepiece encodes it ("▁" for spaces, one in front).
  normalize(text) {
    return text8.decode(this.normalizer.normalize(utf8.encode(text)));
  }

  // SentencePieceProcessor.encode(text, out_type=int) and (out_type=str): ids and pieces.
  // A run of unknown characters is one <unk> whose piece is the (normalised) text it
  // covers, as PopulateSentencePieceText merges them.
  encode(text) {
    const norm = this.normalizer.normalize(utf8.encode(text));
    const found = this.modelType === "unigram" ? unigramEncode(this, norm) : bpeEncode(this, norm);
    const ids = [];
    const pieces = [];
    let prevUnk = false;
    for (const [piece, id] of found) {
      const unk = id === this.unk;
      if (unk && prevUnk) pieces[pieces.length - 1] += piece;
      else {
        ids.push(id);
        pieces.push(piece);
      }
      prevUnk = unk;
    }
    return { ids, pieces };
  }

  // SentencePieceProcessor.decode(ids): control pieces vanish, <unk> is unk_surface
  // (" ⁇ "), "▁" is a space, and the first piece's leading "▁" goes (the dummy prefix);
  // with remove_extra_whitespaces, every piece's leading "▁" goes until some text is out.
  decode(ids) {
    const stripFirst = this.normalizer.addDummyPrefix || this.normalizer.removeExtra;
    let text = "";
    let atStart = true; // is_bos_ws: a leading "▁" may still be dropped
    let droppedSpace = false; // bos_ws_seen
    for (const value of ids) {
      const id = Number(value);
      if (!Number.isInteger(id) || id < 0 || id >= this.pieces.length) {
        throw new RangeError(`piece id is out of range: ${value} (the model has ${this.size})`);
      }
      if (droppedSpace || text !== "") atStart = false;
      droppedSpace = false;
      if (this.control.has(id)) continue;
      if (id === this.unk) {
        text += this.unkSurface;
        continue;
      }
      let piece = this.pieces[id];
      if (atStart && stripFirst && piece.startsWith(SPACE)) {
        piece = piece.slice(SPACE.length);
        droppedSpace = !this.normalizer.removeExtra;
      }
      text += piece.replaceAll(SPACE, " ");
    }
    return text;
  }

  idToPiece(id) {
    return this.pieces[id];
  }
}
