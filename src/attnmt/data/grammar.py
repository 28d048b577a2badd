"""The grammar lab: parallel sentences from a synchronous grammar, each with its exact word
alignment and the causes of every target word (as SCAN and COGS generate from a stated
grammar, so the right answer is known).

One English grammar (clauses with subjects, objects, negation, fronted adverbs, "X says that
...", coordination; noun phrases with determiners, adjectives, prepositional phrases and
relative clauses, recursively) is written into three made-up target languages, each named
after what it carries (docs/data.md has their rule tables, each row checked against generated
sentences by tests/test_grammar_docs.py):

    en-fr   adjectives after the noun (but a closed set: grand, petit, vieux, ...); gender and
            number agreement of determiners and adjectives; an article for the bare plural
            ("cats sleep" -> "les chats dorment"); don't V -> ne V pas; verbs agree with
            pronoun subjects.
    en-de   verb second (after a fronted adverb the verb comes before its subject); verb last
            in subordinate and relative clauses; separable verbs ("calls the cat" -> "ruft
            die katze an", "anruft" when last); case from the verb or preposition on
            determiners, adjectives (weak, mixed, strong endings), relative pronouns and
            the dative plural ("mit hunden").
    en-ja   subject-object-verb; markers wa/ga/o after noun phrases; postpositions; modifiers
            (prepositional phrases + no, relative clauses) before the noun; no articles;
            negation inside the verb form.

Every `GrammarPair` carries, besides its words:

- `sure` links (source index, target index): the target word writes that source word;
  `possible` links add words with no source counterpart to the phrase they belong to (the
  French article of a bare plural, the Japanese markers: to the noun(s) they mark; "no": to
  its postposition). S is a subset of P (Och & Ney). `crossings` names the sure links that
  cross another one: the reordered spans.
- `causes[j]`: the source positions whose substitution, by another item of the same slot
  (category, shape: `grammar_lexicon.shape`, and a determiner's number) with the derivation
  held fixed, changes target word j ("le" in "le grand chat" is caused by "the" and "cat":
  cat -> mouse gives "la"). Number, case and structure belong to the
  derivation; a word of a one-item slot ("that", "and") causes nothing. Computed from the
  derivation (each word reads the features it agrees with), and checked by `intervene`,
  which substitutes every item and watches which target words change.
- `prefix_causes[j]`: the earlier target words that change with an item j agrees with or is
  governed by, or that write j's own item (the verb before its separated particle).
- `phenomena[j]`: one of PHENOMENA.

For "cats don't sleep" (0 1 2) -> "les chats ne dorment pas" (0 1 2 3 4): sure 0-1 1-2 1-4
2-3, possible also 0-0 (les); causes les {0} (les/las: the noun's gender), chats {0}, ne {}
(the same for not and never), dorment {2}, pas {1} (pas/jamais). In en-de "katzen schlafen
nicht", in en-ja "neko wa nemuranai" (the verb form written by "don't" and "sleep").
The words live in `grammar_lexicon`, the trees and their English in `grammar_trees`, the
target rules in `grammar_rules`.

    pairs = generate("en-fr", 1000, seed=1, min_words=5, max_words=20)
    pair = pairs[0]
    " ".join(pair.src), " ".join(pair.tgt), format_pharaoh(pair.sure)  # data.alignments
    splits = make_splits("en-de", train_size=20000, seed=1)   # {"train", "dev", "test"}
    realize("en-ja", sentence(clause("the big cat", "sleep")))  # a derivation written by hand

Generation is seeded and deterministic; the English side does not depend on the pair, so the
three pairs of a seed share their sources. Dev and test never repeat a training source, nor
each other's. Lengths (English words) are drawn uniformly within [min_words, max_words],
and a word costs about the same time in a sentence of 5 words or of 80.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache

from attnmt.data.grammar_lexicon import PAIRS, VERBS, Item, items, shape, substitutes
from attnmt.data.grammar_rules import GrammarPair, realize, target_words
from attnmt.data.grammar_trees import NP, PP, Clause, Grower, Leaf, Sentence, english, walk
from attnmt.errors import UserError

__all__ = [
    "PHENOMENA",
    "check_causes",
    "clause",
    "crossings",
    "generate",
    "intervene",
    "lexicon",
    "make_splits",
    "phrase",
    "sentence",
]

PHENOMENA = (
    "plain",  # written in place from its own English word
    "agreement",  # its form also reads another word's features (gender, person, case)
    "reorder-adj",  # a French adjective after its noun
    "inserted-article",  # a French article no English word writes
    "ne-pas",  # the two French words of one English negation
    "merged",  # one word for two English words (a phrasal verb)
    "v2-inversion",  # a German verb before its subject, after a fronted adverb
    "verb-final",  # a verb sent to the end of its clause (German subordinate, Japanese)
    "separable",  # a German verb particle sent to the end of the main clause
    "postposition",  # a Japanese marker or postposition after its noun phrase
)
SHORTEST = 2  # "cats sleep", "he runs"


def _check_pair(pair: str) -> None:
    if pair not in PAIRS:
        raise UserError(f"unknown language pair {pair!r}; valid: {', '.join(PAIRS)}")


def lexicon(pair: str) -> dict[str, tuple[Item, ...]]:
    """The items of every category, most frequent first (`Item.target(pair)`: its forms)."""
    _check_pair(pair)
    return dict(items())


def generate(
    pair: str,
    n: int,
    *,
    seed: int,
    min_words: int = 1,
    max_words: int = 20,
    exclude: Collection[str] = frozenset(),
    distinct: bool = False,
    split: str = "train",
) -> list[GrammarPair]:
    """`n` sentence pairs of `pair` whose English has min_words..max_words words.

    Deterministic in (seed, split, min_words, max_words), and the same English for every
    pair. Sources in `exclude` (space-joined words) are drawn again; with `distinct`, so are
    repeats within the call.
    """
    _check_pair(pair)
    if n < 0:
        raise UserError(f"the number of sentences must be 0 or more, got {n}.")
    if min_words > max_words:
        raise UserError(
            f"min_words ({min_words}) is larger than max_words ({max_words}); "
            "give min_words <= max_words."
        )
    if max_words < SHORTEST:
        raise UserError(
            f"max_words={max_words} is too small: the shortest sentences of the grammar "
            f"('cats sleep') have {SHORTEST} words; give max_words >= {SHORTEST}."
        )
    low = max(min_words, SHORTEST)
    grower = Grower(random.Random(f"attnmt-grammar:{split}:{seed}:{low}:{max_words}"))
    taken, out, tries = set(exclude), [], 0
    while len(out) < n:
        tries += 1
        if tries > 200 * n + 1000:
            raise UserError(
                f"could not draw {n} sentences of {low}-{max_words} words outside the "
                f"{len(taken)} already taken in {tries - 1} tries; widen the length range or "
                "ask for fewer sentences."
            )
        derivation = grower.grow(low, max_words)
        if derivation is None:
            continue
        words = english(derivation)
        if (source := " ".join(words)) in taken:
            continue
        if distinct:
            taken.add(source)
        out.append(realize(pair, derivation, source=words))
    return out


def make_splits(
    pair: str,
    *,
    train_size: int,
    dev_size: int = 1000,
    test_size: int = 1000,
    seed: int = 1,
    words: tuple[int, int] = (1, 20),
    dev_words: tuple[int, int] | None = None,
    test_words: tuple[int, int] | None = None,
) -> dict[str, list[GrammarPair]]:
    """ "train", "dev" and "test" pairs, each split from its own seeded stream; dev and test
    sources are distinct and never in train (nor dev's in test). `dev_words` and
    `test_words` (default `words`) bound their lengths, e.g. a test split longer than
    anything in training, to see how a model fares with length."""
    train = generate(pair, train_size, seed=seed, min_words=words[0], max_words=words[1])
    seen = {" ".join(p.src) for p in train}
    splits = {"train": train}
    for name, size, bounds in (("dev", dev_size, dev_words), ("test", test_size, test_words)):
        low, high = bounds or words
        splits[name] = generate(
            pair, size, seed=seed, min_words=low, max_words=high, exclude=seen, distinct=True,
            split=name,
        )  # fmt: skip
        seen |= {" ".join(p.src) for p in splits[name]}
    return splits


def crossings(pair: GrammarPair) -> set[tuple[int, int]]:
    """The sure links that cross another sure link (i < i' and j > j')."""
    links = sorted(pair.sure)
    crossed = set()
    for a, (i, j) in enumerate(links):
        for k, m in links[a + 1 :]:
            if k != i and m < j:
                crossed |= {(i, j), (k, m)}
    return crossed


def intervene(
    pair: GrammarPair, *, limit: int | None = None, seed: int = 0
) -> tuple[frozenset[int], ...]:
    """The causes of each target word found by substitution: every leaf of the derivation
    takes each other item of its slot in turn (at most `limit`, drawn with `seed`), the
    target is written again, and the source positions of the leaf join the causes of every
    target word that changed. The derivation is restored afterwards."""
    rng = random.Random(seed)
    base, found = pair.tgt, [set() for _ in pair.tgt]
    for leaf in [x for x in walk(pair.derivation) if isinstance(x, Leaf)]:
        own = leaf.item
        slot = (own.cat, shape(pair.languages, own), leaf.number)
        others = [i for i in substitutes(pair.languages, *slot) if i is not own]
        if limit is not None and len(others) > limit:
            others = rng.sample(others, limit)
        try:
            for other in others:
                leaf.item = other
                words = target_words(pair.languages, pair.derivation, causes=False)
                changed = [w.form for w in words]
                if len(changed) != len(base):
                    raise AssertionError(f"{own!r} -> {other!r} changed the target's length")
                for j, (a, b) in enumerate(zip(base, changed, strict=True)):
                    if a != b:
                        found[j].update(leaf.src)
        finally:
            leaf.item = own
    return tuple(frozenset(f) for f in found)


@dataclass(frozen=True)
class Substitution:
    """One leaf of a pair's derivation given another item of its slot: the source positions
    it writes, and the whole English and target then written (the derivation held fixed)."""

    positions: tuple[int, ...]
    src: tuple[str, ...]
    tgt: tuple[str, ...]


def substitutions(pair: GrammarPair, *, seed: int = 0) -> list[Substitution]:
    """One same-slot substitution per leaf that has one (drawn with `seed`), keeping the
    English length (a verb of two words stands only for one of two): the interventions
    that define `causes`, one item each, for probing a model (does its own output change
    where the generator's does?) and for occluding a word by another of its kind instead of
    deleting it. Leaves in source order; the derivation is restored afterwards."""
    rng = random.Random(seed)
    leaves = sorted((x for x in walk(pair.derivation) if isinstance(x, Leaf)), key=lambda x: x.src)
    out = []
    for leaf in leaves:
        own, positions = leaf.item, leaf.src
        slot = (own.cat, shape(pair.languages, own), leaf.number)
        others = [i for i in substitutes(pair.languages, *slot) if i is not own]
        rng.shuffle(others)
        try:
            for other in others:
                leaf.item = other
                src = english(pair.derivation)
                if len(src) == len(pair.src):
                    tgt = [
                        w.form for w in target_words(pair.languages, pair.derivation, causes=False)
                    ]
                    out.append(Substitution(positions, tuple(src), tuple(tgt)))
                    break
        finally:
            leaf.item = own
            english(pair.derivation)  # the leaves' source positions as they were
    return out


def check_causes(pair: GrammarPair, *, limit: int | None = None, seed: int = 0) -> list[str]:
    """Where the recorded causes and `intervene` disagree, one line per target word (none
    when they agree). With `limit`, substitution may miss causes but never adds any."""
    found = intervene(pair, limit=limit, seed=seed)
    problems = []
    for j, (recorded, seen) in enumerate(zip(pair.causes, found, strict=True)):
        if recorded != seen and (limit is None or not seen <= recorded):
            problems.append(
                f"target word {j} {pair.tgt[j]!r}: recorded causes {sorted(recorded)}, "
                f"substitution finds {sorted(seen)} in {' '.join(pair.src)!r}"
            )
    return problems


# --- derivations by hand ----------------------------------------------------------------------
@cache
def _forms(cat: str) -> dict[str, Item]:
    """English form -> item ("cats" -> cat), or key -> item for verbs ("pick up")."""
    cats = VERBS if cat == "verb" else (cat,)
    found = {i.key: i for c in cats for i in items()[c]}
    if cat != "verb":
        found |= {form: i for i in items()[cat] for form in i.en if form}
    return found | ({"an": items()["det"][1]} if cat == "det" else {})


CATEGORIES = {"n": "noun", "adj": "adjective", "p": "preposition", "adv": "adverb"}
CATEGORIES |= {"verb": "verb", "neg": "negation", "conj": "conjunction"}


def _lookup(cat: str, english: str) -> Item:
    if english not in _forms(cat):
        raise UserError(
            f"{english!r} is not a {CATEGORIES[cat]} of the grammar's lexicon; "
            f"the {CATEGORIES[cat]}s are listed by lexicon(pair)"
        )
    return _forms(cat)[english]


def _np(value: NP | str) -> NP:
    return phrase(value) if isinstance(value, str) else value


def phrase(
    text: str,
    *,
    pp: tuple[str, NP | str] | None = None,
    rc: Clause | None = None,
    coord: NP | str | None = None,
) -> NP:
    """A noun phrase from its English words: "the big cat", "cats" (a bare plural), "she";
    `pp` ("on", "the mat"), a relative clause `rc` (a `clause` missing its subject or
    object), a next conjunct `coord`."""
    *mods, head = text.split()
    if not mods and head in _forms("pron"):
        return NP(Leaf(_forms("pron")[head]))
    noun = _lookup("n", head)
    number = "pl" if head == noun.en[1] else "sg"
    det = Leaf(_forms("det")[mods[0]], number) if mods and mods[0] in _forms("det") else None
    if (det is None and number == "sg") or (det and not det.item.en[number == "pl"]):
        raise UserError(f"{text!r} is not a noun phrase of the grammar (determiner, number)")
    np = NP(Leaf(noun), number, det, [Leaf(_lookup("adj", w)) for w in mods[det is not None :]])
    np.pp = PP(Leaf(_lookup("p", pp[0])), _np(pp[1])) if pp else None
    if rc:
        rc.that, np.rc = Leaf(items()["rel"][0]), rc
    np.coord = (Leaf(items()["and"][0]), _np(coord)) if coord else None
    return np


def clause(
    subject: NP | str | None,
    verb: str,
    obj: NP | str | None = None,
    *,
    pps: Sequence[tuple[str, NP | str]] = (),
    neg: str | None = None,
    adverb: str | None = None,
    comp: Clause | None = None,
) -> Clause:
    """A clause from English keys: `verb` "sleep", "pick up"; `neg` "not" or "never";
    `comp` the clause a saying verb ("say", "think") introduces."""
    c = Clause(None if subject is None else _np(subject), Leaf(_lookup("verb", verb)))
    c.obj = None if obj is None else _np(obj)
    c.pps = [PP(Leaf(_lookup("p", p)), _np(np)) for p, np in pps]
    c.neg = Leaf(_lookup("neg", neg)) if neg else None
    c.adv = Leaf(_lookup("adv", adverb)) if adverb else None
    if comp:
        comp.that, c.comp = Leaf(items()["comp"][0]), comp
    return c


def sentence(*clauses: Clause, conj: str = "and") -> Sentence:
    """Main clauses joined by `conj` ("and", "but", "or")."""
    return Sentence(list(clauses), [Leaf(_lookup("conj", conj)) for _ in clauses[1:]])
