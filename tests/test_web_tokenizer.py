"""The browser's tokeniser (src/attnmt/web/sentencepiece.js, fed by
attnmt.export.web_tokenizer) against Python's sentencepiece: the same ids, the same pieces
and the same decoded text, line for line, for the reference runs' vocabularies.

One node process runs every case: the lines of the corpus the references were trained on
(the first verses of en-web and fr-segond, and the committed John test references and
translations), awkward input (whitespace, composed and decomposed accents,
full-width forms, ligatures, emoji, many scripts, unknown and control characters, very
long words) and arbitrary id sequences to decode. A BPE vocabulary trained on the same
lines covers `data.subword_type: bpe`.
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import string
import subprocess
from pathlib import Path

import pytest
import sentencepiece as spm

from attnmt.data.subwords import SentencePieceSide, load_vocab, train_vocab
from attnmt.errors import DataError
from attnmt.export.web_tokenizer import tokenizer_json

NODE = shutil.which("node")
# The JavaScript follows sentencepiece 0.2.2 and later, which rebase long paths' float32
# scores (older ones differ on input of thousands of pieces, and on rare float ties).
SENTENCEPIECE = tuple(int(part) for part in spm.__version__.split(".")[:3] if part.isdigit())
pytestmark = [
    pytest.mark.skipif(
        NODE is None, reason="node is not installed: the browser tokeniser runs under node here"
    ),
    pytest.mark.skipif(
        SENTENCEPIECE < (0, 2, 2),
        reason=f"sentencepiece {spm.__version__}: the browser tokeniser follows 0.2.2 and later",
    ),
]

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "src" / "attnmt" / "web" / "sentencepiece.js"
REFERENCES = ("rnnsearch-en-fr", "transformer-en-fr", "rnnencdec-en-fr")

AWKWARD = [
    "",
    " ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "\t a \t b \t",
    "  leading and trailing  ",
    "a  b   c",
    "\u3000full-width space\u3000",
    "a\u00a0b\u2009c\u202fd\u2028e\u0085f",
    "café crème",  # composed é (U+00E9)
    "cafe\u0301 cre\u0300me",  # e + combining acute / grave
    "\u0301 starts with a combining accent",
    "e\u0301\u0301\u0327",
    "Ｆｕｌｌ　ｗｉｄｔｈ！ ＡＢＣ１２３",
    "ﬁne ﬂour ﬀ ﬃ Ⅻ ① ㎞ x² ½",
    "😀 👍🏽 👨\u200d👩\u200d👧 🇫🇷",
    "في البدء خلق الله السماوات والأرض.",
    "בְּרֵאשִׁית בָּרָא אֱלֹהִים",
    "В начале сотворил Бог небо и землю.",
    "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν",
    "起初神创造天地。",
    "はじめに神は天と地とを創造された。ｶﾀｶﾅ",
    "태초에 하나님이 천지를 창조하시니라",
    "☃ \ue000 \U000e0001 \ufffd \U0010fffd",
    "a\u200bb a\u00adb \ufeffBOM",
    "\x00",
    "a\x00b\x01c\x7f",
    "\x1b[31mred\x1b[0m",
    "a\x1cb\x1dc\x1ed\x1fe",
    "▁",
    "a▁b ▁▁ x",
    "<unk> <s> </s> <pad>",
    "1,234.56 — «quoted» ‘single’ “double” … (brackets) [square] {curly}",
    "Anticonstitutionnellement" * 20,
    "a" * 2000,
    "😀" * 300,
    "Dieu " * 400,
    # a tie of two paths of the same pieces in another order, broken by float32 rounding
    # (unigram: "xé|lé|lé" against "xélé|lé"...)
    "xélélé",
    # equal BPE merges side by side: the leftmost goes first
    *(c * 4 for c in string.ascii_lowercase),
    *("x" + c * 3 for c in string.ascii_lowercase),
]


def _driver(tmp_path: Path) -> Path:
    """A node script: tokenizers and cases as JSON on stdin, results as JSON on stdout."""
    driver = tmp_path / "driver.mjs"
    driver.write_text(
        """
import { readFileSync } from "node:fs";
const { SentencePiece, joinWords } = await import(process.argv[2]);
const input = JSON.parse(readFileSync(0, "utf8"));
const out = {joined: input.lines.map(joinWords), models: {}};
for (const [name, data] of Object.entries(input.models)) {
  const sp = new SentencePiece(data);
  const encoded = input.lines.map((line) => sp.encode(line));
  out.models[name] = {
    ids: encoded.map((e) => e.ids),
    pieces: encoded.map((e) => e.pieces),
    decoded: encoded.map((e) => sp.decode(e.ids)),
    decoded_ids: input.decode[name].map((ids) => sp.decode(ids)),
  };
}
process.stdout.write(JSON.stringify(out));
""",
        encoding="utf-8",
    )
    return driver


@functools.cache
def _real_lines() -> tuple[str, ...]:
    """300+ lines of the references' corpus: John (test split), and Genesis (the first
    lines of the training split) when the Bible is installed."""
    lines = []
    for name in ("test-beam5.ref1.txt", "test-beam5.txt"):  # John, fr-segond and ours
        text = (ROOT / "reference" / "rnnsearch-en-fr" / "eval" / name).read_text("utf-8")
        lines += text.splitlines()[:150]
    try:
        from attnmt.data.bible import load_pairs

        pairs = load_pairs("en-web", "fr-segond")[:300]
        lines += [p.src for p in pairs] + [p.tgt for p in pairs]
    except (DataError, OSError, ImportError):  # the Bible is not installed
        pass
    return tuple(lines)


@pytest.fixture(scope="module")
def sides(tmp_path_factory) -> dict[str, SentencePieceSide]:
    """The reference runs' distinct sentencepiece models (the three share one joint
    model), and a small BPE vocabulary trained on the same corpus."""
    found: dict[bytes, tuple[str, SentencePieceSide]] = {}
    for run in REFERENCES:
        vocab = load_vocab(ROOT / "reference" / run / "vocab")
        for role, side in (("src", vocab.src), ("tgt", vocab.tgt)):
            found.setdefault(side.model_proto, (f"{run}/{role}", side))
    lines = _real_lines()
    bpe = train_vocab(
        lines[0::2], lines[1::2], kind="bpe", size=600, cache_dir=tmp_path_factory.mktemp("spm")
    )
    return {name: side for name, side in found.values()} | {"bpe-600": bpe.src}


def test_the_browser_tokenises_as_python(sides, tmp_path):
    # and all of it as one line: thousands of pieces, whose path score C++ rebases
    lines = [*_real_lines(), *AWKWARD, " ".join(_real_lines())]
    assert len(lines) >= 300 + len(AWKWARD)
    decode = {name: _id_sequences(side) for name, side in sides.items()}
    payload = {
        "lines": lines,
        "decode": decode,
        "models": {name: tokenizer_json(side.model_proto) for name, side in sides.items()},
    }
    run = subprocess.run(
        [NODE, str(_driver(tmp_path)), SCRIPT.as_uri()],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)

    assert out["joined"] == [" ".join(line.split()) for line in lines]
    for name, side in sides.items():
        got = out["models"][name]
        proc = side.processor
        want_ids = [proc.encode(line, out_type=int) for line in lines]
        for key, cases, want in (
            ("ids", lines, want_ids),
            ("pieces", lines, [proc.encode(line, out_type=str) for line in lines]),
            ("decoded", lines, [proc.decode(ids) for ids in want_ids]),
            ("decoded_ids", decode[name], [proc.decode(ids) for ids in decode[name]]),
        ):
            wrong = [(c, w, g) for c, w, g in zip(cases, want, got[key], strict=True) if w != g]
            assert not wrong, f"{name}: {len(wrong)} {key} differ, first: {wrong[0]!r:.400}"


def _id_sequences(side: SentencePieceSide) -> list[list[int]]:
    """Id sequences no encoder makes, to decode: control pieces and <unk> anywhere, pieces
    "▁" in a row, and 200 random ones."""
    rng = random.Random(0)
    space = side.processor.piece_to_id("\u2581")
    made = [[2, space, 3], [space, space, 1], [1, space], [space, 1, space], [0, 0], [], [3, 1]]
    return made + [
        [rng.randrange(side.size) for _ in range(rng.randrange(1, 12))] for _ in range(200)
    ]


def test_the_reference_vocabulary_is_what_the_browser_expects():
    """Our runs' models: unigram, nmt_nfkc, a dummy prefix, PAD/UNK/BOS/EOS = 0-3."""
    data = tokenizer_json(ROOT / "reference" / "rnnsearch-en-fr" / "vocab" / "joint.model")
    assert data["model_type"] == "unigram"
    assert data["normalizer"]["name"] == "nmt_nfkc"
    assert data["normalizer"]["add_dummy_prefix"]
    assert data["normalizer"]["remove_extra_whitespaces"]
    assert data["pieces"][:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert (data["control"], data["unk"]) == ([0, 2, 3], 1)


def test_a_model_the_browser_cannot_run_is_refused_in_one_sentence(tmp_path):
    model = tmp_path / "bytes"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["In the beginning God created the heavens and the earth."] * 20),
        model_prefix=str(model),
        vocab_size=300,
        byte_fallback=True,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    with pytest.raises(DataError, match="byte fallback"):
        tokenizer_json(model.with_suffix(".model"))
    with pytest.raises(DataError, match="cannot read"):
        tokenizer_json(b"\x0a\xff")
