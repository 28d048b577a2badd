// The request bodies of `attnmt serve` checked as the server checks them (pydantic over
// attnmt.serve.schemas, strict, unknown fields refused), with the server's sentences: a
// body that fails is answered 422 {detail: "field: message; ...", errors: [{field,
// message}]}, fields in the model's order, then the unknown ones, then (only when every
// field passed) the model's own check ("give exactly one of ...") as field "body".
//
//   const [body, problem] = validate(TRANSLATE, given);   // problem: the 422's data or null

const MAX_BEAM = 16; // schemas.MAX_BEAM
const MAX_ALTERNATIVES = 16;
const MAX_IG_STEPS = 256;
const MAX_LEVEL = 16; // validation.MAX_LEVEL
const RAGGED = "every row must be as long";
const IG_STEPS = 32;

const NOT_OBJECT = "Input should be a valid dictionary or object to extract fields from";
const WHOLE_LIST = "list[function-before[whole(), int]]"; // pydantic's name of list[Whole]

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

// Each checker takes a value and gives [value, errors]; an error is {loc: [...], msg}.
const fail = (msg, loc = []) => [undefined, [{ loc, msg }]];

function str(v) {
  return typeof v === "string" ? [v, []] : fail("Input should be a valid string");
}

function bool(v) {
  return typeof v === "boolean" ? [v, []] : fail("Input should be a valid boolean");
}

function bounded(v, ge, le) {
  if (ge !== undefined && !(v >= ge)) return fail(`Input should be greater than or equal to ${ge}`);
  if (le !== undefined && !(v <= le)) return fail(`Input should be less than or equal to ${le}`);
  return [v, []];
}

// A whole number (5.0 is 5; JSON cannot tell them apart here), strict: no "5", no true.
function whole(ge, le) {
  return (v) => {
    if (typeof v !== "number" || !Number.isInteger(v)) {
      return fail("Input should be a valid integer");
    }
    return bounded(v, ge, le);
  };
}

function number(ge, le) {
  return (v) => {
    if (typeof v !== "number" || !Number.isFinite(v)) return fail("Input should be a valid number");
    return bounded(v, ge, le);
  };
}

function nullable(check) {
  return (v) => (v === null ? [null, []] : check(v));
}

function listOf(check) {
  return (v) => {
    if (!Array.isArray(v)) return fail("Input should be a valid list");
    const out = [];
    const errors = [];
    v.forEach((item, i) => {
      const [value, problems] = check(item);
      out.push(value);
      for (const e of problems) errors.push({ loc: [i, ...e.loc], msg: e.msg });
    });
    return [out, errors];
  };
}

// `str | list[Whole]`: a smart union lists each member's errors, named after the member.
function prefix(v) {
  if (typeof v === "string") return [v, []];
  const [ids, problems] = listOf(whole())(v);
  if (!problems.length) return [ids, []];
  const errors = [{ loc: ["str"], msg: "Input should be a valid string" }];
  for (const e of problems) errors.push({ loc: [WHOLE_LIST, ...e.loc], msg: e.msg });
  return [undefined, errors];
}

// validation.image_problem: why `image` is not equal rows of grey levels 0..16.
function imageProblem(image, which) {
  if (!Array.isArray(image) || !image.length) {
    return `${which} must be a non-empty list of rows, each a list of grey levels`;
  }
  let width = null;
  for (let r = 0; r < image.length; r++) {
    const row = image[r];
    if (!Array.isArray(row) || !row.length) {
      return `row ${r} of ${which} is not a non-empty list of grey levels`;
    }
    if (width !== null && row.length !== width) {
      return `row ${r} of ${which} has ${row.length} pixels but row 0 has ${width}; ${RAGGED}`;
    }
    width = row.length;
    for (let c = 0; c < row.length; c++) {
      const level = row[c];
      if (typeof level !== "number" || !Number.isInteger(level) || level < 0 || level > MAX_LEVEL) {
        return (
          `${which} holds ${JSON.stringify(level)} at row ${r}, column ${c}; a grey level ` +
          `is a whole number from 0 to ${MAX_LEVEL}`
        );
      }
    }
  }
  return null;
}

function oneImage(v) {
  if (v === null) return [null, []];
  const problem = imageProblem(v, "the image");
  return problem ? fail(problem) : [v, []];
}

function images(v) {
  if (v === null) return [null, []];
  if (!Array.isArray(v)) return fail("Input should be a valid list");
  for (let i = 0; i < v.length; i++) {
    const problem = imageProblem(v[i], `image ${i} (from 0)`);
    if (problem) return fail(problem);
  }
  return [v, []];
}

// A strict model: `fields` [name, check, default] in order (default undefined: required),
// `after(value)` the model validator's sentence or null.
function model(fields, after = null) {
  return (v) => {
    if (!isObject(v)) return fail(NOT_OBJECT);
    const out = {};
    const errors = [];
    for (const [name, check, fallback] of fields) {
      if (!(name in v)) {
        if (fallback === undefined) errors.push({ loc: [name], msg: "Field required" });
        else out[name] = fallback;
        continue;
      }
      const [value, problems] = check(v[name]);
      out[name] = value;
      for (const e of problems) errors.push({ loc: [name, ...e.loc], msg: e.msg });
    }
    const known = new Set(fields.map(([name]) => name));
    for (const name of Object.keys(v)) {
      if (!known.has(name)) errors.push({ loc: [name], msg: "Extra inputs are not permitted" });
    }
    if (!errors.length && after) {
      const problem = after(out);
      if (problem) errors.push({ loc: [], msg: problem });
    }
    return [errors.length ? undefined : out, errors];
  };
}

function exactlyOne(first, second, sentence) {
  return (v) => ((v[first] === null) === (v[second] === null) ? sentence : null);
}

const DECODING = [
  ["model", nullable(str), null],
  ["beam", nullable(whole(1, MAX_BEAM)), null],
  ["alpha", number(0, 10), 0.6],
  ["n_best", whole(1, MAX_BEAM), 1],
  ["alignments", nullable(bool), null],
  ["weights", bool, false],
  ["search", bool, false],
  ["prefix", nullable(prefix), null],
  ["alternatives", nullable(whole(1, MAX_ALTERNATIVES)), null],
  ["min_alternative_prob", number(0, 1), 0.0],
];
const EXPLAIN = [
  ["explain", nullable(str), null],
  ["ig_steps", whole(1, MAX_IG_STEPS), IG_STEPS],
];
const PAIR = model([
  ["source", str],
  ["target", str],
]);

export const TRANSLATE = model(
  [...DECODING, ["text", nullable(str), null], ["lines", nullable(listOf(str)), null], ...EXPLAIN],
  exactlyOne(
    "text",
    "lines",
    "give exactly one of 'text' (a sentence) or 'lines' (a list of them)",
  ),
);
export const STREAM = model([...DECODING, ["text", str]]);
export const SCORE = model(
  [
    ["pair", nullable(PAIR), null],
    ["pairs", nullable(listOf(PAIR)), null],
    ["model", nullable(str), null],
    ["alignments", bool, false],
    ["weights", bool, false],
    ...EXPLAIN,
  ],
  exactlyOne("pair", "pairs", "give exactly one of 'pair' or 'pairs' (a list of them)"),
);
export const READ = model(
  [
    ["image", oneImage, null],
    ["images", images, null],
    ["model", nullable(str), null],
    ["beam", nullable(whole(1, MAX_BEAM)), null],
    ["weights", nullable(bool), null],
    ...EXPLAIN,
  ],
  exactlyOne("image", "images", "give exactly one of 'image' or 'images' (a list of them)"),
);

// The app's answer to errors (app.invalid_body): "field: message" joined by "; ", the
// fields dotted, "body" for the body itself.
export function invalid(errors, prefix = []) {
  const listed = errors.map((e) => ({
    field: [...prefix, ...e.loc].join(".") || "body",
    message: e.msg,
  }));
  return {
    detail: listed.map((e) => `${e.field}: ${e.message}`).join("; "),
    errors: listed,
  };
}

// [the body with its defaults, null] or [null, the 422's data]. A missing body is
// pydantic's "Field required" on the body.
export function validate(check, body) {
  if (body === undefined || body === null) {
    return [null, invalid([{ loc: [], msg: "Field required" }])];
  }
  const [value, errors] = check(body);
  return errors.length ? [null, invalid(errors)] : [value, null];
}

// A query's integer (FastAPI's lax int of a query string), bounded; [value, 422 data].
export function queryInt(name, text, fallback, ge, le) {
  if (text === null || text === undefined) return [fallback, null];
  if (!/^\s*[-+]?\d+\s*$/.test(text)) {
    const msg = "Input should be a valid integer, unable to parse string as an integer";
    return [null, invalid([{ loc: [name], msg }], ["query"])];
  }
  const [value, errors] = bounded(Number(text), ge, le);
  const named = errors.map((e) => ({ loc: [name], msg: e.msg }));
  return errors.length ? [null, invalid(named, ["query"])] : [value, null];
}
