"""What the request bodies of `attnmt serve` (schemas.py) are checked for beyond their
field types, and how the published schema says so where JSON Schema can.

JSON has one kind of number: 5.0 is the integer 5 to JSON Schema, and to a JavaScript
client that computed it, so a whole-number field takes it (`whole`); 5.5, "5" and true
stay refused. Both-or-neither of two inputs is published as a `oneOf` (`exactly_one`).
That an image's rows are equally long JSON Schema cannot say: `image_problem` checks it.
A line's text is cleaned (control characters, lone surrogates, its length) by `clean_line`.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any

from pydantic import ConfigDict

MAX_LEVEL = 16  # grey levels of an image are 0..MAX_LEVEL (attnmt.data.images.LEVEL_CHARS)
RAGGED = "every row must be as long"  # ends the sentence for an image JSON Schema allows


def whole(value: Any) -> Any:
    """A float with no fractional part (5.0) as the int it is; anything else unchanged,
    for the field's own (strict) check to take or refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def exactly_one(first: str, second: str) -> ConfigDict:
    """The config of a request that takes `first` or `second`: its published schema says
    what its `_one_input` checks (`oneOf`: one of them present, of its type beside null)."""

    def given(schema: dict[str, Any], name: str) -> dict[str, Any]:
        (kind,) = [k for k in schema["properties"][name]["anyOf"] if k != {"type": "null"}]
        return {"required": [name], "properties": {name: kind}}

    def extra(schema: dict[str, Any]) -> None:
        schema["oneOf"] = [given(schema, first), given(schema, second)]

    return ConfigDict(json_schema_extra=extra)


def image_problem(image: Any, which: str) -> str | None:
    """Why `image` (raw JSON) is not rows of equal length of grey levels 0..16, as one
    sentence about `which` ("the image", "image 2 (from 0)"); None if it is."""
    if not isinstance(image, list) or not image:
        return f"{which} must be a non-empty list of rows, each a list of grey levels"
    width = None
    for r, row in enumerate(image):
        if not isinstance(row, list) or not row:
            return f"row {r} of {which} is not a non-empty list of grey levels"
        if width is not None and len(row) != width:
            return f"row {r} of {which} has {len(row)} pixels but row 0 has {width}; {RAGGED}"
        width = len(row)
        for c, value in enumerate(row):
            level = whole(value)
            if type(level) is not int or not 0 <= level <= MAX_LEVEL:
                return (
                    f"{which} holds {json.dumps(value)} at row {r}, column {c}; a grey level "
                    f"is a whole number from 0 to {MAX_LEVEL}"
                )
    return None


def clean_line(line: str, max_chars: int) -> tuple[str, str | None]:
    """The line as the model reads it, and why it cannot be translated (None if it can).

    Control characters (NUL included) count as spaces, as line breaks do. A lone surrogate
    (invalid Unicode that JSON can still spell, "\\ud800") makes the line an error; the
    echoed line shows U+FFFD in its place so the answer stays valid UTF-8.
    """
    chars = [" " if unicodedata.category(c) == "Cc" else c for c in line]
    if any(unicodedata.category(c) == "Cs" for c in chars):
        shown = "".join("\ufffd" if unicodedata.category(c) == "Cs" else c for c in chars)
        bad = next(c for c in chars if unicodedata.category(c) == "Cs")
        return " ".join(shown.split()), (
            f"the line holds U+{ord(bad):04X}, a lone surrogate, which is not valid Unicode; "
            "send the text as UTF-8"
        )
    text = " ".join("".join(chars).split())
    if len(text) > max_chars:
        return text[:max_chars], (
            f"the line has {len(text):,} characters; this server translates at most "
            f"{max_chars:,} per line (--max-line-chars)"
        )
    return text, None


MAX_EXAMPLES = 32  # canvases per GET /api/examples


def size_problem(images: Sequence[Sequence[Sequence[int]]], height: int, width: int) -> str | None:
    """Why `images` (rows of levels, already checked to be rectangular) do not fit a run
    that reads height x width images; None if they all do."""
    for i, image in enumerate(images):
        shape = (len(image), len(image[0]))
        if shape != (height, width):
            which = "the image" if len(images) == 1 else f"image {i} (from 0)"
            return (
                f"{which} is {shape[0]}x{shape[1]} pixels (height x width); this model reads "
                f"{height}x{width} images"
            )
    return None
