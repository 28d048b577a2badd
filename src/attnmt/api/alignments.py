"""`attnmt.align` from Python: eflomal's word links of parallel text, what `attnmt align`
writes into a folder, as an object; with gold links, their AER beside the diagonal's.

    greek = attnmt.align()                       # the Greek->English verses with gold links
    greek["scores"]["test"]["grow-diag-final-and"]["aer"]
    aligned = attnmt.align(english_lines, french_lines, length=0.3)
    aligned.links()[0]                           # {(0, 0), (1, 2), ...}: (source, target)
    aligned.reversals(0)                         # adjacent words the other side swaps
"""

from __future__ import annotations

from collections.abc import Sequence

from attnmt.alignment.aligners import (
    ALIGNER,
    AlignedCorpus,
    align_corpus,
    gold_corpus,
    score_corpus,
)
from attnmt.alignment.links import SYMMETRIZATIONS, local_reversals
from attnmt.data.alignments import Link
from attnmt.errors import UserError
from attnmt.views.results import Table


class Alignments(Table):
    """What `attnmt.align` returns: the pairs (`ids`, `sources`, `targets` as words), their
    links (`links(method)`: one set of (source word, target word) per pair) and `data`, the
    report `attnmt align` writes (with gold links, `scores[split][method]`: AER, precision,
    recall, beside the diagonal's)."""

    def __init__(self, corpus: AlignedCorpus, links: dict[str, list[set[Link]]], data: dict):
        self.corpus = corpus
        self.ids = corpus.ids
        self.sources, self.targets = corpus.src, corpus.tgt
        self._links = links
        self._index = {name: n for n, name in enumerate(corpus.ids)}
        self.data = data

    def links(self, method: str = "grow-diag-final-and") -> list[set[Link]]:
        """Each pair's links: "forward", "reverse" or a symmetrization (SYMMETRIZATIONS)."""
        if method not in self._links:
            raise UserError(f"no links named {method!r}; choose from {', '.join(self._links)}")
        return self._links[method]

    def reversals(self, pair: int | str, method: str = "grow-diag-final-and"):
        """The local reversals of a pair (by index or id): (i, i + 1, a, a - 1) where source
        words i and i + 1 are linked one to one to target words a and a - 1, each of the
        four by that one link only (*eternal life* -> *vie éternelle*)."""
        if isinstance(pair, str) and pair not in self._index:
            raise UserError(f"no pair with id {pair!r} was aligned")
        index = self._index[pair] if isinstance(pair, str) else pair
        return local_reversals(self.links(method)[index])


def align(
    sources: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    *,
    ids: Sequence[str] | None = None,
    length: float = 1.0,
) -> Alignments:
    """eflomal's links of every pair of `sources` and `targets` (sentences, words split at
    spaces), both directions and every symmetrization; without them, of the Greek->English
    verses with hand-made links, scored on Romans (dev) and John (test). `length` scales
    eflomal's sampling iterations (1.0: its default). Like every unsupervised aligner it
    learns from the text it aligns, all of it at once."""
    if (sources is None) != (targets is None):
        raise UserError("give both sources and targets (parallel text), or neither (gold corpus)")
    if length <= 0:
        raise UserError(f"length must be positive, got {length}")
    if sources is None:
        corpus = gold_corpus()
    else:
        if isinstance(sources, str) or isinstance(targets, str):
            raise UserError("sources and targets are lists of sentences, one pair at each index")
        if len(sources) != len(targets):
            raise UserError(
                f"{len(sources)} sources but {len(targets)} targets; give one target a source"
            )
        names = list(ids) if ids is not None else [str(n) for n in range(len(sources))]
        if len(names) != len(sources):
            raise UserError(f"{len(names)} ids for {len(sources)} pairs; give one id a pair")
        corpus = AlignedCorpus(names, [s.split() for s in sources], [t.split() for t in targets])
    links = align_corpus(corpus.src, corpus.tgt, length=length)
    data = {
        "aligner": ALIGNER,
        "length": length,
        "pairs": len(corpus.ids),
        "symmetrizations": list(SYMMETRIZATIONS),
        "scores": score_corpus(links, corpus),
    }
    return Alignments(corpus, links, data)
