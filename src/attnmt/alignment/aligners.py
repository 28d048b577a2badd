"""A statistical word aligner to measure attention against: eflomal.

eflomal (Östling & Tiedemann 2016, "Efficient word alignment with Markov Chain Monte
Carlo") samples the alignments of IBM model 1, then an HMM, then an HMM with fertility, and
is a standard strong baseline for unsupervised word alignment. It is installed from PyPI
and builds its C sampler from source (`make setup` does it; see docs/alignment.md):

    forward, reverse = eflomal_links(src_sentences, tgt_sentences)
    links = [symmetrize(f, r) for f, r in zip(forward, reverse)]

Like every unsupervised aligner it learns from the very text it aligns, so it is run on
all the verses at once, the test book included; the attention of a translation model
never sees the test book. Its sampler is not seedable: two runs differ a little (the
docs give the spread).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from attnmt.data.alignments import Link, read_pharaoh
from attnmt.errors import UserError

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
