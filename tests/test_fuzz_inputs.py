"""Whatever a user gives, the outcome is a config, a prepared corpus or one sentence.

Hypothesis writes YAML configs (wrong types, unknown keys, nested garbage, invalid YAML,
any bytes, huge numbers, NaN, odd Unicode), `--set` overrides, and parallel corpora (plain,
.gz, TSV, standard input; any bytes, invalid UTF-8, mixed line ends, BOMs, NULs, long lines,
unequal line counts, broken gzip). The properties (issue 39):

- `load_config` returns a `Config` or raises a `UserError` whose message is one line that
  names the file or the key; nothing else escapes, and the CLI prints it and exits 2;
- the readers agree with a reference reading of the documented rules (UTF-8, a leading
  BOM dropped, lines split on `\\n` only, whitespace collapsed), and a bad file is a
  `DataError` naming the file and the line;
- `prepare` gives exactly the pairs the rules keep, or one sentence; after a failure no
  half-written cache is left and every file already there (inputs, earlier caches) is
  intact.

Example-based regression tests for what the fuzzers found follow them. The number of
examples scales with ATTNMT_FUZZ_SCALE (default 1); see how many ran with

    ATTNMT_FUZZ_SCALE=20 pytest -p no:cacheprovider --hypothesis-show-statistics \\
        tests/test_fuzz_inputs.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import io
import math
import os
import re
import shutil
import sys
import tempfile
import typing
import zlib
from pathlib import Path
from typing import Literal, get_args, get_origin
from unittest import mock

import pytest
import torch
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attnmt import attention
from attnmt.cli import main
from attnmt.config import CORPORA, MODELS, Config, DataConfig, ModelConfig, TrainConfig, load_config
from attnmt.data import prepare, streaming
from attnmt.data.cache import load_folder
from attnmt.data.files import read_lines, read_parallel, read_tsv
from attnmt.devices import DEVICES
from attnmt.errors import ConfigError, DataError, UserError

SCALE = int(os.environ.get("ATTNMT_FUZZ_SCALE", "1"))
MAX_MESSAGE = 1500  # characters: a sentence, not a dump of the input


@pytest.fixture(autouse=True, scope="module")
def subnormals_kept():
    """Hypothesis cannot draw floats where subnormals flush to zero, which loading a model
    earlier in the same pytest process turned on for this thread
    (`attnmt.devices.flush_denormals`); off for this module, then as it was."""
    flushing = float("5e-324") * 1.0 == 0.0
    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(flushing)


def fuzz(examples: int) -> settings:
    """Seeded (the same examples every run), no example database, no deadline."""
    return settings(
        max_examples=examples * SCALE,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


def assert_one_sentence(message: str, named: typing.Callable[[str], bool]) -> None:
    """One line (no line break of any kind), not empty, bounded, and naming what `named`
    looks for (the file, the line, the key)."""
    assert message and message == message.strip(), repr(message)
    assert message.splitlines() == [message], repr(message[:300])
    assert len(message) <= MAX_MESSAGE, f"{len(message)} characters: {message[:300]!r}"
    assert named(message), repr(message[:300])


# --------------------------------------------------------------------------------------
# Configs: YAML files and --set overrides
# --------------------------------------------------------------------------------------

SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}
FIELDS = {name: typing.get_type_hints(cls) for name, cls in SECTIONS.items()}
DOTTED = [f"{section}.{key}" for section, hints in FIELDS.items() for key in hints]
ODD = [
    "",
    " ",
    "\t",
    "\x00",
    "\ufeff",
    "\u2028",
    "\x85",
    "\r\n",
    "\u200b",
    "é",
    "🙂",
    "\u202eevil",
    "ß" * 3,
    "a\nb",
    "x" * 300,
]
# Names that reach the checks behind the type checks (a valid model, corpus, device...).
NAMES = {
    "corpus": list(CORPORA),
    "name": list(MODELS),
    "attention": attention.names()["score"],
    "scope": attention.names()["scope"],
    "mode": attention.names()["mode"],
    "device": [*DEVICES, "gpu"],
    "src": ["en-web", "fr-segond", "en", "fr"],
    "tgt": ["fr-segond", "en-web", "fr", "en"],
    "dev_books": ["Romans", "John", "40", "Matthew"],
    "test_books": ["John", "Mark", "66", "Revelation"],
}
HUGE_INTS = [0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, -(10**30), 10**400]
ODD_FLOATS = [math.nan, math.inf, -math.inf, 1e308, 5e-324, -0.0, 0.999999, 1.0]

text = st.text(max_size=12) | st.sampled_from(ODD)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 100),
    st.sampled_from(HUGE_INTS),
    st.floats(),
    st.sampled_from(ODD_FLOATS),
    text,
    st.binary(max_size=6),
    st.dates(),
)
keys = st.one_of(text, st.integers(-3, 3), st.booleans(), st.none(), st.floats(0, 1))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)


def typed(name: str, tp: typing.Any) -> st.SearchStrategy:
    """Values of the key's own type (so that the checks behind the type checks run), of a
    nearby wrong type, or anything."""
    origin = get_origin(tp)
    if origin is Literal:
        right = st.sampled_from(get_args(tp))
    elif tp is bool:
        right = st.booleans()
    elif tp is int:
        right = st.integers(-2, 70) | st.sampled_from(HUGE_INTS)
    elif tp is float:
        right = st.floats(-1, 10) | st.sampled_from(ODD_FLOATS)
    elif origin is list:
        right = st.lists(st.sampled_from(NAMES.get(name, ["x"])) | text | st.integers(0, 70))
    else:
        right = st.sampled_from(NAMES.get(name, ["x"])) | text
    return st.one_of(right, right, right, scalars, values)


@st.composite
def section(draw, name: str) -> dict:
    hints = FIELDS[name]
    chosen = draw(st.lists(st.sampled_from(list(hints)), max_size=5, unique=True))
    tree = {key: draw(typed(key, hints[key])) for key in chosen}
    if draw(st.integers(0, 5)) == 0:
        tree[draw(keys)] = draw(values)  # an unknown key
    return tree


@st.composite
def config_tree(draw) -> typing.Any:
    """A mapping of sections (mostly right) or any YAML value at the top."""
    if draw(st.integers(0, 6)) == 0:
        return draw(values)
    chosen = draw(st.lists(st.sampled_from(list(SECTIONS)), max_size=3, unique=True))
    tree: dict = {
        name: draw(section(name) | values if draw(st.booleans()) else section(name))
        for name in chosen
    }
    if draw(st.integers(0, 5)) == 0:
        tree[draw(keys)] = draw(values)
    return tree


def dump(tree: typing.Any, flow: bool, unicode: bool) -> str:
    return yaml.safe_dump(
        tree, default_flow_style=flow, allow_unicode=unicode, sort_keys=False, width=80
    )


UNHELD = [
    "data: {src: 2001-02-30}",
    "train:\n  seed: " + "1" * 5000 + "\n",
    "model: {dropout: !!float x}",
    "data: {vocab_size: !!int y}",
]


def nested(depth: int) -> str:
    return "data: {src: " + "[" * depth + "]" * depth + "}\n"


def aliases(levels: int) -> str:
    """The "billion laughs": each level ten aliases of the one before (10**levels leaves)."""
    rows = ["&l0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return "data: {src: [" + ", ".join(rows) + "]}\n"


@st.composite
def yaml_files(draw) -> bytes:
    """The bytes of a config file: dumped trees, mangled, re-encoded, or anything."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=60))
    if kind == 1:
        return draw(st.text(max_size=60)).encode("utf-8", "surrogatepass")
    if kind == 2:
        if draw(st.booleans()):
            return aliases(draw(st.integers(1, 12))).encode()
        if draw(st.booleans()):  # values YAML parses but Python cannot hold
            return draw(st.sampled_from(UNHELD)).encode()
        return nested(draw(st.integers(1, 10)) ** 3).encode()
    body = dump(draw(config_tree()), draw(st.booleans()), draw(st.booleans()))
    if kind == 3:  # cut or spliced: mostly invalid YAML
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(
            st.sampled_from(
                [
                    "",
                    "[",
                    "{",
                    ":",
                    "\t",
                    "'",
                    '"',
                    "&",
                    "*x",
                    "!!python/object:os.system {}",
                    "- ",
                    "%",
                ]
            )
        )
        body += body[at + draw(st.integers(0, 5)) :]
    if kind == 4:  # byte-order marks, at the start and inside
        at = draw(st.integers(0, len(body)))
        body = "\ufeff" + body[:at] + "\ufeff" + body[at:]
    if kind == 5:  # line ends
        body = body.replace("\n", draw(st.sampled_from(["\r\n", "\r", "\u2028", "\x85"])))
    encoding = "utf-8"
    if kind == 6:
        encoding = draw(st.sampled_from(["utf-16", "utf-32", "latin-1", "cp1252"]))
    return body.encode(encoding, "replace")


def config_named(path: Path | None) -> typing.Callable[[str], bool]:
    """A config message names the file or a key (a section, an override, a dotted key)."""
    keyish = re.compile(r"\b(data|model|train)\b|\bkey\b|override")
    return lambda message: (
        (path is not None and str(path) in message) or bool(keyish.search(message))
    )


def check_config(path: Path | None, overrides: list[str], torch: bool) -> Config | None:
    """The property, through the full checks or those of `attnmt data` (`torch=False`)."""
    try:
        cfg = load_config(path, overrides, torch=torch)
    except UserError as err:
        assert_one_sentence(str(err), config_named(path))
        return None
    assert isinstance(cfg, Config)
    return cfg


@fuzz(150)
@given(blob=yaml_files(), torch=st.booleans())
def test_fuzz_config_files(blob, torch):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.yaml"
        path.write_bytes(blob)
        check_config(path, [], torch)
        assert path.read_bytes() == blob  # the user's file is never touched


def render(value: typing.Any) -> str:
    """A value as YAML flow text, as a user types it after `KEY=`."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n...\n").strip()
    )


dotted = st.one_of(
    st.sampled_from(DOTTED),
    st.sampled_from(DOTTED),
    st.lists(
        st.sampled_from([*SECTIONS, "", "x", *FIELDS["data"]]) | text, min_size=1, max_size=7
    ).map(".".join),
)
raw_values = st.one_of(
    values.map(render),
    text,
    st.sampled_from(
        [
            "[",
            "{a: 1",
            "[" * 700,
            "&a [*a]",
            "!!python/object:os.system {}",
            ".nan",
            "-.inf",
            "1e999",
            "0x1F",
            "~",
            "yes",
            "'",
            '"\\x00"',
            "a=b",
        ]
    ),
)
overrides = st.one_of(st.builds("{}={}".format, dotted, raw_values), text)


@fuzz(150)
@given(given_overrides=st.lists(overrides, max_size=4), torch=st.booleans())
def test_fuzz_config_overrides(given_overrides, torch):
    check_config(None, given_overrides, torch)


@fuzz(40)
@given(blob=yaml_files(), given_overrides=st.lists(overrides, max_size=2))
def test_fuzz_config_through_the_cli(blob, given_overrides):
    """`attnmt train CONFIG --set ...` on a config that does not load: status 2 and the
    loader's sentence on stderr, nothing on stdout."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.yaml"
        path.write_bytes(blob)
        try:
            load_config(path, given_overrides)
        except UserError as err:
            expected = str(err)
        else:
            assume(False)  # a config that loads would train: not here
        argv = ["train", str(path)]
        for override in given_overrides:
            argv += ["--set", override]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        assert code == 2
        assert err.getvalue() == f"attnmt train: error: {expected}\n"
        assert out.getvalue() == ""


# --------------------------------------------------------------------------------------
# Corpora: the reference reading
# --------------------------------------------------------------------------------------

BOM = "\ufeff".encode()


@dataclasses.dataclass
class Reading:
    """What the documented rules make of a file's bytes: its lines (None where it is not
    UTF-8, then `bad_line` is the first line that is not, or a broken .gz), its lines as
    bytes. Of a broken .gz (`broken`), what comes out before the damage: a reader may meet
    a problem there first."""

    lines: list[str] | None
    raw: list[bytes]
    bad_line: int | None = None
    broken: bool = False


def inflated(blob: bytes) -> tuple[bytes, bool]:
    """A .gz's content, and whether it is whole; of a damaged one, what a stream yields
    before the damage (fed a byte at a time: as far as it goes)."""
    try:
        return gzip.decompress(blob), True
    except Exception:  # any failure of the reference's decompression
        pass
    stream, out = zlib.decompressobj(wbits=31), []
    try:
        for i in range(len(blob)):
            out.append(stream.decompress(blob[i : i + 1]))
            if stream.eof:
                break
    except zlib.error:
        pass
    return b"".join(out), False


def reference(blob: bytes, gz: bool = False) -> Reading:
    whole = True
    if gz:
        blob, whole = inflated(blob)
    if not whole:
        reading = reference(blob)
        return Reading(None, reading.raw, reading.bad_line, broken=True)
    data = blob.removeprefix(BOM)
    raw = data.split(b"\n") if data else []
    if raw and raw[-1] == b"":
        raw.pop()
    try:
        blob.decode("utf-8")
    except UnicodeDecodeError as err:
        return Reading(None, raw, bad_line=blob.count(b"\n", 0, err.start) + 1)
    return Reading([line.decode().removesuffix("\r") for line in raw], raw)


def clean(line: str) -> str:
    return " ".join(line.split())


# Pieces of lines: words, whitespace of every kind, BOMs, NULs, control characters.
WORDS = st.sampled_from(["the", "cat", "le", "chat", "naïve", "λόγος", "мир", "🙂", "日本"])
ODD_CHARACTERS = [
    *("\t", "\r", " ", "\ufeff", "\x00", "\u2028", "\x85", "\x0c", "\x1c", "\u200b"),
    *("\u00a0", "\x7f", "\ud7ff", "\U0010ffff"),
]
# Pieces of a line (never a "\n"): mostly words, then whitespace of every kind, BOMs, NULs,
# control characters, anything.
PIECES = st.one_of(
    WORDS,
    WORDS,
    st.sampled_from(ODD_CHARACTERS),
    st.text(st.characters(exclude_characters="\n", exclude_categories=["Cs"]), max_size=4),
)
line_text = st.lists(PIECES, max_size=6).map("".join)
ENDINGS = ["\n", "\n", "\n", "\r\n", "\r"]


@st.composite
def file_bytes(draw, lines: list[str], sound: bool = False) -> bytes:
    """`lines` written with mixed line ends, maybe a BOM, maybe no final newline, maybe a
    very long line; unless `sound`, maybe "\\r" line ends (old Macs) and broken bytes."""
    lines = list(lines)
    if lines and draw(st.integers(0, 8)) == 0:  # a very long line (sentencepiece: 4192)
        lines[draw(st.integers(0, len(lines) - 1))] = "word " * draw(st.integers(900, 2000))
    ends = [draw(st.sampled_from(ENDINGS[:-1] if sound else ENDINGS)) for _ in lines]
    if ends and draw(st.booleans()) and (lines[-1] or not sound):  # "" would lose a line
        ends[-1] = ""
    data = "".join(line + end for line, end in zip(lines, ends, strict=True)).encode()
    if draw(st.integers(0, 3)) == 0:
        data = BOM + data
    mutation = 9 if sound else draw(st.integers(0, 9))
    if mutation == 0:  # a byte that is not UTF-8 somewhere
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
        data += data[at:]
    elif mutation == 1:
        data = draw(st.binary(max_size=40))
    return data


def gzipped(blob: bytes, damage: int) -> bytes:
    """`blob` compressed, then damaged: 0 none, 1 truncated, 2 flipped bytes, 3 a CRC that
    does not match, 4 trailing garbage."""
    packed = gzip.compress(blob, mtime=0)
    if damage == 1:
        return packed[: len(packed) // 2]
    if damage == 2:
        return packed[:12] + bytes(b ^ 0x5A for b in packed[12:20]) + packed[20:]
    if damage == 3:
        return packed[:-8] + b"\0\0\0\0" + packed[-4:]
    if damage == 4:
        return packed + b"garbage"
    return packed


@st.composite
def parallel(draw, sound: bool = False) -> tuple[bytes, bytes]:
    """Two files of (unless `sound`, mostly) the same number of lines."""
    rows = draw(st.lists(st.tuples(line_text, line_text), min_size=2 * sound, max_size=10))
    src = [s for s, _ in rows]
    tgt = [t for _, t in rows]
    change = 9 if sound else draw(st.integers(0, 9))
    if change == 0:
        tgt = [*tgt, draw(line_text)]
    elif change == 1 and tgt:
        tgt = tgt[:-1]
    return draw(file_bytes(src, sound)), draw(file_bytes(tgt, sound))


@st.composite
def tsv(draw, sound: bool = False) -> bytes:
    """Rows of 2 or 3 columns, and unless `sound`, of 0 or 1."""
    widths = st.sampled_from([2, 2, 3] if sound else [2, 2, 2, 2, 3, 1, 0])
    rows = draw(
        st.lists(
            st.tuples(widths, st.lists(line_text, min_size=3, max_size=3)),
            min_size=2 * sound,
            max_size=10,
        )
    )
    return draw(file_bytes(["\t".join(cells[:width]) for width, cells in rows], sound))


Problem = typing.Callable[[str], bool]  # does the message name this problem?


def reading_error(message: str, name: str, reading: Reading) -> bool:
    """`message` names the file and what is wrong with it: a broken .gz, or the line
    that is not UTF-8 (in a broken .gz: before the damage)."""
    if reading.broken and message.startswith(name) and "gzip" in message:
        return True
    bad = reading.bad_line is not None
    return bad and f"{name}: line {reading.bad_line} is not valid UTF-8" in message


def parallel_problems(names: list[str], readings: list[Reading]) -> list[Problem]:
    """What may be said of two parallel files: either file's reading error, and unequal
    line counts (whichever a reader meets first)."""
    problems: list[Problem] = [
        lambda m, n=n, r=r: reading_error(m, n, r)
        for n, r in zip(names, readings, strict=True)
        if r.lines is None
    ]
    raws = [r.raw for r in readings]
    if not any(r.broken for r in readings) and len(raws[0]) != len(raws[1]):
        problems.append(lambda m: all(n in m for n in names))
    return problems


def tsv_problems(name: str, reading: Reading, *, dev: bool) -> list[Problem]:
    """What may be said of a TSV: its reading error, its first line without a tab (and
    for dev/test, without text)."""
    problems: list[Problem] = []
    if reading.lines is None:
        problems.append(lambda m: reading_error(m, name, reading))
    bad = [n for n, line in enumerate(reading.raw, 1) if b"\t" not in line]
    if dev and reading.lines is not None:
        bad += [n for n, line in enumerate(reading.lines, 1) if not line.strip()]
    if bad:
        first = min(bad)
        problems.append(lambda m: f"{name}: line {first} " in m)
    return problems


def tsv_rows(lines: list[str]) -> list[tuple[str, str]]:
    return [(clean(line.split("\t")[0]), clean(line.split("\t")[1])) for line in lines]


def assert_named(message: str, problems: list[Problem]) -> None:
    """The error is one sentence naming one of the problems there are, and there are."""
    assert problems, f"no problem, but: {message!r}"
    assert_one_sentence(message, lambda m: any(problem(m) for problem in problems))


# --------------------------------------------------------------------------------------
# Corpora: the readers against the reference (fast: no subword model)
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def stdin_of(blob: bytes):
    fake = mock.Mock(spec=["buffer"])
    fake.buffer = io.BytesIO(blob)
    with mock.patch.object(sys, "stdin", fake):
        yield


@fuzz(150)
@given(pair=parallel(), gz=st.sampled_from([None, 0, 0, 1, 2, 3, 4]), chunk=st.integers(1, 4))
def test_fuzz_read_parallel_and_scan_agree_with_the_reference(pair, gz, chunk):
    """`files.read_parallel` (dev/test) and `streaming.scan` (train, in chunks of `chunk`
    lines) read the same pairs as the reference, or fail naming file and line."""
    with tempfile.TemporaryDirectory() as folder:
        names = [
            str(Path(folder) / ("train.en" if gz is None else "train.en.gz")),
            str(Path(folder) / "train.fr"),
        ]
        blobs = [pair[0] if gz is None else gzipped(pair[0], gz), pair[1]]
        for name, blob in zip(names, blobs, strict=True):
            Path(name).write_bytes(blob)
        readings = [reference(blobs[0], gz is not None), reference(blobs[1])]
        problems = parallel_problems(names, readings)
        for read in ("files", "stream"):
            try:
                if read == "files":
                    got = read_parallel(*names)
                else:
                    with mock.patch.object(streaming, "CHUNK", chunk):
                        source = streaming.Source(tuple(names), False)
                        scanned = streaming.scan(source, sample_pairs=1000, seed=1)
                    assert scanned.lines == len(scanned.sample)
                    got = [(clean(s), clean(t)) for s, t in scanned.sample]
            except DataError as err:
                assert_named(str(err), problems)
            else:
                assert not problems, read
                expected = zip(readings[0].lines, readings[1].lines, strict=True)
                assert got == [(clean(s), clean(t)) for s, t in expected], read


@fuzz(150)
@given(blob=tsv(), where=st.sampled_from(["file", "gz", "stdin"]), chunk=st.integers(1, 4))
def test_fuzz_read_tsv_and_scan_agree_with_the_reference(blob, where, chunk):
    """A TSV for dev/test (`read_tsv`: no empty line, a tab in every line) and for training
    (`scan`: a tab in every line), from a file, a .gz or standard input."""
    with tempfile.TemporaryDirectory() as folder:
        name = {"file": "corpus.tsv", "gz": "corpus.tsv.gz", "stdin": "-"}[where]
        path = name if where == "stdin" else str(Path(folder) / name)
        data = gzipped(blob, 0) if where == "gz" else blob
        if where != "stdin":
            Path(path).write_bytes(data)
        shown = "<stdin>" if where == "stdin" else path
        reading = reference(blob)
        for read in ("dev", "train"):
            problems = tsv_problems(shown, reading, dev=read == "dev")
            with stdin_of(data):
                try:
                    if read == "dev":
                        got = [(s, t) for s, t, _ in read_tsv(path)]
                    else:
                        with mock.patch.object(streaming, "CHUNK", chunk):
                            source = streaming.Source((path,), True)
                            scanned = streaming.scan(source, sample_pairs=1000, seed=1)
                        got = [(clean(s), clean(t)) for s, t in scanned.sample]
                except DataError as err:
                    assert_named(str(err), problems)
                else:
                    assert not problems, read
                    assert got == tsv_rows(reading.lines), read


@fuzz(60)
@given(blob=st.lists(line_text, max_size=6).flatmap(file_bytes), damage=st.integers(0, 4))
def test_fuzz_read_lines_of_gzip(blob, damage):
    """A .gz of any content, whole or damaged: the lines, or one sentence naming it."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dev.en.gz"
        path.write_bytes(gzipped(blob, damage))
        reading = reference(path.read_bytes(), gz=True)
        try:
            got = read_lines(path)
        except DataError as err:
            assert reading.lines is None
            assert_one_sentence(str(err), lambda m: reading_error(m, str(path), reading))
        else:
            assert got == reading.lines


# --------------------------------------------------------------------------------------
# Corpora: `prepare` end to end (sentencepiece trains on each: fewer examples)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def earlier(tmp_path_factory) -> Path:
    """A cache folder holding one complete prepared corpus, copied beside each preparation
    (it must come out of every failure intact)."""
    root = tmp_path_factory.mktemp("earlier")
    corpus = root / "earlier.tsv"
    corpus.write_text("".join(f"a{i} b\tc{i} d\n" for i in range(6)), encoding="utf-8")
    cfg = load_config(
        None,
        [
            f"data.cache_dir={root / 'cache'}",
            "data.corpus=tsv",
            "data.vocab_size=20",
            f"data.train_path={corpus}",
        ],
    )
    with contextlib.redirect_stderr(io.StringIO()):
        prepare(cfg.data)
    return root / "cache"


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@st.composite
def corpora(draw) -> dict:
    """A user's corpus: files (plain or .gz, maybe damaged) or a TSV (file, .gz or standard
    input), maybe a dev split, and filters."""
    kind = draw(st.sampled_from(["files", "files", "tsv", "tsv"]))
    where = draw(
        st.sampled_from(
            ["plain", "plain", "gz", "stdin"] if kind == "tsv" else ["plain", "plain", "gz"]
        )
    )
    sound = draw(st.integers(0, 2)) > 0  # two in three: files a reader takes
    damage = draw(st.sampled_from([0, 0, 1, 2, 3, 4])) if where == "gz" and not sound else 0
    train = draw(parallel(sound)) if kind == "files" else (draw(tsv(sound)),)
    dev = None
    if draw(st.integers(0, 3)) == 0:  # a dev split: new, or the training split (all leaks)
        dev = draw(parallel(sound)) if kind == "files" else (draw(tsv(sound)),)
        dev = train if draw(st.booleans()) else dev
    options = [
        f"data.max_words={draw(st.sampled_from([0, 0, 50, 3]))}",
        f"data.max_ratio={draw(st.sampled_from([0, 0, 0, 1.5]))}",
        f"data.vocab_size={draw(st.sampled_from([40, 150]))}",
        f"data.joint_vocab={draw(st.booleans())}",
        f"data.subword_type={draw(st.sampled_from(['unigram', 'bpe']))}",
        f"data.drop_held_out={draw(st.booleans())}",
    ]
    return {
        "kind": kind,
        "where": where,
        "damage": damage,
        "train": train,
        "dev": dev,
        "options": options,
        "sound": sound,
    }


def write_corpus(folder: Path, corpus: dict) -> tuple[list[str], list[str], list[str]]:
    """The files of `corpus` in `folder`: (overrides, the train names as messages show
    them, the dev names)."""
    kind, where = corpus["kind"], corpus["where"]
    suffix = ".gz" if where == "gz" else ""
    if kind == "files":
        train = [str(folder / f"train.en{suffix}"), str(folder / "train.fr")]
        dev = [str(folder / "dev.en"), str(folder / "dev.fr")]
        options = ["data.src=en", "data.tgt=fr", f"data.train_path={folder / 'train'}"]
        if corpus["dev"]:
            options.append(f"data.dev_path={folder / 'dev'}")
    else:
        train = ["-"] if where == "stdin" else [str(folder / f"train.tsv{suffix}")]
        dev = [str(folder / "dev.tsv")]
        options = [f"data.train_path={train[0]}"]
        if corpus["dev"]:
            options.append(f"data.dev_path={dev[0]}")
    for name, blob in zip(train, corpus["train"], strict=True):
        if name != "-":
            Path(name).write_bytes(
                gzipped(blob, corpus["damage"]) if name.endswith(".gz") else blob
            )
    for name, blob in zip(dev, corpus["dev"] or (), strict=False):
        Path(name).write_bytes(blob)
    shown = ["<stdin>" if name == "-" else name for name in train]
    return [f"data.corpus={kind}", *options], shown, dev


def expected_outcome(corpus: dict, train_names: list[str], dev_names: list[str], cfg):
    """(the training pairs `prepare` must keep, with their line numbers, or None; and the
    problems one of which its error must name where it fails)."""
    problems: list[Problem] = []
    dev_pairs: list[tuple[str, str]] = []
    if corpus["dev"]:  # read whole, before the training split
        readings = [reference(blob) for blob in corpus["dev"]]
        if corpus["kind"] == "files":
            problems += parallel_problems(dev_names, readings)
            if not problems:
                dev_pairs = [
                    (clean(s), clean(t))
                    for s, t in zip(readings[0].lines, readings[1].lines, strict=True)
                ]
        else:
            problems += tsv_problems(dev_names[0], readings[0], dev=True)
            if not problems:
                dev_pairs = tsv_rows(readings[0].lines)
    gz = corpus["where"] == "gz"
    blobs = corpus["train"]
    readings = [reference(gzipped(blobs[0], corpus["damage"]) if gz else blobs[0], gz)]
    readings += [reference(blob) for blob in blobs[1:]]
    if corpus["kind"] == "files":
        problems += parallel_problems(train_names, readings)
    else:
        problems += tsv_problems(train_names[0], readings[0], dev=False)
    if problems:
        return None, problems
    if corpus["kind"] == "files":
        rows = [
            (clean(s), clean(t)) for s, t in zip(readings[0].lines, readings[1].lines, strict=True)
        ]
    else:
        rows = tsv_rows(readings[0].lines)
    held = {(s, t) for s, t in dev_pairs if s and t} if cfg.drop_held_out else set()
    kept = []
    for number, (s, t) in enumerate(rows, start=1):
        if not s or not t:
            continue
        longer, shorter = sorted((len(s.split()), len(t.split())), reverse=True)
        if cfg.max_words and longer > cfg.max_words:
            continue
        if cfg.max_ratio and longer > cfg.max_ratio * shorter:
            continue
        if (s, t) not in held:
            kept.append((s, t, number))
    if not kept:  # "no pair with text" or "every training pair ... was filtered out"
        return None, [lambda m: all(n in m for n in train_names) and "training" in m]
    return kept, []


@fuzz(80)
@given(corpus=corpora())
def test_fuzz_prepare_gives_the_pairs_or_one_sentence(corpus, earlier, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    with tempfile.TemporaryDirectory(dir=base) as folder:
        folder = Path(folder)
        overrides, train_names, dev_names = write_corpus(folder, corpus)
        inputs = digests(folder)
        cache = folder / "cache"
        shutil.copytree(earlier, cache)
        before = digests(cache)
        cfg = load_config(None, [f"data.cache_dir={cache}", *overrides, *corpus["options"]])
        kept, problems = expected_outcome(corpus, train_names, dev_names, cfg.data)
        stdin = corpus["train"][0] if corpus["where"] == "stdin" else b""
        try:
            with stdin_of(stdin), contextlib.redirect_stderr(io.StringIO()):
                data = prepare(cfg.data)
        except DataError as err:
            message = str(err)
            # sentencepiece may find no text it can learn from (lines past its length
            # limit, only characters it normalises away): then the message says so.
            learnable = kept is not None and "sentencepiece" in message
            learnable = learnable and all(n in message for n in train_names)
            assert_named(message, [*problems, lambda m: learnable])
            data = None
        else:
            assert kept is not None, "prepared, but the reference finds a problem"
            assert [(ex.src, ex.tgt) for ex in data.train] == [(s, t) for s, t, _ in kept]
            name = Path(train_names[0]).name
            assert [ex.id for ex in data.train] == [f"{name}:{n}" for _, _, n in kept]
            assert all(
                len(ex.src_ids) == len(data.train.pair(i)[0]) for i, ex in enumerate(data.train)
            )
        # Nothing lost, nothing half-written: the inputs and the earlier cache are as they
        # were, and every folder in the cache is a complete, loadable preparation.
        assert digests(folder) == {
            **inputs,
            **{k: v for k, v in digests(folder).items() if k.startswith("cache/")},
        }
        after = digests(cache)
        assert {k: after.get(k) for k in before} == before
        for entry in cache.iterdir():
            assert not entry.name.startswith("."), entry.name  # no temporary folder left
            if entry.name != "subwords":
                load_folder(entry)
        assert all(not p.name.startswith(".") for p in (cache / "subwords").iterdir())
        folders = {e.name for e in cache.iterdir()} - {"subwords"}
        assert len(folders) == (1 if data is None else 2)


# --------------------------------------------------------------------------------------
# What the fuzzers found, one example each
# --------------------------------------------------------------------------------------


def config_error(tmp_path, text: str | None, overrides=()) -> str:
    path = None
    if text is not None:
        path = tmp_path / "config.yaml"
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path, list(overrides))
    message = str(err.value)
    assert_one_sentence(message, config_named(path))
    return message


def test_yaml_nested_past_the_recursion_limit_is_one_sentence(tmp_path):
    """PyYAML recurses per bracket: 600 of them were a RecursionError traceback."""
    message = config_error(tmp_path, nested(800))
    assert "nests brackets" in message
    # An override that deep is not YAML to us: its text, as an unparsable value is.
    path = "[" * 800 + "]" * 800
    assert load_config(None, [f"data.train_path={path}"]).data.train_path == path


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (".nan", "train.lr"),
        (".inf", "data.max_ratio"),
        ("-.inf", "model.dropout"),
        ("1" + "0" * 400, "train.max_minutes"),
    ],
)
def test_numbers_that_are_not_finite_are_refused(tmp_path, value, key):
    """NaN and infinity loaded silently (train.lr: .nan trained on NaN); an integer past the
    largest float was an OverflowError traceback."""
    message = config_error(tmp_path, None, [f"{key}={value}"])
    assert message.startswith(f"{key} must be a finite number")


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("train.seed=18446744073709551616", "train.seed must be an integer of at most 64 bits"),
        ("model.hidden_size=100000000000000000000", "at most 64 bits"),  # was a TypeError
        ("model.hidden_size=3037000500", "model.hidden_size=3037000500 make attention weights"),
    ],
)
def test_sizes_past_what_a_tensor_holds_are_refused(tmp_path, override, says):
    """The attention built on the meta device raised torch's TypeError or RuntimeError."""
    assert says in config_error(tmp_path, None, [override])


def test_keys_and_overrides_with_line_breaks_stay_on_one_line(tmp_path):
    assert "unknown key 'data.a\\nb'" in config_error(tmp_path, 'data: {"a\\nb": 1}')
    assert "'\\u2028'" in config_error(tmp_path, '"\\u2028": 1')
    assert "override 'x\\u2028y' is not" in config_error(tmp_path, None, ["x\u2028y"])


def test_a_billion_aliases_give_a_short_sentence(tmp_path):
    """`{value!r}` of YAML aliases expanded the document: 58 MB at 10**6 leaves (measured),
    a billion at 10**9. Now the value is cut short."""
    message = config_error(tmp_path, aliases(9))
    assert message.startswith("data.src must be a string, got [[") and len(message) < 300


@pytest.mark.parametrize(
    "value", ["2001-02-30", "1" * 5000, "!!int x", "!!float y", "!!timestamp 2001-13-01"]
)
def test_values_yaml_parses_but_python_cannot_hold(tmp_path, value):
    """PyYAML raises ValueError (not YAMLError) for these: a traceback, in a file and in
    --set. A file names itself; an override keeps the text (as for text that is not YAML)."""
    assert "holds a value YAML cannot read" in config_error(tmp_path, f"data: {{src: {value}}}")
    assert load_config(None, [f"data.train_path={value}"]).data.train_path == value


def test_a_bare_dash_is_standard_input_in_an_override(tmp_path):
    """`--set data.train_path=-` was YAML's [None]: "must be a string, got [None]"."""
    assert load_config(None, ["data.train_path=-"]).data.train_path == "-"


def prepare_error(tmp_path, files: dict[str, bytes], *overrides: str) -> str:
    """The DataError of preparing `files` (written into tmp_path), with nothing left in the
    cache but the subword models."""
    for name, blob in files.items():
        (tmp_path / name).write_bytes(blob)
    cache = tmp_path / "cache"
    cfg = load_config(
        None,
        [f"data.cache_dir={cache}", "data.vocab_size=30", "data.src=en", "data.tgt=fr", *overrides],
    )
    with pytest.raises(DataError) as err, contextlib.redirect_stderr(io.StringIO()):
        prepare(cfg.data)
    assert {p.name for p in cache.iterdir()} <= {"subwords"}
    for name, blob in files.items():
        assert (tmp_path / name).read_bytes() == blob
    message = str(err.value)
    assert_one_sentence(message, lambda m: True)
    return message


GOOD = b"".join(b"the cat %d sleeps\n" % i for i in range(20))


@pytest.mark.parametrize("damage", [1, 2, 3, 4])
def test_a_damaged_gzip_names_the_file_not_a_traceback(tmp_path, damage):
    """Streaming a truncated .gz raised EOFError, flipped bytes zlib.error, a wrong CRC or
    trailing garbage gzip.BadGzipFile, from the middle of the first pass; `read_lines` (dev
    and test) let zlib.error through."""
    files = {"train.en.gz": gzipped(GOOD, damage), "train.fr": GOOD}
    message = prepare_error(
        tmp_path, files, "data.corpus=files", f"data.train_path={tmp_path / 'train'}"
    )
    assert message.startswith(f"{tmp_path / 'train.en.gz'}: not a readable gzip file at line")
    with pytest.raises(DataError, match="not a readable gzip file"):
        read_lines(tmp_path / "train.en.gz")


def test_a_file_of_only_a_byte_order_mark_is_empty(tmp_path):
    """Streaming counted a lone BOM as a line (`read_lines` does not): "train.en has 1 lines
    but train.fr has 0" for two empty files."""
    files = {"train.en": BOM, "train.fr": b""}
    message = prepare_error(
        tmp_path, files, "data.corpus=files", f"data.train_path={tmp_path / 'train'}"
    )
    assert "has no pair with text" in message


def test_stdin_and_the_ratio_filter_are_named(tmp_path):
    """The message said "in -" and named only data.max_words when data.max_ratio dropped
    every pair."""
    with stdin_of(b"a b c d\tx\n"):
        message = prepare_error(
            tmp_path, {}, "data.corpus=tsv", "data.train_path=-", "data.max_ratio=2"
        )
    assert message.startswith("the training split in <stdin> has no pair")
    assert "data.max_ratio=2.0" in message


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"word " * 900, "every sentence is longer than its limit of 4,192 bytes"),
        ("\u200b\x7f".encode(), "only control, zero-width or other invisible characters"),
        ("".join(map(chr, range(0x4E00, 0x4E40))).encode(), "set data.vocab_size to 69"),
    ],
)
def test_sentencepiece_failures_name_the_files_and_the_cause(tmp_path, line, says):
    """sentencepiece's internal assertion, no file, and "try another data.vocab_size",
    which cannot help for the first two."""
    message = prepare_error(
        tmp_path,
        {"train.tsv": line + b"\t" + line + b"\n"},
        "data.corpus=tsv",
        f"data.train_path={tmp_path / 'train.tsv'}",
        "data.max_words=0",
    )
    assert message.startswith(f"the training split in {tmp_path / 'train.tsv'}: sentencepiece")
    assert says in message
