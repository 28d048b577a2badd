"""The rules that write a derivation of the grammar lab (`attnmt.data.grammar_trees`) in
the target language of each pair: the paradigms (functions that write one word), a writer
per language, and `realize`, which makes the `GrammarPair`.

Every target word is written by a paradigm from what it reads: constants the derivation
fixes (number, the nominative of a subject) and `Read`s of items (a noun's gender, the case
a preposition or verb governs, the word's own lemma). That is how agreement flows: a French
adjective reads its noun's gender, a German determiner the case its preposition or verb
governs. A word's causes are the leaves it reads whose substitutes (`grammar_lexicon.
substitutes`: other items of the same slot) change it: `Writer.emit` evaluates the paradigm
again on every value the substitutes give what it reads. `grammar.intervene` checks this
by writing whole sentences again with each substitute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from attnmt.data.grammar_lexicon import Item, items, shape, values
from attnmt.data.grammar_trees import NP, PP, Clause, Leaf, Sentence, english, subject
from attnmt.data.types import Example

# --- paradigms: the functions that write a target word ----------------------------------------
# German endings by case and slot (m, f, n, plural): the article, der-words (also the strong
# adjective endings), ein-words, weak and mixed adjectives, the relative pronoun.
_ENDINGS = {
    "art": ("der die das die", "den die das die", "dem der dem den"),
    "der": ("er e es e", "en e es e", "em er em en"),
    "ein": ("_ e _ e", "en e _ e", "em er em en"),
    "weak": ("e e e en", "en e e en", "en en en en"),
    "mixed": ("er e es en", "en e es en", "en en en en"),
    "rel": ("der die das die", "den die das die", "dem der dem denen"),
}
_ENDINGS["strong"] = _ENDINGS["der"]
CASES = ("nom", "acc", "dat")
ENDINGS = {
    name: {case: row.replace("_", "").split(" ") for case, row in zip(CASES, rows, strict=True)}
    for name, rows in _ENDINGS.items()
}
SLOT = {"m": 0, "f": 1, "n": 2}


def word(item: Item, lang: str, index: int = 0) -> str:
    """Form `index` of an item in `lang` (a verb's index is its AGR)."""
    return getattr(item, lang)[index]


def fr_agree(item: Item, gender: str, number: str) -> str:
    """A French determiner or adjective agreeing with its noun's gender and number."""
    return item.fr[2 * (number == "pl") + (gender == "f")]


def de_det(item: Item, gender: str, number: str, case: str) -> str:
    table = item.feat["de.table"]
    if table == "inv":
        return item.de[0]
    ending = ENDINGS[table][case][3 if number == "pl" else SLOT[gender]]
    return ending if table == "art" else item.de[0] + ending


def de_adj(item: Item, decl: str, gender: str, number: str, case: str) -> str:
    """A German adjective with the weak, mixed or strong ending its determiner calls for."""
    return item.de[0] + ENDINGS[decl][case][3 if number == "pl" else SLOT[gender]]


def de_noun(item: Item, number: str, case: str) -> str:
    """A German noun; the dative plural adds -n where the plural does not end in n or s."""
    form = item.de[number == "pl"]
    return form + "n" if number == "pl" and case == "dat" and form[-1] not in "ns" else form


def de_rel(gender: str, number: str, case: str) -> str:
    return ENDINGS["rel"][case][3 if number == "pl" else SLOT[gender]]


def de_verb(item: Item, agr: int, part: str) -> str:
    """A German verb's finite form ("stem"), its "particle", or both "joined" (verb-final)."""
    particle = item.feat["de.particle"]
    if part == "particle":
        return particle
    return particle + item.de[agr] if part == "joined" else item.de[agr]


def ja_verb(item: Item, neg: Item | None) -> str:
    return item.ja[neg is not None]


def ident(item: Item) -> Item:
    """What a word reads of its own item: all of it (the lemma)."""
    return item


_READERS: dict[str, Callable[[Item], object]] = {}


def feature(name: str) -> Callable[[Item], object]:
    """The reader of feature `name` of an item (the same function each time, for caches)."""
    if name not in _READERS:
        _READERS[name] = lambda item: int(item.feat[name]) if name == "agr" else item.feat[name]
    return _READERS[name]


# --- target words -----------------------------------------------------------------------------
class Read:
    """An input of a target word: the item in `leaf`, seen through `reader`."""

    __slots__ = ("leaf", "reader")

    def __init__(self, leaf: Leaf, reader: Callable[[Item], object] = ident):
        self.leaf, self.reader = leaf, reader


class Word:
    """A target word: its form, links (leaves, or (leaf, k) for the k-th word of a leaf),
    the leaves that cause it, and the phenomenon it shows."""

    __slots__ = ("causes", "form", "phenomenon", "possible", "sure")

    def __init__(self, form: str, sure: Sequence, possible: Sequence, causes: list, phen: str):
        self.form, self.sure, self.possible, self.causes = form, sure, possible, causes
        self.phenomenon = phen


_VARIES: dict[tuple, bool] = {}  # (paradigm, input, slot, the other inputs) -> changes?
_OPTIONS: dict[tuple, tuple] = {}  # (pair, item, number, reader) -> its slot, the values
_PLAIN: dict[tuple, bool] = {}  # (pair, item, number, lang, index) -> a cause of its word?


class Writer:
    """Writes a derivation in one target language; `clause` is each language's own."""

    lang = ""

    def __init__(self, pair: str, causes: bool = True):
        self.pair, self.causes = pair, causes

    def emit(
        self,
        paradigm: Callable[..., str],
        *args: object,
        sure: Sequence = (),
        possible: Sequence = (),
        phen: str = "plain",
    ) -> Word:
        """The word `paradigm(*inputs)` writes; a `Read` input is a cause if a substitute of
        its leaf changes the word. A word reading another item than its own (its sure
        leaves) shows "agreement" unless `phen` names something else."""
        vals = [a.reader(a.leaf.item) if type(a) is Read else a for a in args]
        causes = []
        if self.causes:
            for k, a in enumerate(args):
                if type(a) is Read and self._varies(paradigm, vals, k, a):
                    causes.append(a.leaf)
        if phen == "plain" and causes:
            own = [s if type(s) is Leaf else s[0] for s in sure]
            phen = "agreement" if any(leaf not in own for leaf in causes) else phen
        return Word(paradigm(*vals), sure, possible, causes, phen)

    def _varies(self, paradigm: Callable[..., str], vals: list, k: int, read: Read) -> bool:
        reader, leaf = read.reader, read.leaf
        key = (self.pair, leaf.item, leaf.number, reader)
        if key not in _OPTIONS:
            slot = (leaf.item.cat, shape(self.pair, leaf.item), leaf.number)
            _OPTIONS[key] = slot, values(self.pair, slot, reader)
        slot, options = _OPTIONS[key]
        if len(options) < 2:
            return False
        key = (paradigm, k, self.pair, slot, reader, *vals[:k], *vals[k + 1 :])
        if key not in _VARIES:
            forms = {paradigm(*vals[:k], option, *vals[k + 1 :]) for option in options}
            _VARIES[key] = len(forms) > 1
        return _VARIES[key]

    def plain(self, leaf: Leaf, index: int = 0, phen: str = "plain") -> Word:
        """Form `index` of an item, linked to it: `emit(word, Read(leaf), lang, index)`,
        with its one question (does a substitute write another word?) remembered."""
        item = leaf.item
        key = (self.pair, item, leaf.number, self.lang, index)
        if key not in _PLAIN:
            _PLAIN[key] = self._varies(word, [item, self.lang, index], 0, Read(leaf))
        causes = [leaf] if self.causes and _PLAIN[key] else []
        return Word(getattr(item, self.lang)[index], (leaf,), (), causes, phen)

    def const(self, form: str, *, sure: Sequence = (), possible: Sequence = (), phen: str) -> Word:
        return Word(form, sure, possible, [], phen)

    def agreement(self, clause: Clause, head: NP | None) -> Read | int:
        agr = subject(clause, head)
        return Read(agr, feature("agr")) if isinstance(agr, Leaf) else agr

    def sentence(self, s: Sentence) -> list[Word]:
        out = self.clause(s.clauses[0], "main")
        for conj, c in zip(s.conjs, s.clauses[1:], strict=True):
            out += [self.plain(conj), *self.clause(c, "main")]
        return out

    def clause(self, c: Clause, kind: str, head: NP | None = None) -> list[Word]:
        raise NotImplementedError


class French(Writer):
    lang = "fr"

    def np(self, n: NP) -> list[Word]:
        h, num = n.head, n.number
        if h.item.cat == "pron":
            out = [self.plain(h)]
        else:
            gender = Read(h, feature("fr.gender"))
            if n.det:
                out = [self.emit(fr_agree, Read(n.det), gender, num, sure=(n.det,))]
            else:  # a bare plural takes the definite article, which no English word writes
                the, phen = items()["det"][0], "inserted-article"
                out = [self.emit(fr_agree, the, gender, num, possible=(h,), phen=phen)]
            pre = [a for a in n.adjs if a.item.feat["fr.place"] == "pre"]
            post = [a for a in reversed(n.adjs) if a.item.feat["fr.place"] == "post"]  # mirrored
            out += [self.emit(fr_agree, Read(a), gender, num, sure=(a,)) for a in pre]
            out.append(self.plain(h, num == "pl"))
            for a in post:
                out.append(self.emit(fr_agree, Read(a), gender, num, sure=(a,), phen="reorder-adj"))
            out += [self.plain(n.pp.prep), *self.np(n.pp.np)] if n.pp else []
            out += self.clause(n.rc, "rel", n) if n.rc else []
        return out + ([self.plain(n.coord[0]), *self.np(n.coord[1])] if n.coord else [])

    def clause(self, c: Clause, kind: str, head: NP | None = None) -> list[Word]:
        out = [self.plain(c.that, kind == "rel" and c.subj is not None)] if c.that else []
        out += [self.plain(c.adv)] if c.adv else []
        out += self.np(c.subj) if c.subj else []
        phen = "merged" if c.verb.item.cat == "vp" else "plain"
        agr = self.agreement(c, head)
        if isinstance(agr, int):
            verb = self.plain(c.verb, agr, phen)
        else:  # the form reads the pronoun's person and number
            verb = self.emit(word, Read(c.verb), "fr", agr, sure=(c.verb,), phen=phen)
        if c.neg:  # ne V pas: one English word, two French ones around the verb
            ne = self.const("ne", sure=(c.neg,), phen="ne-pas")
            out += [ne, verb, self.plain(c.neg, 1, phen="ne-pas")]
        else:
            out.append(verb)
        out += self.np(c.obj) if c.obj else []
        for p in c.pps:
            out += [self.plain(p.prep), *self.np(p.np)]
        return out + (self.clause(c.comp, "comp") if c.comp else [])


class German(Writer):
    lang = "de"

    def np(self, n: NP, case: str | Read) -> list[Word]:
        h, num = n.head, n.number
        if h.item.cat == "pron":
            out = [self.plain(h)]
        else:
            gender, decl = Read(h, feature("de.gender")), "strong"
            out = []
            if n.det:
                out.append(self.emit(de_det, Read(n.det), gender, num, case, sure=(n.det,)))
                decl = Read(n.det, feature("de.decl"))
            for a in n.adjs:
                out.append(self.emit(de_adj, Read(a), decl, gender, num, case, sure=(a,)))
            out.append(self.emit(de_noun, Read(h), num, case, sure=(h,)))
            out += self.pp(n.pp) if n.pp else []
            out += self.clause(n.rc, "rel", n) if n.rc else []
        return out + ([self.plain(n.coord[0]), *self.np(n.coord[1], case)] if n.coord else [])

    def pp(self, p: PP) -> list[Word]:
        return [self.plain(p.prep), *self.np(p.np, Read(p.prep, feature("de.case")))]

    def clause(self, c: Clause, kind: str, head: NP | None = None) -> list[Word]:
        v, agr = c.verb, self.agreement(c, head)
        objcase = Read(v, feature("de.case"))
        sep, phrasal = bool(v.item.feat["de.particle"]), v.item.cat == "vp"
        out = [self.plain(c.that)] if kind == "comp" else []
        if kind == "rel" and head:  # der/die/das: the head noun's gender, the gap's case
            case = "nom" if c.subj is None else objcase
            gender = Read(head.head, feature("de.gender"))
            out.append(self.emit(de_rel, gender, head.number, case, sure=(c.that,)))
        subj = self.np(c.subj, "nom") if c.subj else []
        rest = self.np(c.obj, objcase) if c.obj else []
        for p in c.pps:
            rest += self.pp(p)
        rest += [self.plain(c.neg)] if c.neg else []
        if kind != "main":  # verb last, its particle joined to it
            verb = self.emit(de_verb, Read(v), agr, "joined", sure=(v,), phen="verb-final")
            out += [*subj, *rest, verb]
        else:  # verb second: after the subject, or before it after a fronted adverb
            phen = "v2-inversion" if c.adv else "merged" if phrasal and not sep else "plain"
            sure = ((v, 0),) if sep and phrasal else (v,)
            verb = self.emit(de_verb, Read(v), agr, "stem", sure=sure, phen=phen)
            out += [self.plain(c.adv), verb, *subj] if c.adv else [*subj, verb]
            out += rest
            if sep:  # the particle goes to the end of the clause
                sure = ((v, 1),) if phrasal else (v,)
                out.append(self.emit(de_verb, Read(v), 0, "particle", sure=sure, phen="separable"))
        return out + (self.clause(c.comp, "comp") if c.comp else [])


class Japanese(Writer):
    lang = "ja"

    def np(self, n: NP) -> list[Word]:
        out: list[Word] = []
        if n.head.item.cat != "pron":
            if n.pp:  # the cat on the mat -> matto ueni no neko
                prep = n.pp.prep
                no = self.const("no", possible=(prep,), phen="postposition")
                out += [*self.np(n.pp.np), self.plain(prep, phen="postposition"), no]
            out += self.clause(n.rc, "rel", n) if n.rc else []
            out += [self.plain(n.det)] if n.det and n.det.item.ja[0] else []
            out += [self.plain(a) for a in n.adjs]
        out.append(self.plain(n.head))
        return out + ([self.plain(n.coord[0]), *self.np(n.coord[1])] if n.coord else [])

    def marked(self, n: NP, marker: str) -> list[Word]:
        """A noun phrase and its case or topic marker, possibly linked to its head nouns."""
        heads, m = [], n
        while m:
            heads.append(m.head)
            m = m.coord[1] if m.coord else None
        return [*self.np(n), self.const(marker, possible=heads, phen="postposition")]

    def clause(self, c: Clause, kind: str, head: NP | None = None) -> list[Word]:
        out = [self.plain(c.adv)] if c.adv else []
        out += self.marked(c.subj, "wa" if kind == "main" else "ga") if c.subj else []
        for p in c.pps:
            out += [*self.np(p.np), self.plain(p.prep, phen="postposition")]
        out += self.marked(c.obj, "o") if c.obj else []
        out += [*self.clause(c.comp, "comp"), self.plain(c.comp.that)] if c.comp else []
        neg = c.neg
        out += [self.plain(neg)] if neg and neg.item.ja[0] else []  # kesshite (never)
        sure = (c.verb, neg) if neg else (c.verb,)
        negated = Read(neg) if neg else None
        return [*out, self.emit(ja_verb, Read(c.verb), negated, sure=sure, phen="verb-final")]


WRITERS: dict[str, type[Writer]] = {"en-fr": French, "en-de": German, "en-ja": Japanese}


# --- the pair ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class GrammarPair:
    """One generated sentence pair with its gold links and causes.

    Fields:
        languages: the language pair, e.g. "en-fr".
        src, tgt: the words.
        sure, possible: (source index, target index) links; `possible` includes `sure`.
        causes: per target word, the source positions whose substitution changes it.
        prefix_causes: per target word, the earlier target words that change with one of
            its causes (from which the features it agrees with can be read).
        phenomena: per target word, what it shows ("plain", "agreement", ...).
        derivation: the tree it was written from.
    """

    languages: str
    src: tuple[str, ...]
    tgt: tuple[str, ...]
    sure: frozenset[tuple[int, int]]
    possible: frozenset[tuple[int, int]]
    causes: tuple[frozenset[int], ...]
    prefix_causes: tuple[frozenset[int], ...]
    phenomena: tuple[str, ...]
    derivation: Sentence = field(compare=False, repr=False)

    def example(self, id: str = "") -> Example:
        """The pair as a data `Example` (text only)."""
        return Example(" ".join(self.src), " ".join(self.tgt), id=id)


NONE: frozenset[int] = frozenset()


def target_words(pair: str, sentence: Sentence, *, causes: bool = True) -> list[Word]:
    """The target words of `sentence` (after `english` has placed its leaves)."""
    return WRITERS[pair](pair, causes).sentence(sentence)


def realize(pair: str, sentence: Sentence, *, source: list[str] | None = None) -> GrammarPair:
    """Write `sentence` in English (unless `english(sentence)` gave `source`) and in the
    target language of `pair`."""
    src = english(sentence) if source is None else source
    words = target_words(pair, sentence)
    sure: list[tuple[int, int]] = []
    possible: list[tuple[int, int]] = []
    causes: list[frozenset[int]] = []
    prefix: list[frozenset[int]] = []
    seen: dict[Leaf, list[int]] = {}  # leaf -> the words it causes so far
    wrote: dict[Leaf, list[int]] = {}  # leaf -> the words written from it that it causes
    for j, w in enumerate(words):
        own = []
        for link in w.sure:
            if type(link) is Leaf:
                own.append(link)
                sure += [(i, j) for i in link.src]
            else:  # the k-th word of a leaf
                own.append(link[0])
                sure.append((link[0].src[link[1]], j))
        for leaf in w.possible:
            possible += [(i, j) for i in leaf.src]
        if not w.causes:
            causes.append(NONE)
            prefix.append(NONE)
            continue
        found, positions = [], []
        for leaf in w.causes:
            found += (wrote if leaf in own else seen).get(leaf, ())
            positions += leaf.src
            seen.setdefault(leaf, []).append(j)
            if leaf in own:
                wrote.setdefault(leaf, []).append(j)
        causes.append(frozenset(positions))
        prefix.append(frozenset(found))
    return GrammarPair(
        pair,
        tuple(src),
        tuple(w.form for w in words),
        frozenset(sure),
        frozenset(sure + possible),
        tuple(causes),
        tuple(prefix),
        tuple(w.phenomenon for w in words),
        sentence,
    )
