"""Scores: sacrebleu BLEU and chrF, BLEU by source length, and attention alignments (AER).

References come as one list per sentence (the first is the main reference; the others are
extra ones, e.g. Darby beside Segond). sacrebleu takes reference *streams*, so sentences
with fewer references are padded with None, which sacrebleu skips.

Alignments are sets of (source word i, target word j) links, the order of the Pharaoh
"i-j" format. Attention over subwords is merged to words (`merge_to_words`), read as links
(`extract_alignment`) and scored against gold links (`alignment_scores`); the
`diagonal_alignment` baseline says how much of that a length ratio alone would get.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import sacrebleu

if TYPE_CHECKING:
    from torch import Tensor


# sacrebleu tokenizers for targets written without spaces between words (13a otherwise).
TOKENIZERS = {"zh": "zh", "ja": "char", "ko": "char"}


def bleu_tokenizer(target: str) -> str:
    """The sacrebleu tokenizer for a target language or version name ("zh-ncv" -> "zh").

    BLEU's default `13a` splits on spaces, so a Japanese verse (no spaces) would be one
    token; Chinese uses sacrebleu's `zh`, Japanese and Korean its character tokenizer.
    """
    return TOKENIZERS.get(target.split("-", 1)[0].lower(), "13a")


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


def _as_array(weights: np.ndarray | Tensor) -> np.ndarray:
    """A numpy float64 copy of a numpy array or a torch tensor (on any device)."""
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu().float().numpy()
    return np.array(weights, dtype=np.float64)


def _grouping(word_of: Sequence[int], pieces: int, side: str) -> np.ndarray:
    """One-hot (pieces, words) matrix of a piece -> word map; unmapped pieces get a zero row."""
    if len(word_of) > pieces:
        raise ValueError(
            f"{side}_word_of has {len(word_of)} entries but the weights have only {pieces} "
            f"{side} positions; expected at most {pieces}"
        )
    words = max(word_of, default=-1) + 1
    if any(w < -1 for w in word_of) or set(range(words)) - set(word_of):
        raise ValueError(
            f"{side}_word_of must use the word indices 0..N-1, each at least once, and -1 "
            f"for a piece to drop; got {list(word_of)}"
        )
    onehot = np.zeros((pieces, words))
    for piece, word in enumerate(word_of):
        if word >= 0:
            onehot[piece, word] = 1.0
    return onehot


def merge_to_words(
    weights: np.ndarray | Tensor, src_word_of: Sequence[int], tgt_word_of: Sequence[int]
) -> np.ndarray:
    """Subword attention -> word attention: sum over source pieces, average over target pieces.

    `src_word_of[s]` is the word index of source piece s and `tgt_word_of[t]` that of
    target piece t (e.g. from `attnmt.data.subwords.word_of_pieces`); -1 drops a piece, and
    positions past the end of a map (the source EOS column, the final EOS row) are dropped.
    A source word receives the probability mass of all its pieces (the sum), so a row that
    summed to one still does, less what went to dropped columns such as EOS. A target word
    attends as its pieces do on average (the mean), which keeps rows on the same scale.
    For the Transformer, select or average layers and heads first.

    Shapes:
        weights: (T_sub, S_sub), numpy array or tensor  ->  (T_words, S_words)
    """
    array = _as_array(weights)
    if array.ndim != 2:
        raise ValueError(
            f"weights must be (T_sub, S_sub), got shape {tuple(array.shape)}; for the "
            "Transformer's (T, L, H, S) pick or average layers and heads first"
        )
    source = _grouping(src_word_of, array.shape[1], "src")  # (S_sub, S_words)
    target = _grouping(tgt_word_of, array.shape[0], "tgt").T  # (T_words, T_sub)
    target = target / target.sum(axis=1, keepdims=True)  # mean over a word's pieces
    return target @ array @ source  # (T_words, S_words)


def extract_alignment(
    word_weights: np.ndarray | Tensor, *, threshold: float | None = None
) -> set[tuple[int, int]]:
    """Alignment links (source i, target j) read off word attention, Pharaoh order "i-j".

    Each target word j is linked to its most-attended source word (the first on a tie);
    with a `threshold`, also to every other source word whose weight is >= threshold
    (one target word, many source words). A row of all zeros gets no link.

    Shapes:
        word_weights: (T_words, S_words)
    """
    array = _as_array(word_weights)
    if array.ndim != 2:
        raise ValueError(f"word_weights must be (T_words, S_words), got {tuple(array.shape)}")
    links: set[tuple[int, int]] = set()
    for j, row in enumerate(array):
        if not row.any():
            continue
        links.add((int(row.argmax()), j))
        if threshold is not None:
            links.update((int(i), j) for i in np.flatnonzero(row >= threshold))
    return links


def alignment_scores(
    predicted: Sequence[set[tuple[int, int]]],
    sure: Sequence[set[tuple[int, int]]],
    possible: Sequence[set[tuple[int, int]]] | None = None,
) -> dict:
    """Corpus precision, recall and alignment error rate (Och & Ney 2003, section 5).

    With A the predicted links, S the sure and P the possible ones (P includes S: sure
    links are added to the possible ones given; without `possible`, P = S), counted over
    the whole corpus:
        precision = |A∩P| / |A|,  recall = |A∩S| / |S|,
        AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|).
    Scores are fractions in [0, 1]. Empty cases: precision is 1 when nothing is predicted,
    recall is 1 when there is no sure link, and AER is 0 when both A and S are empty.
    The counts come back too, so corpora can be pooled.
    """
    possible = sure if possible is None else possible
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError(
            f"{len(predicted)} predicted, {len(sure)} sure and {len(possible)} possible "
            "alignments; they must be one per sentence"
        )
    n_a = n_s = n_p = hits_s = hits_p = 0
    for links, sure_links, possible_links in zip(predicted, sure, possible, strict=True):
        possible_links = set(possible_links) | set(sure_links)
        n_a += len(links)
        n_s += len(sure_links)
        n_p += len(possible_links)
        hits_s += len(links & set(sure_links))
        hits_p += len(links & possible_links)
    return {
        "precision": hits_p / n_a if n_a else 1.0,
        "recall": hits_s / n_s if n_s else 1.0,
        "aer": 1.0 - (hits_s + hits_p) / (n_a + n_s) if n_a + n_s else 0.0,
        "predicted": n_a,
        "sure": n_s,
        "possible": n_p,
        "sure_hits": hits_s,
        "possible_hits": hits_p,
        "sentences": len(predicted),
    }


def diagonal_alignment(src_len: int, tgt_len: int) -> set[tuple[int, int]]:
    """The diagonal baseline: target word j -> source word round((j + 0.5)·S/T − 0.5).

    The source position proportional to the target one, centre to centre, rounded half up
    (computed exactly as ⌊(2j + 1)·S / 2T⌋, always in 0..S−1). Links are (source, target)
    pairs; a square sentence gives the identity. Empty when either side is empty.
    """
    if src_len < 0 or tgt_len < 0:
        raise ValueError(f"lengths must be >= 0, got src_len={src_len}, tgt_len={tgt_len}")
    if src_len == 0:
        return set()
    return {((2 * j + 1) * src_len // (2 * tgt_len), j) for j in range(tgt_len)}
