"""Attention as word alignment: subwords merged to words, links read off, scored (AER).

Alignments are sets of (source word i, target word j) links, 0-based, the order of the
Pharaoh "i-j" format. For one sentence:

    source = source_words(vocab.src, text, n_ids)       # words and each piece's word
    target = target_words(vocab.tgt, tokens, output)
    view = word_view(matrix, source, target)            # (T, S) subword weights -> words
    view.links, view.word_weights

Subword attention is merged to words (`merge_to_words`: sum over a source word's pieces,
mean over a target word's pieces, EOS dropped), then each target word is linked to its
most-attended source word (`extract_alignment`), plus, with a threshold, to every source
word with at least that weight. `alignment_scores` gives precision, recall and the
alignment error rate against gold sure/possible links (Och & Ney 2003); the
`diagonal_alignment` baseline says how much of that a length ratio alone would get.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnmt.arrays import to_numpy
from attnmt.data.subwords import word_of_pieces
from attnmt.data.synthetic import SymbolVocab

if TYPE_CHECKING:
    from torch import Tensor

log = logging.getLogger(__name__)


Link = tuple[int, int]


@dataclass
class SideWords:
    """The words of one side and the word index of each of its subword ids.

    -1 drops a piece (one that spells no word). A word may have no piece at all (a
    character the subword model normalises away): its row or column of word weights is 0.
    """

    word_of: list[int]
    words: list[str]


def source_words(side: Any, text: str, n_ids: int) -> SideWords:
    """Words of a source sentence whose first `n_ids` subword ids were translated.

    The words are `text.split()`, what Pharaoh indices count, cut after the last word the
    `n_ids` ids reach. Each word is encoded on its own to find its pieces; when that does
    not give back the sentence's ids (rare), sentencepiece's own word boundaries are used.
    """
    words = text.split()
    if isinstance(side, SymbolVocab):
        return SideWords(list(range(n_ids)), words[:n_ids])
    per_word = [side.encode(word) for word in words]
    if [i for ids in per_word for i in ids] == side.encode(text):
        word_of = [w for w, ids in enumerate(per_word) for _ in ids]
    else:
        word_of = side.word_of(text)
        if max(word_of, default=-1) + 1 != len(words):
            words = [side.decode(ids).strip() or "?" for ids in _groups(side.encode(text), word_of)]
    word_of = word_of[:n_ids]
    return SideWords(word_of, words[: max(word_of, default=-1) + 1])


def target_words(side: Any, tokens: Sequence[int], text: str | None = None) -> SideWords:
    """Words of an output (its ids, no EOS), mapped from the decoded pieces.

    The word map comes from the pieces of the ids themselves (`id_pieces`, then
    `word_of_pieces`), not from re-encoding the text: each run of pieces that forms a word
    is decoded and split on spaces, and its pieces belong to the first word it spells. The
    words are then `text.split()` of the decoded output (checked, not assumed).
    """
    if isinstance(side, SymbolVocab):
        return SideWords(list(range(len(tokens))), side.id_pieces(tokens))
    word_of: list[int] = []
    words: list[str] = []
    for ids in _groups(tokens, word_of_pieces(side.id_pieces(tokens))):
        parts = side.decode(ids).split()
        word_of += [len(words) if parts else -1] * len(ids)
        words += parts
    text = side.decode(list(tokens)) if text is None else text
    if words != text.split():  # not expected; the links then index the words listed here
        log.debug("output words %s differ from the decoded text %r", words, text)
    return SideWords(word_of, words)


def _groups(ids: Sequence[int], word_of: Sequence[int]) -> list[list[int]]:
    """The ids split into runs of equal word index."""
    groups: list[list[int]] = []
    previous = None
    for token, word in zip(ids, word_of, strict=True):
        if word != previous or not groups:
            groups.append([])
            previous = word
        groups[-1].append(int(token))
    return groups


@dataclass
class WordView:
    """Word-level attention of one sentence and the links read off it."""

    src_words: list[str]
    tgt_words: list[str]
    word_weights: np.ndarray  # (T_words, S_words)
    links: set[Link]


def word_view(
    matrix: np.ndarray | Tensor,
    source: SideWords,
    target: SideWords,
    *,
    threshold: float | None = None,
) -> WordView:
    """Merge a (T, S) subword matrix (EOS row and column included) to words, and align.

    Shapes:
        matrix: (T_sub, S_sub), rows/columns past the word maps (EOS) are dropped
        -> word_weights (len(target.words), len(source.words))
    """

    array = to_numpy(matrix)
    # merge_to_words wants every word to own a piece: merge those that do, then place them.
    src_map, src_present = _compact(source.word_of)
    tgt_map, tgt_present = _compact(target.word_of)
    merged = merge_to_words(array, src_map, tgt_map)  # (T_present, S_present)
    word_weights = np.zeros((len(target.words), len(source.words)))
    word_weights[np.ix_(tgt_present, src_present)] = merged
    links = extract_alignment(word_weights, threshold=threshold)
    return WordView(source.words, target.words, word_weights, links)


def _compact(word_of: Sequence[int]) -> tuple[list[int], list[int]]:
    """Renumber the words that own pieces 0..K-1; returns (new map, their old indices)."""
    present = sorted({w for w in word_of if w >= 0})
    new = {w: i for i, w in enumerate(present)}
    return [new.get(w, -1) for w in word_of], present


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
    array = to_numpy(weights)
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
    array = to_numpy(word_weights)
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


def local_reversals(links: set[Link]) -> list[tuple[int, int, int, int]]:
    """The adjacent word pairs an alignment swaps: (i, i + 1, a, a − 1) where source words
    i and i + 1 are linked one to one to target words a and a − 1 (*eternal life* → *vie
    éternelle*: the crossing of Bahdanau et al.'s Fig. 3). Each of the four words must
    have that one link only, so a reversal is read off the links unambiguously."""
    by_source: dict[int, list[int]] = {}
    by_target: dict[int, list[int]] = {}
    for i, j in links:
        by_source.setdefault(i, []).append(j)
        by_target.setdefault(j, []).append(i)
    found = []
    for i, targets in sorted(by_source.items()):
        following = by_source.get(i + 1, [])
        if len(targets) != 1 or len(following) != 1:
            continue
        a, b = targets[0], following[0]
        if b == a - 1 and by_target[a] == [i] and by_target[b] == [i + 1]:
            found.append((i, i + 1, a, b))
    return found


def collapsed(links: set[Link], target_words: int) -> bool:
    """Whether the links say nothing: more than half of the target words linked to one
    source word (an attention that stares at one position, as an untrained one does).
    Sentences of fewer than three target words are never called collapsed."""
    if target_words < 3 or not links:
        return False
    per_source: dict[int, int] = {}
    for source, _ in links:
        per_source[source] = per_source.get(source, 0) + 1
    return max(per_source.values()) > target_words / 2


# --- two directions made one ---------------------------------------------------------------

SYMMETRIZATIONS = ("intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and")
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def symmetrize(
    forward: set[Link], reverse: set[Link], method: str = "grow-diag-final-and"
) -> set[Link]:
    """One alignment from the links of two directions, both as (source i, target j).

    A one-directional aligner (or attention) links each word of one side to at most one
    word of the other; the two directions see different things. The heuristics of Och &
    Ney (2003) and Koehn et al. (2003), as phrase-based MT used them:

    - `intersection`: the links both directions agree on (high precision);
    - `union`: every link of either (high recall);
    - `grow-diag`: start from the intersection and, until nothing changes, add any union
      link that neighbours (8 directions) a link already there and covers a word, on
      either side, that has no link yet;
    - `grow-diag-final`: then add the union links whose source *or* target word is still
      unaligned; `grow-diag-final-and`: only those whose source *and* target words are
      both unaligned (forward's first, then reverse's), the usual default.
    """
    if method not in SYMMETRIZATIONS:
        raise ValueError(f"unknown symmetrization {method!r}; choose one of {SYMMETRIZATIONS}")
    forward, reverse = set(forward), set(reverse)
    union = forward | reverse
    if method == "intersection":
        return forward & reverse
    if method == "union":
        return union
    links = forward & reverse
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}

    def add(link: Link) -> None:
        links.add(link)
        src_done.add(link[0])
        tgt_done.add(link[1])

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                new = (i + di, j + dj)
                if (
                    new in union
                    and new not in links
                    and (new[0] not in src_done or new[1] not in tgt_done)
                ):
                    add(new)
                    grown = True
    if method == "grow-diag":
        return links
    both = method == "grow-diag-final-and"
    for direction in (forward, reverse):
        for i, j in sorted(direction):
            free_src, free_tgt = i not in src_done, j not in tgt_done
            if (free_src and free_tgt) if both else (free_src or free_tgt):
                add((i, j))
    return links


def shift_rows(matrix: np.ndarray, offset: int) -> np.ndarray:
    """The (T, S) matrix whose row t is row t + `offset` of `matrix` (clamped to 0..T-1).

    A decoder whose attention at step t looks at the source word of target t − k (it
    attends before it knows what it writes) aligns target t with the weights of step
    t + k: `shift_rows(matrix, k)` lines them up before the links are read off.
    """
    if offset == 0:
        return matrix
    rows = np.clip(np.arange(matrix.shape[0]) + offset, 0, matrix.shape[0] - 1)
    return matrix[rows]
