"""`attnmt data list | prepare CONFIG | show CONFIG` (alone: the actions, one line each).

- `list`: every version of the built-in Bible corpus (name, language, year, verses);
  `--books` lists the book names and numbers usable in `data.dev_books` / `test_books`.
  It reads the corpus database only: no config, no `prepare` (imported lazily).
- `prepare CONFIG`: reads, cleans, splits, trains the subword model and encodes; writes it
  all into the cache folder and prints the statistics (see `attnmt.data.preparation`).
- `show CONFIG`: a few examples of each split, as text and as subword pieces; for the
  gold-alignment corpus also the counts of the test split's gold links.
"""

from __future__ import annotations

import argparse
import json
import time

from attnmt.config import add_override_argument, corpora, load_config
from attnmt.data import bible

# action -> one-line help, in the order `attnmt data` lists them.
ACTIONS = {
    "list": "the versions of the built-in Bible corpus (--books: its books)",
    "prepare": "prepare the corpus of a config and print its statistics",
    "show": "print a few tokenized examples of each split",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = sub.add_parser("list", help=ACTIONS["list"], description=ACTIONS["list"])
    listing.add_argument("--books", action="store_true", help="list the books instead")
    for name in ("prepare", "show"):
        help_text = ACTIONS[name]
        action = sub.add_parser(name, help=help_text, description=help_text)
        action.add_argument("config", help="experiment YAML file (see configs/)")
        add_override_argument(action, "data.vocab_size=4000")
        if name == "show":
            action.add_argument("-n", type=int, default=3, help="examples per split (default 3)")
        else:
            action.add_argument("--json", action="store_true", help="print stats as JSON")


def run(args: argparse.Namespace) -> int:
    if args.action is None:
        return _actions()
    if args.action == "list":
        return _list(args.books)

    # Lazy on purpose: `prepare` brings sentencepiece and numpy, which `list` does without.
    from attnmt.data import preparation as preparing

    # Checked without torch: the attention and the device wait for `attnmt train`.
    cfg = load_config(args.config, args.overrides, torch=False)
    started = time.perf_counter()
    data = preparing.prepare(cfg.data, progress=args.action == "prepare")
    seconds = time.perf_counter() - started
    own = (*preparing.SYNTHETIC, *preparing.IMAGES)  # no source or target version to name
    if args.action == "prepare":
        if data.stats.get("batch_tokens") != cfg.data.batch_tokens:  # another budget: recount
            data.stats["batch_tokens"] = cfg.data.batch_tokens
            data.stats["padding_fraction"] = round(
                preparing.padding_fraction(data.train, cfg.data.batch_tokens), 4
            )
        if args.json:
            shown = _shown(data.stats, own)
            print(json.dumps(shown, ensure_ascii=False, indent=2))
        else:
            _print_stats(_shown(data.stats, own), seconds, data.directory, data.train.nbytes())
        return 0
    if cfg.data.corpus in preparing.IMAGES:
        _show_images(data, args.n)
        return 0
    _show(data, args.n)
    return 0


def _show_images(data, n: int) -> None:
    """Image tasks: the labels of the first examples of each split, and a picture of them
    (`data.directory/show-SPLIT.png`) with each digit's box framed."""
    from attnmt.data import images

    for split in ("train", "dev", "test"):
        examples = data.split(split)
        print(f"== {split}: {len(examples):,} images")
        shown = []
        for ex in examples[:n]:
            pixels = images.text_pixels(ex.src)
            print(f"[{ex.id}] {pixels.shape[0]}x{pixels.shape[1]} pixels, digits: {ex.tgt}")
            shown.append(images.Canvas(pixels, [int(d) for d in ex.tgt.split()], []))
        if shown:
            path = images.draw_examples(shown, data.directory / f"show-{split}.png", title=split)
            print(f"   drawn: {path}")


def _actions() -> int:
    """`attnmt data` alone: what each action does (like `attnmt` alone, status 0)."""
    print("usage: attnmt data ACTION ...\n\nactions:")
    for name, help_text in ACTIONS.items():
        print(f"  {name:<9} {help_text}")
    print("\n`attnmt data ACTION --help` gives the arguments of one.")
    return 0


def _list(books: bool) -> int:
    if books:
        names = corpora.book_names()
        print(
            f"The {len(names)} books of the built-in Bible corpus, by number "
            "(data.dev_books / data.test_books take a number or a name)"
        )
        for number, name in names.items():
            part = "NT" if number >= 40 else "OT"
            print(f"{number:3d}  {name:<20} {part}")
        return 0
    counts = bible.verse_counts()
    print(
        f"The {len(counts)} Bible versions of the built-in corpus (names for data.src / "
        "data.tgt); verses: those with text, of 31,102"
    )
    print(f"{'name':<17}{'language':<12}{'year':<6}{'verses':>7}  title")
    for name, v in corpora.versions().items():
        year = str(v.year) if v.year else "-"
        print(f"{name:<17}{v.language:<12}{year:<6}{counts[name]:>7}  {v.title}")
    print(f"{len(counts)} versions; pairs are joined on (book, chapter, verse)")
    return 0


def _shown(stats: dict, synthetic) -> dict:
    """The stats to print: a synthetic task has no source or target version to name."""
    if stats.get("corpus") in synthetic:
        return {k: v for k, v in stats.items() if k not in ("src", "tgt")}
    return stats


def _print_stats(stats: dict, seconds: float, directory, store_bytes: int = 0) -> None:
    pairs = stats["pairs"]
    cached = " (from cache)" if stats.get("cached") else ""
    if "grammar_pair" in stats:
        what = f"grammar {stats['grammar_pair']} (the grammar lab; gold links in gold/)"
    elif "src" in stats:
        what = f"{stats['corpus']} {stats['src']} -> {stats['tgt']}"
    else:
        what = f"{stats['corpus']} (a synthetic task)"
    print(f"prepared {what} in {seconds:.1f} s{cached}")
    print(f"  folder: {directory}")
    print(f"  pairs: train {pairs['train']:,}  dev {pairs['dev']:,}  test {pairs['test']:,}")
    if "dev_books" in stats:
        print(
            f"  dev books: {', '.join(stats['dev_books'])}; "
            f"test books: {', '.join(stats['test_books'])}"
        )
    for key in ("removed_duplicates", "removed_long", "removed_ratio", "removed_empty"):
        if stats.get(key) or (key in stats and key in ("removed_duplicates", "removed_long")):
            print(f"  {key.replace('_', ' ')} from train: {stats[key]:,}")
    if stats.get("extra_references"):
        print(
            f"  extra references: {', '.join(stats['extra_references'])} "
            f"(dev/test have {stats['references']['test']} references)"
        )
    if "gold_links" in stats:
        links = stats["gold_links"]
        print(f"  gold links: dev {links['dev']:,}  test {links['test']:,}")
    sizes = stats["vocab_size"]
    kind = "joint" if stats["joint_vocab"] else "separate"
    asked = stats.get("vocab_asked")
    short = asked and min(sizes.values()) < asked
    print(
        f"  vocabulary ({kind}): src {sizes['src']:,}  tgt {sizes['tgt']:,}"
        + (
            f" (data.vocab_size asked for {asked:,}: the training text supports no more)"
            if short
            else ""
        )
    )
    for split in ("train", "dev", "test"):
        if split in stats:
            s = stats[split]
            print(
                f"  {split}: {s['subwords']['src']:,} / {s['subwords']['tgt']:,} subwords, "
                f"{s['subwords_per_word']['src']} / {s['subwords_per_word']['tgt']} per word, "
                f"coverage {100 * s['coverage']:.2f}%"
            )
    train = stats.get("store", {}).get("splits", {}).get("train")
    if train and store_bytes:
        tokens = train["tokens"]["src"] + train["tokens"]["tgt"]
        print(
            f"  token store (train): {tokens:,} ids as {train['dtype']}, "
            f"{store_bytes / 1e6:,.1f} MB ({store_bytes / max(1, tokens):.2f} bytes a token)"
        )
    print(
        f"  padding at {stats['batch_tokens']:,} tokens per batch: "
        f"{100 * stats['padding_fraction']:.1f}%"
    )


def _show(data, n: int) -> None:
    vocab = data.vocab
    for split in ("train", "dev", "test"):
        examples = data.split(split)
        print(f"== {split}: {len(examples):,} pairs")
        for ex in examples[:n]:
            print(f"[{ex.id}]")
            print(f"  src: {ex.src}")
            print(f"  tgt: {ex.tgt}")
            for k, ref in enumerate(ex.refs, start=2):
                print(f"  ref{k}: {ref}")
            print(f"  src pieces ({len(ex.src_ids)}): {' '.join(vocab.src.id_pieces(ex.src_ids))}")
            print(f"  tgt pieces ({len(ex.tgt_ids)}): {' '.join(vocab.tgt.id_pieces(ex.tgt_ids))}")
    if data.stats.get("corpus") == "alignments" and data.stats.get("test_books"):
        from attnmt.data import alignments  # lazy: only this corpus reads the gold links

        gold = alignments.load_gold()
        parts = alignments.split_by_book(
            gold.verses,
            test_books=data.stats.get("test_books") or ["John"],
            dev_books=data.stats.get("dev_books") or [],
        )
        test = parts["test"]
        links = sum(len(v.links) for v in test)
        print(
            f"== gold alignments: {len(gold.verses):,} verses with links, "
            f"{sum(len(v.links) for v in gold.verses):,} links in all"
        )
        print(
            f"   test split: {len(test):,} verses, {links:,} gold links, "
            f"{sum(len(v.src) for v in test):,} Greek / {sum(len(v.tgt) for v in test):,} "
            "English words"
        )
