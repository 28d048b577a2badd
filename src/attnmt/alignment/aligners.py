"""A statistical word aligner to measure attention against: eflomal.

eflomal (Östling & Tiedemann 2016, "Efficient word alignment with Markov Chain Monte
Carlo") samples the alignments of IBM model 1, then an HMM, then an HMM with fertility, and
is a standard strong baseline for unsupervised word alignment. It is installed from PyPI
and builds its C sampler from source (`make setup` does it; see docs/alignment.md):

    forward, reverse = eflomal_links(src_sentences, tgt_sentences)
    links = [symmetrize(f, r) for f, r in zip(forward, reverse)]
    links = align_corpus(src_sentences, tgt_sentences)  # both directions, every heuristic
    scores = score_corpus(links, corpus)  # AER against the corpus's gold, beside the diagonal

`attnmt align` and `attnmt.align` are these with files or Python objects around them;
`gold_corpus()` is the Greek->English verses with hand-made links they use by default.

Like every unsupervised aligner it learns from the very text it aligns, so it is run on
all the verses at once, the test book included; the attention of a translation model
never sees the test book. Its sampler is not seedable: two runs differ a little (the
docs give the spread).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.alignment.links import (
    SYMMETRIZATIONS,
    alignment_scores,
    diagonal_alignment,
    symmetrize,
)
from attnmt.config.sections import DataConfig
from attnmt.data.alignments import Link, load_gold, read_pharaoh, split_by_book
from attnmt.errors import UserError

ALIGNER = "eflomal 2.0.0 (IBM1 + HMM + fertility, 3 samplers)"
GOLD_SPLITS = ("dev", "test")

INSTALL = (
    "MAKEFLAGS='CFLAGS=-Ofast\\ -march=x86-64-v3\\ -fopenmp' pip install --no-cache-dir "
    "--no-binary eflomal eflomal==2.0.0"
)


def eflomal_links(
    src: Sequence[Sequence[str]],
    tgt: Sequence[Sequence[str]],
    *,
    length: float = 1.0,
    samplers: int = 3,
) -> tuple[list[set[Link]], list[set[Link]]]:
    """eflomal's links of each sentence pair, forward and reverse, both as (source, target).

    `src` and `tgt` are sentences as lists of words (the words the links index). `length`
    scales eflomal's number of sampling iterations (its default, 1.0, picks them from the
    corpus size); `samplers` independent samplers are averaged. Forward links each target
    word to at most one source word, reverse each source word to at most one target word.
    """
    if len(src) != len(tgt):
        raise ValueError(f"{len(src)} source and {len(tgt)} target sentences; expected pairs")
    empty = [n for n, (s, t) in enumerate(zip(src, tgt, strict=True)) if not s or not t]
    if empty:
        raise UserError(
            f"sentence pair {empty[0] + 1} has an empty side; eflomal aligns pairs of "
            "non-empty sentences, so drop such pairs first"
        )
    try:
        from eflomal import Aligner
    except ImportError:
        raise UserError(
            f"the eflomal aligner is not installed; install it with `{INSTALL}` (it builds "
            "from source and needs a C compiler: apt-get install build-essential)"
        ) from None
    aligner = Aligner(rel_iterations=length, n_samplers=samplers)
    with tempfile.TemporaryDirectory(prefix="attnmt-eflomal-") as tmp:
        forward, reverse = Path(tmp, "forward"), Path(tmp, "reverse")
        try:
            aligner.align(
                [" ".join(words) for words in src],
                [" ".join(words) for words in tgt],
                links_filename_fwd=str(forward),
                links_filename_rev=str(reverse),
                quiet=True,
            )
        except subprocess.CalledProcessError as err:
            # -4 (SIGILL): a binary built with -march=native on another CPU.
            raise UserError(
                f"the eflomal binary failed (exit status {err.returncode}); if it was built "
                f"on another machine, rebuild it here with `{INSTALL} --force-reinstall`"
            ) from None
        return read_pharaoh(forward), read_pharaoh(reverse)


@dataclass
class AlignedCorpus:
    """Sentence pairs as words, with their ids, and where gold links exist: the sure and the
    possible links of every pair and which pairs each scored split holds (rows)."""

    ids: list[str]
    src: list[list[str]]
    tgt: list[list[str]]
    gold: list[set[Link]] | None = None
    possible: list[set[Link]] | None = None
    scored: dict[str, list[int]] | None = None


def gold_corpus() -> AlignedCorpus:
    """The Greek->English verses with hand-made links (all 27 books, `attnmt data show
    alignments`), scored on the dev (Romans) and test (John) books that every alignments
    config uses by default."""
    verses = load_gold().verses
    books = DataConfig()
    parts = split_by_book(verses, test_books=books.test_books, dev_books=books.dev_books)
    index = {v.ref: n for n, v in enumerate(verses)}
    gold = [v.links for v in verses]
    return AlignedCorpus(
        ids=[v.ref for v in verses],
        src=[list(v.src) for v in verses],
        tgt=[list(v.tgt) for v in verses],
        gold=gold,
        possible=gold,
        scored={split: [index[v.ref] for v in parts[split]] for split in GOLD_SPLITS},
    )


def align_corpus(
    src: Sequence[Sequence[str]], tgt: Sequence[Sequence[str]], *, length: float = 1.0
) -> dict[str, list[set[Link]]]:
    """eflomal's links of every pair: "forward", "reverse" and each symmetrization."""
    forward, reverse = eflomal_links(src, tgt, length=length)
    return {
        "forward": forward,
        "reverse": reverse,
        **{m: [symmetrize(f, r, m) for f, r in zip(forward, reverse, strict=True)]
           for m in SYMMETRIZATIONS},
    }  # fmt: skip


def score_corpus(
    links: Mapping[str, Sequence[set[Link]]], corpus: AlignedCorpus
) -> dict[str, dict[str, dict]]:
    """split -> links' name -> AER, precision, recall (4 decimals) against the corpus's gold,
    the diagonal beside them; empty without gold."""
    if corpus.gold is None:
        return {}
    possible = corpus.possible or corpus.gold
    diagonal = [
        diagonal_alignment(len(s), len(t)) for s, t in zip(corpus.src, corpus.tgt, strict=True)
    ]
    scored = corpus.scored or {"all": list(range(len(corpus.ids)))}
    tables = {}
    for split, rows in scored.items():
        sure, maybe = [corpus.gold[i] for i in rows], [possible[i] for i in rows]
        tables[split] = {
            name: _rounded(alignment_scores([found[i] for i in rows], sure, maybe))
            for name, found in {**links, "diagonal": diagonal}.items()
        }
    return tables


def _rounded(scores: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()}
