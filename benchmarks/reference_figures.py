"""The papers' signature figures on real verses, measured on the committed reference runs.

    python benchmarks/reference_figures.py          # about 5 minutes on 2 CPU cores

- Bahdanau et al. Fig. 3: the reference RNNsearch reads John 6:47's French (forced
  decoding) and its attention crosses or not on *la vie éternelle*; then every **local
  reversal** of the test book is found and counted, and how many of them the attention
  crosses. A local reversal is two adjacent English words whose French counterparts come
  next to each other in the opposite order (*eternal life* -> *vie éternelle*), read off
  eflomal's links (grow-diag-final-and of both directions, run on all 31,000 verses: an
  unsupervised aligner learns from the text it aligns), each of the four words with that
  one link only. It is the aligner's reading, not a gold one, and the attention never
  saw John; the attention crosses a reversal when the row of each French word has its
  maximum on the English word the aligner links it to.
- Bahdanau et al. Fig. 2: BLEU by source length of the reference RNNsearch and the
  reference RNNencdec (same size, same training time), and the Transformer, from each
  run's recorded test evaluation (beam 5, 3 references).
- The Transformer's heads (Vaswani et al. 2017, Figs. 3-5 show some): the AER of every
  cross-attention head of the reference Transformer against the same eflomal links on
  John, which head aligns, and what the others look at (the share of rows whose maximum is
  on the aligner's word, one word before or after it, or the source's last word).

Writes benchmarks/results/reference_figures.json, docs/results/reference-*.png and the
section between `<!-- reference:begin -->` and `<!-- reference:end -->` of docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import write_block

import attnmt
from attnmt.alignment.aligners import eflomal_links
from attnmt.alignment.links import (
    alignment_scores,
    diagonal_alignment,
    local_reversals,
    symmetrize,
)
from attnmt.data.bible import book_number, load_pairs
from attnmt.plotting import heatmap, length_curves

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "reference"
DOC = ROOT / "docs" / "results.md"
FIGURES = ROOT / "docs" / "results"
RESULTS = ROOT / "benchmarks" / "results" / "reference_figures.json"
VERSE = "John 6:47"
_PUNCT = re.compile(r"^\W+|\W+$")


def bare(word: str) -> str:
    """A word as the aligner reads it: lower case, no punctuation at either end."""
    return _PUNCT.sub("", word).lower() or word


def aligner_links(pairs) -> list[set[tuple[int, int]]]:
    """eflomal's symmetrized links of every pair, on the words `str.split` gives."""
    src = [[bare(w) for w in p.src.split()] for p in pairs]
    tgt = [[bare(w) for w in p.tgt.split()] for p in pairs]
    forward, reverse = eflomal_links(src, tgt)
    return [symmetrize(f, r) for f, r in zip(forward, reverse, strict=True)]


def word_matrix(record: dict, index: int) -> np.ndarray:
    """One attention reading of a record at the word level, (target words, source words)."""
    return np.asarray(record["attention"][index]["word"], dtype=float)


def argmax_links(matrix: np.ndarray) -> set[tuple[int, int]]:
    return {(int(row.argmax()), j) for j, row in enumerate(matrix)}


def forced(model, pairs) -> list[dict]:
    return [r.record for r in model.score([p.src for p in pairs], [p.tgt for p in pairs])]


def crossings(records, links, index) -> dict:
    """How many local reversals each reading of the attention crosses."""
    total = crossed = 0
    examples = []
    for record, gold in zip(records, links, strict=True):
        matrix = word_matrix(record, index)
        for i, i2, a, b in local_reversals(gold):
            total += 1
            if matrix[a].argmax() == i and matrix[b].argmax() == i2:
                crossed += 1
            elif len(examples) < 8:
                src, tgt = record["source_words"], record["target_words"]
                examples.append(f"{src[i]} {src[i2]} -> {tgt[b]} {tgt[a]}")
    return {"reversals": total, "crossed": crossed, "missed_examples": examples}


def head_profile(records, links, index) -> dict:
    """AER against the aligner's links, and where each linked row's maximum falls: on a
    linked word, else one word before one, else one after, else on the last word (%)."""
    predicted, on, before, after, last, rows = [], 0, 0, 0, 0, 0
    for record, gold in zip(records, links, strict=True):
        matrix = word_matrix(record, index)
        predicted.append(argmax_links(matrix))
        linked: dict[int, set[int]] = {}
        for i, j in gold:
            linked.setdefault(j, set()).add(i)
        for j, row in enumerate(matrix):
            if j not in linked:
                continue
            rows += 1
            top = int(row.argmax())  # each row in the first of these that holds
            if top in linked[j]:
                on += 1
            elif top + 1 in linked[j]:
                before += 1
            elif top - 1 in linked[j]:
                after += 1
            elif top == matrix.shape[1] - 1:
                last += 1
    aer = alignment_scores(predicted, links)["aer"]
    share = {k: round(100 * v / rows, 1) for k, v in
             (("on", on), ("one_before", before), ("one_after", after), ("last_word", last))}
    return {"aer": round(100 * aer, 1), **share}


def fig3(model, pair, out: Path) -> dict:
    """John 6:47 read by the reference RNNsearch: its heatmap and whether it crosses."""
    record = model.score(pair.src, pair.tgt).record
    matrix = word_matrix(record, record["default_attention"])
    heatmap(matrix, record["source_words"], record["target_words"], out, formats=("png",),
            title=f"{VERSE}, reference RNNsearch (forced decoding)")
    src, tgt = record["source_words"], record["target_words"]
    looks = {bare(t): bare(src[int(row.argmax())]) for t, row in zip(tgt, matrix, strict=True)}
    rows = [(t, src[int(row.argmax())], round(float(row.max()), 2))
            for t, row in zip(tgt, matrix, strict=True)]
    return {"verse": VERSE, "rows": rows, "vie": looks.get("vie"),
            "éternelle": looks.get("éternelle"),
            "crosses": looks.get("vie") == "life" and looks.get("éternelle") == "eternal"}


def by_length(out: Path) -> dict:
    curves = {}
    for name, shown in (("rnnsearch-en-fr", "RNNsearch"), ("rnnencdec-en-fr", "RNNencdec"),
                        ("transformer-en-fr", "Transformer")):
        report = json.loads((REFERENCE / name / "eval" / "test-beam5.json").read_text())
        curves[shown] = report["bleu_by_length"]
    length_curves(curves, out, formats=("png",),
                  title="BLEU by source length, John (beam 5, 3 references)")
    return curves


def measure() -> dict:
    started = time.time()
    pairs = load_pairs("en-web", "fr-segond")
    john_book = book_number("John")
    links = aligner_links(pairs)
    john = [(p, g) for p, g in zip(pairs, links, strict=True) if p.book == john_book]
    verses, gold = [p for p, _ in john], [g for _, g in john]
    FIGURES.mkdir(parents=True, exist_ok=True)
    rnnsearch = attnmt.load(str(REFERENCE / "rnnsearch-en-fr"), device="cpu")
    pair = next(p for p in verses if p.ref == VERSE)
    result = {"fig3": fig3(rnnsearch, pair, FIGURES / "reference-john-6-47")}
    records = forced(rnnsearch, verses)
    result["rnnsearch"] = {**crossings(records, gold, records[0]["default_attention"]),
                           **head_profile(records, gold, records[0]["default_attention"])}
    diagonal = [diagonal_alignment(len(p.src.split()), len(p.tgt.split())) for p in verses]
    result["diagonal_aer"] = round(100 * alignment_scores(diagonal, gold)["aer"], 1)
    transformer = attnmt.load(str(REFERENCE / "transformer-en-fr"), device="cpu")
    records = forced(transformer, verses)
    heads = {}
    for index, reading in enumerate(records[0]["attention"]):
        heads[reading["name"]] = {**head_profile(records, gold, index),
                                  "crossed": crossings(records, gold, index)["crossed"]}
    result["transformer_heads"] = heads
    result["by_length"] = by_length(FIGURES / "reference-length")
    result["verses"] = len(verses)
    result["links"] = sum(len(g) for g in gold)
    result["seconds"] = round(time.time() - started, 1)
    return result


def markdown(r: dict) -> str:
    f3, rs = r["fig3"], r["rnnsearch"]
    lines = [
        "Measured by `python benchmarks/reference_figures.py` on the committed reference runs",
        f"([reference.md](reference.md)); John's {r['verses']} verses, "
        f"{r['links']:,} eflomal links.",
        "",
        f"**Fig. 3, John 6:47** (forced decoding of Segond's French): *vie* → *{f3['vie']}*, "
        f"*éternelle* → *{f3['éternelle']}*: "
        f"{'the attention crosses' if f3['crosses'] else 'it does not cross'}.",
        "",
        "![John 6:47, reference RNNsearch](results/reference-john-6-47.png)",
        "",
        f"**Local reversals in John**: {rs['reversals']} pairs of adjacent English words "
        "come out in the opposite order in French by eflomal's links; the reference "
        f"RNNsearch's attention crosses **{rs['crossed']}** of them "
        f"({100 * rs['crossed'] / max(1, rs['reversals']):.0f}%). Its attention's AER "
        f"against the same links is {rs['aer']}% (the diagonal's: {r['diagonal_aer']}%); "
        f"{rs['on']}% of its rows have their maximum on the aligner's word, "
        f"{rs['one_before']}% one word before it. Some reversals it does not cross: "
        + "; ".join(f"*{e}*" for e in rs["missed_examples"][:5]) + ".",
        "",
        "**Fig. 2, BLEU by source length** (test, beam 5, 3 references):",
        "",
    ]
    curves = r["by_length"]
    labels = [row["label"] for row in next(iter(curves.values()))]
    lines.append("| model | " + " | ".join(labels) + " |")
    lines.append("|---|" + "---:|" * len(labels))
    for name, rows in curves.items():
        cells = {row["label"]: f"{row['bleu']:.1f}" for row in rows}
        lines.append(f"| {name} | " + " | ".join(cells.get(x, "") for x in labels) + " |")
    lines += ["", "![BLEU by source length](results/reference-length.png)", "",
              "**The Transformer's cross-attention heads** against the same links "
              "(AER; where each row's maximum falls; reversals crossed of "
              f"{rs['reversals']}):", "",
              "| layer, head | AER % | on the word % | one before % | one after % | "
              "last word % | reversals crossed |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, h in r["transformer_heads"].items():
        lines.append(f"| {name} | {h['aer']} | {h['on']} | {h['one_before']} | "
                     f"{h['one_after']} | {h['last_word']} | {h['crossed']} |")
    return "\n".join(lines)


def write_doc(text: str) -> None:
    write_block(DOC, "reference", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-doc", action="store_true", help="measure, write no doc")
    args = parser.parse_args()
    result = measure()
    RESULTS.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    text = markdown(result)
    print(text)
    if not args.no_doc:
        write_doc(text)


if __name__ == "__main__":
    main()
