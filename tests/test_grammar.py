"""The grammar lab: hand-worked derivations in each pair, and properties of generated pairs
(links, causes checked by substitution, agreement, word order, lengths, seeds, Zipf)."""

import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from attnmt.data.alignments import format_pharaoh, parse_pharaoh
from attnmt.data.grammar import (
    PHENOMENA,
    check_causes,
    clause,
    crossings,
    generate,
    lexicon,
    make_splits,
    phrase,
    sentence,
    substitutions,
)
from attnmt.data.grammar_lexicon import PAIRS
from attnmt.data.grammar_rules import realize
from attnmt.data.grammar_trees import NP, Clause, Grower, Leaf, size, walk
from attnmt.errors import UserError


def links(text: str) -> frozenset[tuple[int, int]]:
    return frozenset(parse_pharaoh(text))


def sets(*groups: tuple[int, ...]) -> tuple[frozenset[int], ...]:
    return tuple(frozenset(g) for g in groups)


@pytest.fixture(scope="module")
def corpora():
    return {pair: generate(pair, 300, seed=7, min_words=2, max_words=25) for pair in PAIRS}


# --- hand-worked sentences -------------------------------------------------------------------


def test_en_fr_adjective_before_and_after_the_noun():
    # A prenominal adjective stays in place; both it and the article agree with the noun.
    big = realize("en-fr", sentence(clause("the big cat", "sleep")))
    assert big.src == ("the", "big", "cat", "sleeps")
    assert big.tgt == ("le", "grand", "chat", "dort")
    assert big.sure == big.possible == links("0-0 1-1 2-2 3-3")
    assert big.causes == sets((0, 2), (1, 2), (2,), (3,))  # le: the + cat; grand: big + cat
    assert big.prefix_causes == sets((), (0,), (), ())  # grand's gender shows in "le"
    assert crossings(big) == set()
    # Most adjectives follow the noun: big<->adjective crosses cat<->noun.
    black = realize("en-fr", sentence(clause("the black cat", "sleep")))
    assert black.tgt == ("le", "chat", "noir", "dort")
    assert black.sure == links("0-0 1-2 2-1 3-3")
    assert black.causes == sets((0, 2), (2,), (1, 2), (3,))
    assert black.prefix_causes == sets((), (), (0, 1), ())
    assert black.phenomena == ("agreement", "plain", "reorder-adj", "plain")
    assert crossings(black) == {(1, 2), (2, 1)}


def test_en_fr_bare_plural_takes_an_article_linked_possible():
    pair = realize("en-fr", sentence(clause("cats", "sleep")))
    assert pair.tgt == ("les", "chats", "dorment")
    assert pair.sure == links("0-1 1-2")
    assert pair.possible == links("0-0 0-1 1-2")
    assert pair.causes == sets((0,), (0,), (1,))  # the article is the noun's (les / las)
    assert pair.phenomena[0] == "inserted-article"
    feminine = realize("en-fr", sentence(clause("mice", "sleep")))
    assert feminine.tgt[0] == "las"


def test_en_fr_negation_splits_and_the_verb_agrees_with_a_pronoun():
    pair = realize("en-fr", sentence(clause("she", "see", "the old white mice", neg="not")))
    assert " ".join(pair.src) == "she doesn't see the old white mice"
    assert " ".join(pair.tgt) == "elle ne voit pas las vieilles souris blanches"
    assert pair.sure == links("0-0 1-1 1-3 2-2 3-4 4-5 5-7 6-6")
    assert pair.causes == sets((0,), (), (0, 2), (1,), (3, 6), (4, 6), (6,), (5, 6))
    assert pair.prefix_causes[2] == {0}  # voit: person and number of "elle"
    assert pair.prefix_causes[7] == {4, 5, 6}  # blanches: the gender shown by las ... souris
    assert pair.phenomena[1] == pair.phenomena[3] == "ne-pas"
    # never: ne ... jamais; the pronoun decides the verb (il voit, nous voyons).
    we = realize("en-fr", sentence(clause("we", "see", "a cat", neg="never")))
    assert " ".join(we.tgt) == "nous ne voyons jamais un chat"


def test_en_de_verb_second_after_a_fronted_adverb():
    pair = realize("en-de", sentence(clause("the dog", "see", "the cat", adverb="today")))
    assert pair.tgt == ("heute", "sieht", "der", "hund", "die", "katze")
    assert pair.sure == links("0-0 1-2 2-3 3-1 4-4 5-5")
    assert pair.phenomena[1] == "v2-inversion"
    # die: the, cat's gender, and the case "see" gives its object
    assert pair.causes == sets((0,), (3,), (1, 2), (2,), (3, 4, 5), (5,))
    assert crossings(pair) == {(1, 2), (2, 3), (3, 1)}


def test_en_de_separable_verb_goes_to_the_end_and_joins_when_subordinate():
    main = realize("en-de", sentence(clause("the dog", "call", "the cat", neg="not")))
    assert " ".join(main.tgt) == "der hund ruft die katze nicht an"
    assert main.sure == links("0-0 1-1 2-5 3-2 3-6 4-3 5-4")
    assert main.phenomena[-1] == "separable"
    assert main.causes[-1] == {3} and main.prefix_causes[-1] == {2}  # an: read off "ruft"
    phrasal = realize("en-de", sentence(clause("the dog", "pick up", "the ball")))
    assert " ".join(phrasal.tgt) == "der hund hebt den ball auf"
    assert phrasal.sure == links("0-0 1-1 2-2 3-5 4-3 5-4")  # hebt<->picks, auf<->up
    sub = clause("the cat", "call", "a big dog", neg="not")
    pair = realize("en-de", sentence(clause("the dog", "say", comp=sub)))
    assert " ".join(pair.tgt) == "der hund sagt dass die katze einen grossen hund nicht anruft"
    assert pair.sure == links("0-0 1-1 2-2 3-3 4-4 5-5 6-9 7-10 8-6 9-7 10-8")
    assert pair.phenomena[-1] == "verb-final"
    # einen: a, dog (gender), and call (the case of its object), the verb written last
    assert pair.causes[6] == {7, 8, 10} and pair.causes[7] == {9, 10}
    assert pair.prefix_causes[7] == {6}  # grossen: the ending "einen" asks for


def test_en_de_relative_pronoun_takes_gender_from_the_noun_and_case_from_the_verb():
    rc = phrase("the woman", rc=clause("the man", "see"))
    pair = realize("en-de", sentence(clause("i", "help", rc, pps=[("with", "a small dog")])))
    words = "ich helfe der frau die der mann sieht mit einem kleinen hund"
    assert " ".join(pair.tgt) == words
    assert pair.causes[2] == {1, 2, 3}  # der (dative): help, the, woman
    assert pair.causes[4] == {3, 7}  # die: woman's gender, the accusative of "sees"
    assert pair.causes[9] == {8, 9, 11}  # einem: with (dative), a, dog
    assert pair.phenomena[7] == "verb-final"


def test_en_ja_is_verb_final_with_markers_linked_possible():
    pair = realize("en-ja", sentence(clause("the dog", "see", "the cat")))
    assert pair.tgt == ("inu", "wa", "neko", "o", "miru")
    assert pair.sure == links("1-0 2-4 4-2")  # the articles have no Japanese word
    assert pair.possible == pair.sure | links("1-1 4-3")  # wa -> dog, o -> cat
    assert pair.causes == sets((1,), (), (4,), (), (2,))
    assert pair.phenomena == ("plain", "postposition", "plain", "postposition", "verb-final")


def test_en_ja_reorders_the_whole_sentence():
    comp = clause("the cat", "sleep", pps=[("on", "the mat")])
    pair = realize("en-ja", sentence(clause("the dog", "say", comp=comp)))
    assert " ".join(pair.tgt) == "inu wa neko ga matto ueni nemuru to iu"
    assert pair.sure == links("1-0 2-8 3-7 5-2 6-6 7-5 9-4")
    # a relative clause goes before its noun; negation is a form of the verb
    subject = phrase("the cat", rc=clause(None, "eat", "the apple"))
    pair = realize("en-ja", sentence(clause(subject, "sleep", neg="not")))
    assert " ".join(pair.src) == "the cat that eats the apple doesn't sleep"
    assert " ".join(pair.tgt) == "ringo o taberu neko wa nemuranai"
    assert pair.sure == links("1-3 3-2 5-0 6-5 7-5")
    mat = phrase("the cat", pp=("on", "the mat"))
    pair = realize("en-ja", sentence(clause("the girl", "see", mat, neg="never")))
    assert " ".join(pair.tgt) == "shoujo wa matto ueni no neko o kesshite minai"


# --- properties of generated pairs -----------------------------------------------------------


def test_links_are_in_range_and_every_target_word_is_linked(corpora):
    for pairs in corpora.values():
        for p in pairs:
            n, m = len(p.src), len(p.tgt)
            assert p.sure <= p.possible
            assert all(0 <= i < n and 0 <= j < m for i, j in p.possible)
            assert {j for _, j in p.possible} == set(range(m))
            assert len(p.causes) == len(p.prefix_causes) == len(p.phenomena) == m
            assert all(c <= set(range(n)) for c in p.causes)
            assert set(p.phenomena) <= set(PHENOMENA)
            assert parse_pharaoh(format_pharaoh(p.sure)) == p.sure
            assert all(re.fullmatch(r"[a-z']+", w) for w in p.src + p.tgt)
            assert size(p.derivation) == n
            for j, (causes, prefix) in enumerate(zip(p.causes, p.prefix_causes, strict=True)):
                assert all(k < j and p.causes[k] & causes for k in prefix)
            inserted = {j for _, j in p.possible} - {j for _, j in p.sure}
            assert all(p.phenomena[j] in ("inserted-article", "postposition") for j in inserted)


@pytest.mark.parametrize("pair", PAIRS)
def test_recorded_causes_equal_substitution(corpora, pair):
    short = [p for p in corpora[pair] if len(p.src) <= 10][:12]
    for p in short:  # every substitute of every slot
        assert check_causes(p) == []
    for p in corpora[pair][:120]:  # a few substitutes per slot: never a cause not recorded
        assert check_causes(p, limit=3, seed=1) == []


def test_a_substitution_is_one_intervention_of_the_causes():
    pair = realize("en-fr", sentence(clause("the red cat", "see", "a white mouse")))
    subs = {s.positions: s for s in substitutions(pair, seed=1)}
    assert sorted(subs) == [(i,) for i in range(7)]  # every word here has others of its kind
    for positions, sub in subs.items():
        (i,) = positions
        assert len(sub.src) == len(pair.src) and len(sub.tgt) == len(pair.tgt)
        assert [k for k, (a, b) in enumerate(zip(pair.src, sub.src, strict=True)) if a != b] == [i]
        changed = {j for j, (a, b) in enumerate(zip(pair.tgt, sub.tgt, strict=True)) if a != b}
        assert changed <= {j for j, c in enumerate(pair.causes) if i in c}  # only where it causes
    # the derivation is restored: the same pair written again, the same positions
    again = substitutions(pair, seed=1)
    assert again == list(subs.values()) and pair == realize("en-fr", pair.derivation)


@pytest.mark.parametrize("pair", PAIRS)
def test_substitutions_keep_the_english_length_and_stay_within_the_causes(corpora, pair):
    for p in corpora[pair][:60]:
        for sub in substitutions(p, seed=3):
            assert len(sub.src) == len(p.src) and len(sub.tgt) == len(p.tgt)
            moved = {j for j, (a, b) in enumerate(zip(p.tgt, sub.tgt, strict=True)) if a != b}
            assert all(set(sub.positions) & p.causes[j] for j in moved)


def test_en_fr_determiners_and_adjectives_agree_with_their_noun(corpora):
    checked = 0
    for p in corpora["en-fr"]:
        at = {i: j for i, j in p.sure}  # source position -> a target position
        for np in (x for x in walk(p.derivation) if isinstance(x, NP)):
            noun = np.head.item
            if noun.cat != "n":
                continue
            index = 2 * (np.number == "pl") + (noun.feat["fr.gender"] == "f")
            for leaf in [np.det, *np.adjs] if np.det else np.adjs:
                assert p.tgt[at[leaf.src[0]]] == leaf.item.fr[index]
                checked += 1
            if np.det is None:  # the article of a bare plural: "the", linked possible
                noun_at = np.head.src[0]
                (j,) = {j for i, j in p.possible - p.sure if i == noun_at}
                assert p.tgt[j] == lexicon("en-fr")["det"][0].fr[index] and j < at[noun_at]
    assert checked > 500


def test_en_ja_verbs_come_last_and_en_de_subordinate_verbs_end_their_clause(corpora):
    for p in corpora["en-ja"]:
        assert p.phenomena[-1] == "verb-final"
        assert (p.derivation.clauses[-1].verb.src[0], len(p.tgt) - 1) in p.sure
    subordinate = 0
    for p in corpora["en-de"]:
        for c in (x for x in walk(p.derivation) if isinstance(x, Clause)):
            if c.that is None or c.comp is not None:  # a main clause, or one with a tail
                continue
            span = {i for leaf in walk(c) if isinstance(leaf, Leaf) for i in leaf.src}
            words = {j for i, j in p.sure if i in span}
            verb = {j for i, j in p.sure if i in c.verb.src}
            assert verb == {max(words)} and p.phenomena[max(words)] == "verb-final"
            subordinate += 1
    assert subordinate > 50


def test_seeds_decide_the_corpus():
    a = generate("en-de", 50, seed=3, max_words=30)
    b = generate("en-de", 50, seed=3, max_words=30)
    assert [(p.src, p.tgt, p.sure, p.possible, p.causes, p.prefix_causes) for p in a] == [
        (p.src, p.tgt, p.sure, p.possible, p.causes, p.prefix_causes) for p in b
    ]
    assert [p.src for p in generate("en-de", 50, seed=4, max_words=30)] != [p.src for p in a]
    # the three pairs of a seed share their English
    assert [p.src for p in generate("en-ja", 50, seed=3, max_words=30)] == [p.src for p in a]


def test_the_corpus_is_the_same_in_another_process():
    """Nothing depends on Python's per-process string hashing."""
    code = (
        "from attnmt.data.grammar import generate\n"
        "for p in generate('en-de', 40, seed=5):\n"
        "    print(p.tgt, sorted(p.possible), [sorted(c) for c in p.causes])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    here = [
        f"{p.tgt} {sorted(p.possible)} {[sorted(c) for c in p.causes]}"
        for p in generate("en-de", 40, seed=5)
    ]
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == here


def test_lengths_stay_in_range_and_long_sentences_come_quickly():
    short = generate("en-fr", 200, seed=1, min_words=5, max_words=9)
    assert {len(p.src) for p in short} == set(range(5, 10))
    long = generate("en-ja", 10, seed=1, min_words=50, max_words=80)
    assert all(50 <= len(p.src) <= 80 for p in long)
    two = generate("en-de", 20, seed=1, min_words=1, max_words=2)
    assert {len(p.src) for p in two} == {2}


def test_items_come_with_zipf_frequencies(corpora):
    nouns = Counter(
        leaf.item.key
        for p in corpora["en-fr"]
        for leaf in walk(p.derivation)
        if isinstance(leaf, Leaf) and leaf.item.cat == "n"
    )
    ranked = lexicon("en-fr")["n"]
    median = nouns[ranked[len(ranked) // 2].key]
    assert nouns[ranked[0].key] > 10 * max(median, 1)
    assert len(nouns) > 60  # a long tail of rare nouns appears


def test_splits_are_disjoint():
    splits = make_splits("en-fr", train_size=300, dev_size=100, test_size=100, words=(2, 6))
    sources = {name: [" ".join(p.src) for p in pairs] for name, pairs in splits.items()}
    assert [len(sources[s]) for s in ("train", "dev", "test")] == [300, 100, 100]
    assert not set(sources["dev"]) & set(sources["train"])
    assert not set(sources["test"]) & (set(sources["train"]) | set(sources["dev"]))
    assert len(set(sources["dev"])) == 100 and len(set(sources["test"])) == 100
    example = splits["dev"][0].example("dev:0")
    assert example.src == sources["dev"][0] and example.id == "dev:0"


def test_the_lexicon_is_there_to_read():
    # the rules are docs/data.md's tables, checked row by row in tests/test_grammar_docs.py
    words = lexicon("en-de")
    assert sum(len(group) for group in words.values()) > 300
    assert len(words["n"]) >= 100 and {i.feat["de.gender"] for i in words["n"]} == {"m", "f", "n"}


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: generate("en-es", 1, seed=1), r"unknown language pair 'en-es'; valid: en-fr"),
        (lambda: generate("en-fr", 1, seed=1, min_words=9, max_words=3), "min_words"),
        (lambda: generate("en-fr", 1, seed=1, max_words=1), "max_words=1 is too small"),
        (lambda: lexicon("fr"), "unknown language pair"),
        (lambda: phrase("the big zebra"), "'zebra' is not a noun"),
        (lambda: phrase("a cats"), "not a noun phrase"),
    ],
)
def test_bad_input_is_a_user_error(call, match):
    with pytest.raises(UserError, match=match):
        call()


def test_a_range_that_cannot_be_filled_is_a_user_error(monkeypatch):
    monkeypatch.setattr(Grower, "grow", lambda self, low, high: None)
    with pytest.raises(UserError, match="could not draw 2 sentences of 3-4 words"):
        generate("en-fr", 2, seed=1, min_words=3, max_words=4)
