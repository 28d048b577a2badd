"""Translation scores: sacrebleu BLEU and chrF, exact match, BLEU by source length.

References come as one list per sentence (the first is the main reference; the others are
extra ones, e.g. Darby beside Segond). sacrebleu takes reference *streams*, so sentences
with fewer references are padded with None, which sacrebleu skips.

BLEU is tokenized for the target language as the field reports it (`bleu_tokenizer`:
Chinese `zh`, Japanese `ja-mecab`, Korean `ko-mecab`, else `13a`; characters where MeCab is
missing, with `tokenizer_note` saying so); the tokenizer is in the sacrebleu signature.
chrF, reported beside BLEU for every pair, scores character n-grams and needs none.

Alignment scores (AER) are in `attnmt.alignment.links`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import sacrebleu

# sacrebleu's BLEU tokenizer for a target language, as the field reports BLEU (sacrebleu's
# own choice for `-l xx-zh`, `xx-ja`, `xx-ko`); `13a` for every other language.
TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}
# Without its MeCab dictionary (`pip install 'sacrebleu[ja]'` or `[ko]`), character level.
FALLBACK_TOKENIZER = "char"
_EXTRA = {"ja-mecab": ("Japanese", "ja"), "ko-mecab": ("Korean", "ko")}


@cache
def _unavailable(tokenize: str) -> str:
    """Why sacrebleu cannot build the `tokenize` tokenizer here ("" if it can)."""
    try:
        sacrebleu.metrics.BLEU(tokenize=tokenize)
    except (RuntimeError, AssertionError, ImportError, OSError) as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ""


def _field_tokenizer(target: str) -> str:
    return TOKENIZERS.get(target.split("-", 1)[0].lower(), "13a")


def bleu_tokenizer(target: str) -> str:
    """The sacrebleu tokenizer for a target language or version name ("zh-ncv" -> "zh").

    BLEU's default `13a` splits on spaces, so a Chinese or Japanese verse (no spaces) would
    be one token: Chinese gets sacrebleu's `zh`, Japanese `ja-mecab` and Korean `ko-mecab`
    (MeCab word segmentation, as the field reports them) where their dictionaries are
    installed, else the character tokenizer `char` (`tokenizer_note` says why). The
    tokenizer is written in the sacrebleu signature either way (`tok:ja-mecab-...`,
    `tok:char`).
    """
    wanted = _field_tokenizer(target)
    return FALLBACK_TOKENIZER if wanted in _EXTRA and _unavailable(wanted) else wanted


def tokenizer_note(target: str) -> str:
    """A sentence for the report where BLEU falls back to characters; "" otherwise."""
    wanted = _field_tokenizer(target)
    if wanted not in _EXTRA or not _unavailable(wanted):
        return ""
    language, extra = _EXTRA[wanted]
    return (
        f"BLEU is computed on characters (`tok:char`): sacrebleu's `{wanted}`, the usual "
        f"tokenizer for {language}, needs MeCab and its dictionary (`pip install "
        f"'sacrebleu[{extra}]'`), which are not installed here; chrF does not depend on it."
    )


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists -> sacrebleu's list of streams (padded with None).

    An empty reference is missing, not a reference of length 0 (which would wipe out the
    brevity penalty): it becomes None too, which sacrebleu skips.
    """
    width = max((len(refs) for refs in references), default=1)
    return [
        [refs[i] if i < len(refs) and refs[i].strip() else None for refs in references]
        for i in range(width)
    ]


def corpus_scores(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], *, tokenize: str = "13a"
) -> dict:
    """BLEU, chrF (with their sacrebleu signatures) and exact match of a whole corpus.

    `tokenize` is sacrebleu's BLEU tokenizer (see `bleu_tokenizer`).
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} reference lists; "
            "they must be one per sentence"
        )
    bleu = sacrebleu.metrics.BLEU(tokenize=tokenize)
    chrf = sacrebleu.metrics.CHRF()
    if not hypotheses:
        return {
            "bleu": 0.0,
            "chrf": 0.0,
            "exact": 0.0,
            "sentences": 0,
            "references": 0,
            "bleu_signature": "",  # sacrebleu signs only what it scored
            "chrf_signature": "",
        }
    streams = reference_streams(references)
    bleu_score = bleu.corpus_score(list(hypotheses), streams)
    chrf_score = chrf.corpus_score(list(hypotheses), streams)
    exact = sum(
        h.strip() == refs[0].strip() for h, refs in zip(hypotheses, references, strict=True)
    )
    result: dict[str, Any] = {
        "bleu": round(bleu_score.score, 2),
        "chrf": round(chrf_score.score, 2),
        "exact": round(100.0 * exact / len(hypotheses), 2),
        "sentences": len(hypotheses),
        "references": len(streams),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }
    return result


# --- BLEU by source length (Bahdanau et al. 2014, Fig. 2) ---------------------------------


def _length_bucket(words: int, width: int) -> int:
    """Bucket k holds sources of k*width < words <= (k+1)*width; 0 words go to bucket 0."""
    return max(words - 1, 0) // width


def bleu_by_length(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    width: int = 10,
    tokenize: str = "13a",
) -> list[dict]:
    """BLEU and chrF of the sentences grouped by source length, as in Bahdanau et al. Fig. 2.

    The length is the number of whitespace-separated words of the source (`len(s.split())`).
    Bucket k holds the sources with k*width < words <= (k+1)*width, labelled "1-10",
    "11-20", ... for width 10 (`lo` and `hi` are those inclusive bounds); an empty source
    counts in the first bucket. Each bucket is scored as its own corpus with
    `corpus_scores` (sacrebleu, every reference). Buckets without sentences are left out;
    the rows come back shortest first.
    """
    if width < 1:
        raise ValueError(f"width must be a positive number of words, got {width}")
    if not len(sources) == len(hypotheses) == len(references):
        raise ValueError(
            f"{len(sources)} sources, {len(hypotheses)} hypotheses and {len(references)} "
            "reference lists; they must be one per sentence"
        )
    members: dict[int, list[int]] = {}
    for index, source in enumerate(sources):
        members.setdefault(_length_bucket(len(source.split()), width), []).append(index)
    rows = []
    for bucket in sorted(members):
        chosen = members[bucket]
        scores = corpus_scores(
            [hypotheses[i] for i in chosen], [references[i] for i in chosen], tokenize=tokenize
        )
        lo, hi = bucket * width + 1, (bucket + 1) * width
        rows.append(
            {
                "label": f"{lo}-{hi}",
                "lo": lo,
                "hi": hi,
                "sentences": len(chosen),
                "bleu": scores["bleu"],
                "chrf": scores["chrf"],
            }
        )
    return rows


_HEADERS = {"label": "Source words", "sentences": "Sentences", "bleu": "BLEU", "chrf": "chrF"}


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] = ("label", "sentences", "bleu", "chrf"),
) -> str:
    """A Markdown table of `rows` (e.g. from `bleu_by_length`), one row per dict.

    `columns` picks the keys and their order; known keys get readable headers, floats are
    written with two decimals and a missing key leaves its cell empty.
    """

    def cell(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    header = "| " + " | ".join(_HEADERS.get(c, c) for c in columns) + " |"
    rule = "|" + "|".join("---:" if c != "label" else "---" for c in columns) + "|"
    body = ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join([header, rule, *body]) + "\n"


# --- From attention weights to word alignments, and AER (Och & Ney 2003) ------------------
