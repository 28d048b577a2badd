"""A sentencepiece model as the JSON that `attnmt/web/sentencepiece.js` tokenises with in a
browser, the same pieces and ids as the Python `sentencepiece` package gives:

    data = tokenizer_json("reference/rnnsearch-en-fr/vocab/joint.model")
    Path("joint.json").write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")))

    // in the page
    import { SentencePiece } from "./sentencepiece.js";
    const sp = new SentencePiece(await (await fetch("joint.json")).json());
    sp.encode("In the beginning");   // {ids: [...], pieces: ["▁In", ...]}

What the JSON holds (format "attnmt-sentencepiece/1"):
- `model_type` "unigram" or "bpe", `pieces` and `scores` by id (scores are float32 in the
  model, written in their shortest form that reads back to the same float32), the ids of the
  `control` pieces (<pad>, <s>, </s>) and of `unk`, and `unk_surface` (what decode writes
  for <unk>);
- `normalizer`: its options and `charsmap`, the model's precompiled normalisation table
  (nmt_nfkc for ours) as base64, exactly the bytes sentencepiece itself reads: a Darts
  double-array trie of the UTF-8 sequences to rewrite, then their replacements. The
  JavaScript walks that trie as sentencepiece does (normalizer.cc), which is exact by
  construction where a table of mappings would be 4 MB (the trie holds 225,000 sequences,
  composed and decomposed forms) and `String.normalize("NFKC")` would only be close.
  It is 320 kB of the ~500 kB (220 kB gzipped) and the same in every nmt_nfkc model: the
  JavaScript also takes it as bytes (an ArrayBuffer), so a site may ship it once, beside.

The model file is read with a small protobuf reader below, so that this module needs
neither torch nor the `protobuf` package (sentencepiece's own `sentencepiece_model_pb2`
needs it). Features our training never uses (byte fallback, user-defined or unused pieces,
whitespace as suffix, a denormaliser) are refused in one sentence rather than tokenised
differently from Python.
"""

from __future__ import annotations

import base64
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.errors import DataError

FORMAT = "attnmt-sentencepiece/1"

# ModelProto.SentencePiece.Type (sentencepiece_model.proto)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


def _fields(buf: bytes) -> list[tuple[int, Any]]:
    """The (field number, value) pairs of one protobuf message: varints as int, 32-bit
    values as their 4 bytes, length-delimited ones as bytes (a string, bytes or a nested
    message: the caller knows which)."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire} at byte {pos}")
        out.append((number, value))
    if pos != len(buf):
        raise ValueError("protobuf message ends inside a field")
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _float32_json(score: float) -> float | int:
    """The shortest decimal that reads back (as a double, then float32) to `score`; a
    whole number as an int, but -0.0 kept (BPE's first merge has it; its sign orders the
    merges in sentencepiece 0.2.3)."""
    short = float(str(np.float32(score)))
    if np.float32(short) != np.float32(score):  # never seen; the exact double instead
        short = float(np.float32(score))
    negative_zero = short == 0 and math.copysign(1.0, short) < 0
    whole = short == int(short) and not negative_zero
    return int(short) if whole else short


def _read_model(proto: bytes) -> dict[str, Any]:
    """The parts of a ModelProto the tokeniser needs, with the proto's defaults."""
    pieces, scores, types = [], [], []
    trainer: dict[int, Any] = {}
    normalizer: dict[int, Any] = {}
    denormalizer: dict[int, Any] = {}
    for number, value in _fields(proto):
        if number == 1:  # repeated SentencePiece {piece = 1, score = 2, type = 3}
            piece = dict(_fields(value))
            pieces.append(piece.get(1, b"").decode("utf-8"))
            scores.append(struct.unpack("<f", piece[2])[0] if 2 in piece else 0.0)
            types.append(piece.get(3, NORMAL))
        elif number == 2:
            trainer = dict(_fields(value))
        elif number == 3:
            normalizer = dict(_fields(value))
        elif number == 5:
            denormalizer = dict(_fields(value))
    return {
        "pieces": pieces,
        "scores": scores,
        "types": types,
        "model_type": trainer.get(3, 1),
        "byte_fallback": bool(trainer.get(35, 0)),
        "treat_whitespace_as_suffix": bool(trainer.get(24, 0)),
        "unk_surface": trainer.get(44, " \u2047 ".encode()).decode("utf-8"),
        "normalizer": {
            "name": normalizer.get(1, b"").decode("utf-8"),
            "charsmap": normalizer.get(2, b""),
            "add_dummy_prefix": bool(normalizer.get(3, 1)),
            "remove_extra_whitespaces": bool(normalizer.get(4, 1)),
            "escape_whitespaces": bool(normalizer.get(5, 1)),
        },
        "denormalizer_rules": bool(denormalizer.get(2) or denormalizer.get(6)),
    }


def tokenizer_json(model: str | Path | bytes) -> dict[str, Any]:
    """What the JavaScript tokeniser needs of a sentencepiece model (a .model file's path
    or its bytes), as a JSON-ready dict; see the module docstring.

    Raises:
        DataError: the file is not a sentencepiece model, or uses a feature the JavaScript
            does not reproduce (no model of ours does).
    """
    name = "the model" if isinstance(model, bytes) else f"'{model}'"
    try:
        proto = model if isinstance(model, bytes) else Path(model).read_bytes()
        read = _read_model(proto)
    except (OSError, ValueError, IndexError, KeyError, struct.error) as err:
        raise DataError(
            f"cannot read {name} as a sentencepiece model ({type(err).__name__}: {err})"
        ) from None
    types = read["types"]
    unsupported = [
        what
        for what, present in [
            (f"a {MODEL_TYPES.get(read['model_type'], '?')} model", read["model_type"] > 2),
            ("byte fallback", read["byte_fallback"] or BYTE in types),
            ("user-defined pieces", USER_DEFINED in types),
            ("unused pieces", UNUSED in types),
            ("whitespace as a suffix", read["treat_whitespace_as_suffix"]),
            ("denormalisation rules", read["denormalizer_rules"]),
        ]
        if present
    ]
    if unsupported or types.count(UNKNOWN) != 1:
        what = ", ".join(unsupported) or "not exactly one <unk> piece"
        raise DataError(
            f"the browser tokeniser cannot run {name}: it has {what}, which attnmt's "
            "training never makes (unigram or bpe, no byte fallback); retrain its vocabulary"
        )
    norm = read["normalizer"]
    return {
        "format": FORMAT,
        "model_type": MODEL_TYPES[read["model_type"]],
        "pieces": read["pieces"],
        "scores": [_float32_json(s) for s in read["scores"]],
        "control": [i for i, t in enumerate(types) if t == CONTROL],
        "unk": types.index(UNKNOWN),
        "unk_surface": read["unk_surface"],
        "normalizer": {
            "name": norm["name"],
            "add_dummy_prefix": norm["add_dummy_prefix"],
            "remove_extra_whitespaces": norm["remove_extra_whitespaces"],
            "escape_whitespaces": norm["escape_whitespaces"],
            # "" for the identity normaliser (no table): every character kept as it is
            "charsmap": base64.b64encode(norm["charsmap"]).decode("ascii"),
        },
    }
