"""Derivation trees of the grammar lab (`attnmt.data.grammar`): their shape, the English
they write, and how they are drawn at random.

A `Sentence` is clauses joined by conjunctions; a `Clause` has a subject, a verb, maybe an
object, prepositional phrases, a negation, a fronted adverb and a clause it introduces
("says that ..."); an `NP` has a determiner, adjectives, a head noun (or a pronoun), maybe a
prepositional phrase, a relative clause ("that the dog sees", whose subject or object is
missing: its gap) and a next conjunct. Every lexical choice is a `Leaf` holding an `Item`.
Number (sg/pl) belongs to the tree, not to the noun: swapping the noun keeps it.

`Grower.grow` draws a sentence of a length within bounds: one random clause, then random
steps (an adjective, a prepositional phrase, a relative clause, a coordination, "X says
that ...", a negation, an adverb) until it reaches a length drawn uniformly in the bounds,
each step only if it fits. Items are drawn with Zipf frequencies (`grammar_lexicon.zipf`).
"""

from __future__ import annotations

import random
from bisect import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate

from attnmt.data.grammar_lexicon import Item, items, zipf


# --- derivations ------------------------------------------------------------------------------
class Leaf:
    """One lexical choice: its item, its source positions (set by `english`), and for a
    determiner the number of its phrase (which limits its substitutes)."""

    __slots__ = ("item", "number", "src")

    def __init__(self, item: Item, number: str = ""):
        self.item, self.number, self.src = item, number, ()

    def __repr__(self) -> str:
        return f"Leaf({self.item!r})"


@dataclass(eq=False)
class NP:
    """[det] adjs head [pp] [rc] [and NP]; a pronoun head stands alone."""

    head: Leaf
    number: str = "sg"
    det: Leaf | None = None
    adjs: list[Leaf] = field(default_factory=list)
    pp: PP | None = None
    rc: Clause | None = None  # a relative clause: subj None or obj None is its gap
    coord: tuple[Leaf, NP] | None = None  # ("and", the next conjunct)


@dataclass(eq=False)
class PP:
    prep: Leaf
    np: NP


@dataclass(eq=False)
class Clause:
    """[that] [adverb] subject [neg] verb [object] pps [comp]."""

    subj: NP | None
    verb: Leaf
    obj: NP | None = None
    comp: Clause | None = None  # the clause a saying verb introduces
    that: Leaf | None = None  # the relative pronoun or complementizer opening this clause
    neg: Leaf | None = None
    adv: Leaf | None = None  # sentence-initial, main clauses only
    pps: list[PP] = field(default_factory=list)


@dataclass(eq=False)
class Sentence:
    clauses: list[Clause]
    conjs: list[Leaf] = field(default_factory=list)  # one between each two clauses


def walk(node: object) -> Iterator[object]:
    """Every node and leaf under `node` (itself included), in no particular order."""
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, NP):
            stack += [x.head, x.det, *x.adjs, x.pp, x.rc, *(x.coord or ())]
        elif isinstance(x, PP):
            stack += [x.prep, x.np]
        elif isinstance(x, Clause):
            stack += [x.that, x.adv, x.subj, x.neg, x.verb, x.obj, *x.pps, x.comp]
        elif isinstance(x, Sentence):
            stack += [*x.clauses, *x.conjs]
        if x is not None:
            yield x


def size(node: NP | PP | Clause | Sentence) -> int:
    """The number of English words `node` writes."""
    if isinstance(node, NP):
        inner = (node.det is not None) + len(node.adjs) + 1
        inner += (size(node.pp) if node.pp else 0) + (size(node.rc) if node.rc else 0)
        return inner + (1 + size(node.coord[1]) if node.coord else 0)
    if isinstance(node, PP):
        return 1 + size(node.np)
    if isinstance(node, Sentence):
        return sum(size(c) for c in node.clauses) + len(node.conjs)
    words = (node.that is not None) + (node.adv is not None) + (node.neg is not None)
    words += 1 + (node.verb.item.cat == "vp") + sum(size(p) for p in node.pps)
    return words + sum(size(x) for x in (node.subj, node.obj, node.comp) if x is not None)


def subject(clause: Clause, head: NP | None) -> Leaf | int:
    """The subject's agreement: its pronoun's leaf, or the AGR index of a noun subject (the
    head noun's for the gap of a relative clause); number is fixed by the derivation."""
    np = clause.subj
    if np is None:
        return 2 if head is None or head.number == "sg" else 5
    if np.head.item.cat == "pron":
        return np.head
    return 5 if np.coord or np.number == "pl" else 2


def english(sentence: Sentence) -> list[str]:
    """The English words of `sentence`; sets every leaf's `src`."""
    out: list[str] = []

    def put(leaf: Leaf, *words: str) -> None:
        leaf.src = tuple(range(len(out), len(out) + len(words)))
        out.extend(words)

    def np(n: NP) -> None:
        plural = n.number == "pl"
        if n.det:
            put(n.det, n.det.item.en[plural])
        for adj in n.adjs:
            put(adj, adj.item.en[0])
        put(n.head, n.head.item.en[plural if n.head.item.cat == "n" else 0])
        if n.pp:
            put(n.pp.prep, n.pp.prep.item.en[0])
            np(n.pp.np)
        if n.rc:
            clause(n.rc, n)
        if n.coord:
            put(n.coord[0], "and")
            np(n.coord[1])

    def clause(c: Clause, head: NP | None = None) -> None:
        for leaf in (c.that, c.adv):
            if leaf:
                put(leaf, leaf.item.en[0])
        if c.subj:
            np(c.subj)
        agr = subject(c, head)
        third = (int(agr.item.feat["agr"]) if isinstance(agr, Leaf) else agr) == 2
        verb = c.verb.item
        finite = verb.en[1] if third else verb.en[0]
        if c.neg:
            put(c.neg, c.neg.item.en[0 if third else 1])
            finite = verb.en[0] if c.neg.item.feat["do"] == "yes" else finite  # do-support
        put(c.verb, finite, *verb.en[2:])
        if c.obj:
            np(c.obj)
        for p in c.pps:
            put(p.prep, p.prep.item.en[0])
            np(p.np)
        if c.comp:
            clause(c.comp)

    for k, c in enumerate(sentence.clauses):
        if k:
            put(sentence.conjs[k - 1], sentence.conjs[k - 1].item.en[0])
        clause(c)
    vowel = [k + 1 < len(out) and out[k + 1][0] in "aeiou" for k in range(len(out))]
    return ["an" if w == "a" and vowel[k] else w for k, w in enumerate(out)]


# --- drawing derivations ----------------------------------------------------------------------
PRONOUN = 0.2  # the subject of a main or complement clause is a pronoun
PLURAL = 0.3  # a noun phrase is plural
BARE = 0.35  # a plural noun phrase has no determiner ("cats sleep")
VERB_KINDS = {"vi": 4.0, "vt": 5.0, "vp": 1.5}  # intransitive, transitive, phrasal
GAPS = ("subj", "obj")  # a relative clause misses its subject or its object, as often
STEPS = {"adj": 3.0, "np_pp": 1.5, "relative": 1.2, "vp_pp": 1.2, "and_np": 0.6}  # -> weight
STEPS |= {"and_clause": 0.6, "say": 0.8, "neg": 0.8, "adverb": 0.5}
OBJECT_GAP_VERBS = {"vt": VERB_KINDS["vt"], "vp": VERB_KINDS["vp"]}  # "the cat that dogs see"
Table = tuple[tuple[str, ...], tuple[float, ...]]  # keys and cumulative weights


def _table(weights: dict[str, float]) -> Table:
    return tuple(weights), tuple(accumulate(weights.values()))


_STEPS, _VERBS, _GAP_VERBS = _table(STEPS), _table(VERB_KINDS), _table(OBJECT_GAP_VERBS)


class Grower:
    """Draws derivations from `rng` (see the module docstring)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.nps: list[NP] = []  # the noun phrases with a noun head, which steps can grow
        self.clauses: list[Clause] = []

    def pick(self, cat: str, number: str = "") -> Leaf:
        found, weights = zipf(cat, number)
        return Leaf(found[bisect(weights, self.rng.random() * weights[-1])], number)

    def draw(self, table: Table) -> str:
        """A key of `table`, drawn in proportion to its weight."""
        keys, total = table
        return keys[bisect(total, self.rng.random() * total[-1])]

    def phrase(self, pronoun: bool = False) -> NP:
        """A noun phrase: a pronoun (if allowed), a bare plural or a determiner and a noun."""
        rng = self.rng
        if pronoun and rng.random() < PRONOUN:
            return NP(self.pick("pron"))
        number = "pl" if rng.random() < PLURAL else "sg"
        det = None if number == "pl" and rng.random() < BARE else self.pick("det", number)
        return NP(self.pick("n"), number, det)

    def clause(self, gap: str = "") -> Clause:
        """A clause; with `gap` "subj" or "obj", a relative clause missing that argument."""
        cat = self.draw(_GAP_VERBS if gap == "obj" else _VERBS)
        subj = None if gap == "subj" else self.phrase(pronoun=not gap)
        obj = self.phrase() if cat != "vi" and gap != "obj" else None
        return Clause(subj, self.pick(cat), obj, that=Leaf(items()["rel"][0]) if gap else None)

    def adopt(self, node: NP | PP | Clause | Sentence) -> int:
        """Let steps grow `node`'s phrases and clauses; returns its length in words."""
        for x in walk(node):
            if isinstance(x, NP) and x.head.item.cat == "n":
                self.nps.append(x)
            elif isinstance(x, Clause):
                self.clauses.append(x)
        return size(node)

    def grow(self, low: int, high: int) -> Sentence | None:
        """A sentence of `low`..`high` English words, or None when this draw missed."""
        target = self.rng.randint(low, high)
        sentence = Sentence([self.clause()])
        self.nps, self.clauses = [], []
        self.adopt(sentence)
        length, misses = size(sentence), 0
        while length < target and misses < 20:
            added = getattr(self, self.draw(_STEPS))(sentence, high - length)
            length, misses = length + added, 0 if added else misses + 1
        return sentence if low <= length <= high else None

    # The growth steps: each adds at most `room` words to `s` and returns how many (0: none).
    def adj(self, s: Sentence, room: int) -> int:
        np = self.rng.choice(self.nps) if self.nps else None
        if np is None or len(np.adjs) == 2 or room < 1:
            return 0
        np.adjs.insert(self.rng.randint(0, len(np.adjs)), self.pick("adj"))
        return 1

    def neg(self, s: Sentence, room: int) -> int:
        c = self.rng.choice(self.clauses)
        if c.neg or room < 1:
            return 0
        c.neg = self.pick("neg")
        return 1

    def adverb(self, s: Sentence, room: int) -> int:
        c = self.rng.choice(s.clauses)
        if c.adv or room < 1:
            return 0
        c.adv = self.pick("adv")
        return 1

    def np_pp(self, s: Sentence, room: int) -> int:
        np = self.rng.choice(self.nps) if self.nps else None
        if np is None or np.pp or size(new := PP(self.pick("p"), self.phrase())) > room:
            return 0
        np.pp = new
        return self.adopt(new)

    def vp_pp(self, s: Sentence, room: int) -> int:
        c = self.rng.choice(self.clauses)
        if len(c.pps) == 2 or size(new := PP(self.pick("p"), self.phrase())) > room:
            return 0
        c.pps.append(new)
        return self.adopt(new)

    def relative(self, s: Sentence, room: int) -> int:
        np = self.rng.choice(self.nps) if self.nps else None
        if np is None or np.rc or size(new := self.clause(self.rng.choice(GAPS))) > room:
            return 0
        np.rc = new
        return self.adopt(new)

    def and_np(self, s: Sentence, room: int) -> int:
        np = self.rng.choice(self.nps) if self.nps else None
        if np is None or np.coord or size(new := self.phrase()) + 1 > room:
            return 0
        np.coord = (Leaf(items()["and"][0]), new)
        return self.adopt(new) + 1

    def and_clause(self, s: Sentence, room: int) -> int:
        if size(new := self.clause()) + 1 > room:
            return 0
        s.clauses.append(new)
        s.conjs.append(self.pick("conj"))
        return self.adopt(new) + 1

    def say(self, s: Sentence, room: int) -> int:
        """ "X says that" before a main clause, which becomes a complement clause."""
        k = self.rng.randrange(len(s.clauses))
        inner = s.clauses[k]
        if size(subj := self.phrase(pronoun=True)) + 2 > room:
            return 0
        s.clauses[k] = Clause(subj, self.pick("vs"), comp=inner, adv=inner.adv)
        inner.adv, inner.that = None, Leaf(items()["comp"][0])  # the adverb stays in front
        self.clauses.append(s.clauses[k])
        return self.adopt(subj) + 2
