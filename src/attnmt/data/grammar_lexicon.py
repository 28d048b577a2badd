"""The words of the grammar lab (`attnmt.data.grammar`): English items with their
French-, German- and Japanese-like forms (made by each language's regular morphology where a
table gives a stem), their features and frequency ranks, and which items may stand in for
each other (`substitutes`).

An `Item` is one lexical choice of a derivation ("cat", "pick up", "the"). Its forms:

    n        en (sg, pl)   fr (sg, pl)   de (sg, pl)   ja (form,)   fr.gender m/f, de.gender m/f/n
    adj      en (form,)    fr (m.sg, f.sg, m.pl, f.pl)   de (stem,)   fr.place pre/post
    vi vt vp vs  en (base, 3sg[, particle])   fr, de: six forms, one per AGR   ja (plain,
             negative)   de.particle (a separable verb's), de.case (its object's case)
    det      en (sg, pl), "" where it does not take the number   fr (m.sg, f.sg, m.pl, f.pl)
             de (stem,) + de.table (its own endings), de.decl (the endings it gives adjectives)
    pron     one form a language + agr (0-5, an index of AGR)
    p adv conj and rel comp    one form a language (p: + de.case; rel: fr (qui, que))
    neg      en (3sg, other: "doesn't", "don't")   fr (ne, pas)   de (nicht,)   ja (adverb,)

The first words of each category are written by hand (common words, forms that look like
the languages); the rest of the nouns, adjectives and verbs are made up from each
language's syllables by a seeded generator, so no dictionary is copied and the rare tail is
regular. Ranks are the order of the lists: the grammar draws an item with p proportional to
1/rank within its category (Zipf). French articles and adjectives mark gender in the plural
too (le la les las): a made-up choice, so that a noun decides every article of its phrase.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from itertools import accumulate

PAIRS = ("en-fr", "en-de", "en-ja")
LANGS = ("en", "fr", "de", "ja")
AGR = ("1sg", "2sg", "3sg", "1pl", "2pl", "3pl")  # the person/number index of verb forms
VERBS = ("vi", "vt", "vp", "vs")  # intransitive, transitive, phrasal transitive, saying


@dataclass(frozen=True, eq=False)
class Item:
    """One lexical item: its category, English key, rank and forms (module docstring)."""

    cat: str
    key: str
    rank: int
    en: tuple[str, ...]
    fr: tuple[str, ...]
    de: tuple[str, ...]
    ja: tuple[str, ...]
    feat: dict[str, str] = field(default_factory=dict)

    def target(self, pair: str) -> tuple[str, ...]:
        """The forms on the target side of `pair` ("en-fr" -> `fr`)."""
        return getattr(self, pair[3:])

    def __repr__(self) -> str:
        return f"{self.cat}:{self.key}"


# --- hand-written entries: English | French | German | Japanese -----------------------------
# n:   en sg [pl] | fr sg gender [pl] | de sg gender pl | ja
NOUNS = """cat | chat m | katze f katzen | neko
dog | chien m | hund m hunde | inu
mouse mice | souris f | maus f mause | nezumi
bird | oiseau m oiseaux | vogel m vogel | tori
child children | enfant m | kind n kinder | kodomo
house | maison f | haus n hauser | ie
book | livre m | buch n bucher | hon
girl | fille f | madchen n madchen | shoujo
boy | garcon m | junge m jungen | shounen
woman women | femme f | frau f frauen | onna
man men | homme m | mann m manner | otoko
tree | arbre m | baum m baume | ki
table | table f | tisch m tische | tsukue
teacher | professeur m | lehrer m lehrer | sensei
friend | ami m | freund m freunde | tomodachi
door | porte f | tur f turen | doa
window | fenetre f | fenster n fenster | mado
car | voiture f | auto n autos | kuruma
city | ville f | stadt f stadte | machi
garden | jardin m | garten m garten | niwa
river | riviere f | fluss m flusse | kawa
horse | cheval m chevaux | pferd n pferde | uma
king | roi m | konig m konige | ou
queen | reine f | konigin f koniginnen | jouou
letter | lettre f | brief m briefe | tegami
apple | pomme f | apfel m apfel | ringo
mat | tapis m | matte f matten | matto
box | boite f | kiste f kisten | hako
chair | chaise f | stuhl m stuhle | isu
key | cle f | schlussel m schlussel | kagi
student | etudiant m | schuler m schuler | gakusei
doctor | medecin m | arzt m arzte | isha
sister | soeur f | schwester f schwestern | ane
brother | frere m | bruder m bruder | ani
mother | mere f | mutter f mutter | haha
father | pere m | vater m vater | chichi
baby | bebe m | baby n babys | akachan
ball | balle f | ball m balle | booru
bread | pain m | brot n brote | pan
hat | chapeau m chapeaux | hut m hute | boushi"""
# adj: en | fr m [f [m.pl f.pl]] [pre] | de stem | ja
ADJS = """big | grand pre | gross | ookii
small | petit pre | klein | chiisai
old | vieux vieille vieux vieilles pre | alt | furui
good | bon bonne pre | gut | yoi
black | noir | schwarz | kuroi
young | jeune pre | jung | wakai
white | blanc blanche | weiss | shiroi
new | nouveau nouvelle nouveaux nouvelles pre | neu | atarashii
red | rouge | rot | akai
beautiful | beau belle beaux belles pre | schon | utsukushii
happy | heureux heureuse heureux heureuses | froh | ureshii
sad | triste | traurig | kanashii
hungry | affame | hungrig | harapeko
tired | fatigue | mude | tsukareta
quick | rapide | schnell | hayai
slow | lent | langsam | osoi
clever | malin maligne | klug | kashikoi
strange | etrange | seltsam | kimyouna
quiet | calme | still | shizukana
green | vert | grun | midorino"""
# verbs: en base [particle] | fr stem-er, -ir, -re or six forms | de stem or six forms
#        [+particle] [dat] | ja stem-ru (ichidan) or stem-u (godan)
VI = """sleep | dors dors dort dormons dormez dorment | schlaf | nemur-u
run | cours cours court courons courez courent | lauf | hashir-u
walk | march-er | geh | aruk-u
sing | chant-er | sing | utaw-u
fall | tomb-er | fall | ochi-ru
swim | nag-er | schwimm | oyog-u
laugh | ris ris rit rions riez rient | lach | waraw-u
dance | dans-er | tanz | odor-u
cry | pleur-er | wein | nak-u
play | jou-er | spiel | asob-u
arrive | arriv-er | komm +an | tsuk-u
leave | pars pars part partons partez partent | fahr +ab | de-ru
rest | repos-er | ruh | yasum-u
shout | cri-er | schrei | sakeb-u
jump | saut-er | spring | tob-u
work | travaill-er | arbeit | hatarak-u
return | retourn-er | kehr +zuruck | kaer-u"""
VT = """see | vois vois voit voyons voyez voient | sehe siehst sieht sehen seht sehen | mi-ru
like | aim-er | mag magst mag mogen mogt mogen | konom-u
eat | mang-er | esse isst isst essen esst essen | tabe-ru
find | trouv-er | find | mitsuke-ru
chase | chass-er | jag | ow-u
watch | regard-er | beobacht | nagame-ru
call | appell-er | ruf +an | yob-u
help | aid-er | helfe hilfst hilft helfen helft helfen dat | tasuke-ru
carry | emport-er | trag | hakob-u
open | ouvr-er | mach +auf | ake-ru
close | ferm-er | mach +zu | shime-ru
follow | suis suis suit suivons suivez suivent | folg dat | shitagaw-u
invite | invit-er | lad +ein | manek-u
push | pouss-er | schieb | os-u
answer | repond-re | antwort dat | kotae-ru
wash | lav-er | wasch | araw-u
read | lis lis lit lisons lisez lisent | lese liest liest lesen lest lesen | yom-u
bite | mord-re | beiss | kam-u
draw | dessin-er | zeichn | kak-u
bring | apport-er | bring +mit | todoke-ru
visit | visit-er | besuch | tazune-ru
support | soutiens soutiens soutient soutenons soutenez soutiennent | steh +bei dat | sasae-ru"""
VP = """pick up | ramass-er | heb +auf | hirow-u
put down | pos-er | leg +ab | ok-u
turn on | allum-er | schalt +ein | tsuke-ru
turn off | eteins eteins eteint eteignons eteignez eteignent | schalt +aus | kes-u
give up | abandonn-er | gebe gibst gibt geben gebt geben +auf | akirame-ru
throw away | jet-er | werf +weg | sute-ru
write down | not-er | schreib +auf | kakitome-ru
wake up | reveill-er | weck +auf | okos-u
fill up | rempl-ir | full +auf | mitas-u
look at | contempl-er | betracht | mitsume-ru"""
VS = """say | dis dis dit disons dites disent | sag | iw-u
think | pens-er | denk | omow-u
know | sais sais sait savons savez savent | weiss weisst weiss wissen wisst wissen | shir-u
believe | crois crois croit croyons croyez croient | glaub | shinji-ru
hope | esper-er | hoff | nozom-u
hear | entend-re | hor | kik-u"""
# det: en sg pl ("-": not in that number) | fr m.sg f.sg m.pl f.pl | de stem table decl | ja
DETS = """the the | le la les las | d art weak | -
a - | un une - - | ein ein mixed | -
this these | ce cette ces cettes | dies der weak | kono
that those | cel celle ceux celles | jen der weak | ano
my my | mon ma mes mas | mein ein mixed | watashino
your your | ton ta tes tas | dein ein mixed | anatano
every - | chaque chaque - - | jed der weak | subeteno
- some | - - quelques quelques | einig der strong | ikutsukano
our our | notre notre nos nos | unser ein mixed | watashitachino
- many | - - maints maintes | viel der strong | ookuno
- two | - - deux deux | zwei inv strong | futatsuno"""
# pron: en fr de ja agr (an index of AGR); p: en fr de:case ja; adv, conj: en fr de ja
PRONS = """i je ich watashi 0, you tu du anata 1, he il er kare 2, she elle sie kanojo 2,
we nous wir watashitachi 3, they ils sie karera 5"""
PREPS = """on sur auf:dat ueni, in dans in:dat de, with avec mit:dat totomoni,
under sous unter:dat shitani, near pres bei:dat chikakuni, behind derriere hinter:dat ushironi,
for pour fur:acc notameni, from de von:dat kara, without sans ohne:acc nashini,
to vers zu:dat e, through travers durch:acc tootte, around autour um:acc mawarini,
against contre gegen:acc nitaishite"""
ADVS = """today aujourdhui heute kyou, now maintenant jetzt ima, often souvent oft yoku,
here ici hier kokode, always toujours immer itsumo, sometimes parfois manchmal tokidoki,
there labas dort sokode, usually dhabitude meistens futsuu"""
CONJS = "and et und soshite, but mais aber demo, or ou oder matawa"
FLAT = {"pron": PRONS, "p": PREPS, "adv": ADVS, "conj": CONJS}
# the closed words: cat key | en | fr | de | ja ("-": none)
FIXED = """neg not | doesn't don't | ne pas | nicht | -
neg never | never never | ne jamais | nie | kesshite
and and | and | et | und | to
rel that | that | qui que | der die das den dem denen | -
comp that | that | que | dass | to"""

# --- regular morphology -----------------------------------------------------------------------
FR_ER = ("e", "es", "e", "ons", "ez", "ent")
FR_IR = ("is", "is", "it", "issons", "issez", "issent")
FR_RE = ("s", "s", "", "ons", "ez", "ent")


def en_s(stem: str) -> str:
    """English plural or third person singular."""
    if stem.endswith(("s", "sh", "ch", "x", "z", "o")):
        return stem + "es"
    return stem[:-1] + "ies" if stem[-1] == "y" and stem[-2] not in "aeiou" else stem + "s"


def fr_s(form: str) -> str:
    return form if form[-1] in "sxz" else form + ("x" if form.endswith("eau") else "s")


def _fr_verb(spec: list[str]) -> tuple[str, ...]:
    if len(spec) == 6:
        return tuple(spec)
    stem, kind = spec[0].split("-")
    return tuple(stem + e for e in {"er": FR_ER, "ir": FR_IR, "re": FR_RE}[kind])


def _de_verb(spec: list[str]) -> tuple[str, ...]:
    if len(spec) == 6:
        return tuple(spec)
    stem = spec[0]
    ends = ["e", "st", "t", "en", "t", "en"]
    if stem[-1] in "td":
        ends = ["e", "est", "et", "en", "et", "en"]
    elif stem[-1] in "sz":
        ends[1] = "t"
    return tuple(stem + e for e in ends)


def _ja_verb(spec: str) -> tuple[str, str]:
    stem, kind = spec.split("-")
    if kind == "ru":  # ichidan: tabe-ru, tabe-nai
        return stem + "ru", stem + "nai"
    return (stem[:-1] if stem[-1] == "w" else stem) + "u", stem + "anai"  # godan: nemur-u


# --- reading the tables --------------------------------------------------------------------------
def _rows(table: str) -> list[list[list[str]]]:
    return [[f.split() for f in line.split("|")] for line in table.strip().split("\n")]


def _noun(en: list[str], fr: list[str], de: list[str], ja: list[str]) -> dict:
    en_pl = en[1] if len(en) > 1 else en_s(en[0])
    fr_pl = fr[2] if len(fr) > 2 else fr_s(fr[0])
    feat = {"fr.gender": fr[1], "de.gender": de[1]}
    return dict(en=(en[0], en_pl), fr=(fr[0], fr_pl), de=(de[0], de[2]), ja=(ja[0],), feat=feat)


def _adj(en: list[str], fr: list[str], de: list[str], ja: list[str]) -> dict:
    forms = [f for f in fr if f != "pre"]
    if len(forms) < 4:
        m = forms[0]
        f = forms[1] if len(forms) > 1 else m if m.endswith("e") else m + "e"
        forms = [m, f, fr_s(m), fr_s(f)]
    feat = {"fr.place": "pre" if fr[-1] == "pre" else "post"}
    return dict(en=(en[0],), fr=tuple(forms), de=(de[0],), ja=(ja[0],), feat=feat)


def _verb(en: list[str], fr: list[str], de: list[str], ja: list[str]) -> dict:
    feat = {"de.particle": "", "de.case": "acc"}
    for extra in [d for d in de if d[0] == "+" or d == "dat"]:
        feat["de.particle" if extra[0] == "+" else "de.case"] = extra.lstrip("+")
    de_forms = _de_verb([d for d in de if d[0] != "+" and d != "dat"])
    forms = dict(en=(en[0], en_s(en[0]), *en[1:]), fr=_fr_verb(fr), de=de_forms)
    return forms | dict(ja=_ja_verb(ja[0]), feat=feat)


def _det(en: list[str], fr: list[str], de: list[str], ja: list[str]) -> dict:
    feat = {"de.table": de[1], "de.decl": de[2]}
    return dict(en=_dash(en), fr=_dash(fr), de=(de[0],), ja=_dash(ja), feat=feat)


def _dash(forms: list[str]) -> tuple[str, ...]:
    return tuple("" if f == "-" else f for f in forms)  # "-": no such form


def _flat(table: str, cat: str) -> tuple[Item, ...]:
    found = []
    for rank, row in enumerate(re.split(r",\s*", table.strip()), start=1):
        en, fr, de, ja, *extra = row.split()
        feat = {"agr": extra[0]} if extra else {}
        if cat == "p":
            de, feat["de.case"] = de.split(":")
        found.append(Item(cat, en, rank, (en,), (fr,), (de,), (ja,), feat))
    return tuple(found)


def _fixed() -> dict[str, tuple[Item, ...]]:
    out: dict[str, tuple[Item, ...]] = {}
    for line in FIXED.split("\n"):
        (cat, key), en, fr, de, ja = (f.split() for f in line.split("|"))
        feat = {"do": "yes" if key == "not" else "no"} if cat == "neg" else {}
        item = Item(cat, key, len(out.get(cat, ())) + 1, *map(_dash, (en, fr, de, ja)), feat)
        out[cat] = (*out.get(cat, ()), item)
    return out


# --- the made-up tail ----------------------------------------------------------------------------
_SOUNDS = {  # onsets | nuclei | codas of made-up syllables
    "en": "b bl br d dr f fl g gl gr h k l m p pl pr r s sk sl sp st t tr v w z | a e i o u oo ea"
    " | b ck d g l m n p r sh st t nd mp ft lk",
    "fr": "b br ch cl d f fr g gr j l m p pl r s t tr v | a e i o ou au | -",
    "de": "b br d dr f fl g gr h k kl kr l m n p pf r s sch schl schw st t tr w z"
    " | a e i o u au ei ie | b ch d f g ck l m n p r t nd ng nk",
    "ja": "k s t n h m y r g b | a i u e o | -",
}
ONSETS, NUCLEI, CODAS = ({k: v.split("|")[n].split() for k, v in _SOUNDS.items()} for n in range(3))
FR_NOUN = {"m": ("eau", "on", "ier", "at", "in", "ard"), "f": ("ette", "ine", "ade", "ure", "elle")}
DE_NOUN = {"f": ("ung:en", "e:n", "heit:en"), "m": ("er:", "el:", "ling:e")}
DE_NOUN["n"] = ("chen:", "nis:se")
FR_ADJ = ("eux:euse", "if:ive", "ant:ante", "ique:ique", "in:ine")
DE_ADJ = ("ig", "lich", "isch", "sam", "bar", "los")
DE_PARTICLES = ("an", "auf", "ab", "aus", "ein", "mit", "vor", "zu", "weg")
# English function words a made-up word must not be, and what no made-up word may contain
RESERVED = """her him his its it me us them who which there an as at by if of off so up out no be
is are was do has can will"""
RUDE = re.compile(
    "fuck|dick|peck|poo|shit|cunt|nig|fag|cock|tit|cum|sex|rape|ass|anal|porn|piss|kuso|unko|baka"
)
NOT_JA = ("si", "ti", "tu", "hu", "yi", "ye")  # syllables Japanese writes otherwise


def _syllable(rng: random.Random, lang: str, coda: bool = False) -> str:
    while (cv := rng.choice(ONSETS[lang]) + rng.choice(NUCLEI[lang])) in NOT_JA:
        pass
    return cv + (rng.choice(CODAS[lang]) if coda else "")


def _made_up(rng: random.Random, cat: str, used: dict[str, set[str]]) -> dict:
    """One made-up item of category `cat` whose forms are new on every side."""
    while True:
        en = _syllable(rng, "en", True) + rng.choice(("", "", "", "er", "le", "et", "ish"))
        fr = _syllable(rng, "fr") + rng.choice(ONSETS["fr"])  # a stem ending in a consonant
        de = _syllable(rng, "de", True)
        ja = "".join(_syllable(rng, "ja") for _ in range(rng.choice((2, 3))))
        if cat == "n":
            fg, dg = rng.choice("mf"), rng.choice("mfn")
            end, plural = rng.choice(DE_NOUN[dg]).split(":")
            fr += rng.choice(FR_NOUN[fg])
            fields = _noun([en], [fr, fg], [de + end, dg, de + end + plural], [ja])
        elif cat == "adj":
            m, f = rng.choice(FR_ADJ).split(":")
            fields = _adj([en], [fr + m, fr + f], [de + rng.choice(DE_ADJ)], [ja + "i"])
        else:
            extra = ["+" + rng.choice(DE_PARTICLES)] if rng.random() < 0.25 else []
            extra += ["dat"] if cat == "vt" and rng.random() < 0.15 else []
            godan = rng.random() < 0.6  # nemur-u / tabe-ru
            ja = ja[:4] + (rng.choice("kmrbs") + "-u" if godan else rng.choice("eei") + "-ru")
            fields = _verb([en], [fr + "-er"], [de, *extra], [ja])
        forms = {lang: set(fields[lang]) for lang in LANGS}
        rude = any(RUDE.search(form) for group in forms.values() for form in group)
        if not rude and not any(forms[lang] & used[lang] for lang in LANGS):
            for lang in LANGS:
                used[lang] |= forms[lang]
            return fields


TAIL = {"n": 110, "adj": 40, "vi": 18, "vt": 24}  # made-up items after the hand-written ones
OPEN = {"n": (_noun, NOUNS), "adj": (_adj, ADJS), "vi": (_verb, VI), "vt": (_verb, VT)}
OPEN |= {"vp": (_verb, VP), "vs": (_verb, VS), "det": (_det, DETS)}


@cache
def items() -> dict[str, tuple[Item, ...]]:
    """Every category's items, most frequent first (the lexicon is built once)."""
    out = {cat: _flat(table, cat) for cat, table in FLAT.items()} | _fixed()
    for cat, (make, table) in OPEN.items():
        rows = _rows(table)
        out[cat] = tuple(Item(cat, _key(cat, r[0]), n + 1, **make(*r)) for n, r in enumerate(rows))
    used = {lang: {w for i in _every(out) for w in getattr(i, lang)} for lang in LANGS}
    used["ja"] |= {"wa", "ga", "o", "no"}
    used["en"] |= set(RESERVED.split())
    rng = random.Random("attnmt-grammar-lexicon")
    for cat, count in TAIL.items():
        made = [_made_up(rng, cat, used) for _ in range(count)]
        first = len(out[cat]) + 1
        out[cat] += tuple(Item(cat, f["en"][0], first + n, **f) for n, f in enumerate(made))
    return out


def _key(cat: str, english: list[str]) -> str:
    """The key of an entry: "pick up" (a phrasal verb), "mouse" (of "mouse mice"), "some"."""
    return " ".join(english) if cat == "vp" else next(w for w in english if w != "-")


def _every(groups: dict[str, tuple[Item, ...]]) -> list[Item]:
    return [item for group in groups.values() for item in group]


def shape(pair: str, item: Item) -> str:
    """What of an item shapes the target sentence in `pair`; items of another shape cannot
    stand in for it (a French adjective before or after its noun, a German verb with or
    without a particle, a Japanese determiner with or without a word, each negation in
    Japanese)."""
    if pair == "en-fr" and item.cat == "adj":
        return item.feat["fr.place"]
    if pair == "en-de" and item.cat in VERBS:
        return "sep" if item.feat["de.particle"] else "plain"
    if pair == "en-ja" and item.cat in ("det", "neg"):
        return item.key if item.cat == "neg" else "word" if item.ja[0] else "null"
    return ""


@cache
def substitutes(pair: str, cat: str, shape_: str, number: str) -> tuple[Item, ...]:
    """The items that may stand in a slot: the same category and shape in `pair` (and, for
    a determiner, taking the phrase's `number`), the slot's own item included."""
    found = (i for i in items()[cat] if shape(pair, i) == shape_)
    return tuple(i for i in found if cat != "det" or i.en[number == "pl"])


@cache
def values(pair: str, slot: tuple[str, str, str], reader: Callable[[Item], object]) -> tuple:
    """The distinct values `reader` takes over the substitutes of `slot` (cat, shape, number)."""
    return tuple(dict.fromkeys(reader(i) for i in substitutes(pair, *slot)))


@cache
def zipf(cat: str, number: str = "") -> tuple[tuple[Item, ...], tuple[float, ...]]:
    """The items of `cat` (determiners: those taking `number`) and their cumulative Zipf
    weights 1/rank, for `random.choices`."""
    found = tuple(i for i in items()[cat] if cat != "det" or i.en[number == "pl"])
    return found, tuple(accumulate(1 / i.rank for i in found))
