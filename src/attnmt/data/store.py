"""The token store: a split's subword ids on disk, read by memory-mapping, never copied.

One split (`train`, `dev`, `test`) of a prepared cache folder is four files:

    {split}.ids           every pair's source ids then its target ids, back to back, as raw
                          little-endian uint16 (vocabularies up to 65,536 ids) or uint32
    {split}.lengths.npy   (2, N) source and target lengths in ids (uint16, or uint32 when a
                          sentence is longer than 65,535 ids)
    {split}.offsets.npy   (N + 1,) int64: pair i's ids are ids[offsets[i]:offsets[i + 1]]
    {split}.src / .tgt / .id / .refK   the cleaned text and the pair ids, one line a pair

Ids exclude BOS and EOS (batching adds them). Reading maps the three binary files with
`numpy.memmap`: opening a split of ten million pairs costs milliseconds and no memory of its
own, every `torchrun` process on a machine shares the same page-cache pages, and batches are
built from the lengths array alone (`attnmt.data.batching`). It is fairseq's memory-mapped
indexed dataset (a `.bin` of ids beside an index of sizes and pointers) in plain `.npy`
files, so nothing but numpy is needed to read it (docs/data.md says why not Arrow).

    writer = StoreWriter(folder, "train", dtype=np.uint16)
    writer.add(ids, src_lengths, tgt_lengths)    # any number of chunks
    writer.close()
    store = TokenStore(folder, "train")          # len(store), store.src_lengths, ...
    src_ids, tgt_ids = store.pair(12)            # two views into the mapped file
    store[12]                                    # an Example with its text (read lazily)
"""

from __future__ import annotations

import itertools
import mmap
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from attnmt.data.types import Example
from attnmt.errors import DataError

TEXT_SIDES = ("src", "tgt", "id")
INDEX_CHUNK = 1 << 20  # pairs at a time when `StoreWriter.close` builds the index


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 where every id fits (vocabularies up to 65,536), else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class StoreWriter:
    """Appends chunks of encoded pairs to a split's files; `close` writes the index.

    Memory does not grow with the split: the ids go straight to disk, the lengths to two
    temporary files, and `close` builds the index from those a million pairs at a time.
    """

    def __init__(self, directory: str | Path, split: str, *, dtype: np.dtype):
        self.directory = Path(directory)
        self.split = split
        self.dtype = np.dtype(dtype)
        self._ids = open(self.directory / f"{split}.ids", "wb")  # noqa: SIM115 (closed by close)
        self._lengths = [
            open(self.directory / f".{split}.{side}-lengths", "w+b")  # noqa: SIM115
            for side in ("src", "tgt")
        ]
        self.pairs = 0
        self.tokens = {"src": 0, "tgt": 0}
        self.longest = 0

    def add(self, ids: np.ndarray, src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> None:
        """Append pairs: `ids` holds each pair's source then target ids, in pair order."""
        ids = np.ascontiguousarray(ids, dtype=self.dtype)
        src = np.asarray(src_lengths, dtype=np.uint32)
        tgt = np.asarray(tgt_lengths, dtype=np.uint32)
        counts = int(src.sum(dtype=np.int64)), int(tgt.sum(dtype=np.int64))
        if sum(counts) != ids.size:
            raise ValueError("the lengths of a chunk do not add up to its number of ids")
        self._ids.write(ids.tobytes())
        for handle, lengths in zip(self._lengths, (src, tgt), strict=True):
            handle.write(lengths.tobytes())
        self.pairs += len(src)
        self.tokens["src"] += counts[0]
        self.tokens["tgt"] += counts[1]
        self.longest = max(self.longest, int(src.max(initial=0)), int(tgt.max(initial=0)))

    def add_lists(self, sources: list[list[int]], targets: list[list[int]]) -> None:
        """Append pairs given as id lists (the small corpora, prepared in memory)."""
        rows = [row for pair in zip(sources, targets, strict=True) for row in pair]
        ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=self.dtype)
        self.add(ids, np.array([len(s) for s in sources]), np.array([len(t) for t in targets]))

    def discard(self) -> None:
        """Stop writing after an error (the folder it writes in is then deleted whole)."""
        for handle in (self._ids, *self._lengths):
            handle.close()

    def close(self) -> dict:
        """Write lengths and offsets; return what the store's metadata records of it."""
        self._ids.close()
        length_type = np.uint16 if self.longest < 1 << 16 else np.uint32
        lengths = np.lib.format.open_memmap(
            self.directory / f"{self.split}.lengths.npy", "w+", length_type, (2, self.pairs)
        )
        offsets = np.lib.format.open_memmap(
            self.directory / f"{self.split}.offsets.npy", "w+", np.int64, (self.pairs + 1,)
        )
        offsets[0] = 0
        for handle in self._lengths:
            handle.seek(0)
        for start in range(0, self.pairs, INDEX_CHUNK):
            part = [
                np.frombuffer(handle.read(4 * INDEX_CHUNK), dtype=np.uint32)
                for handle in self._lengths
            ]
            stop = start + len(part[0])
            lengths[0, start:stop], lengths[1, start:stop] = part
            running = np.cumsum(part[0].astype(np.int64) + part[1], dtype=np.int64)
            offsets[start + 1 : stop + 1] = offsets[start] + running
        lengths.flush()
        offsets.flush()
        del lengths, offsets
        for side, handle in zip(("src", "tgt"), self._lengths, strict=True):
            handle.close()
            (self.directory / f".{self.split}.{side}-lengths").unlink()
        return {"pairs": self.pairs, "tokens": dict(self.tokens), "dtype": self.dtype.name}


def _map(path: Path, **kwargs) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", **kwargs)
    except (OSError, ValueError) as err:
        raise DataError(
            f"the token store file '{path}' cannot be read ({err}); delete its folder and "
            "prepare again"
        ) from None


class TokenStore:
    """One split of a prepared cache folder, memory-mapped (see the module docstring).

    A read-only sequence of `Example`s (`len`, indexing, slicing, iteration) whose text is
    read from the split's plain files on demand; training reads only `src_lengths`,
    `tgt_lengths` and `pair(i)`, never the text.

    Shapes:
        src_lengths, tgt_lengths: (N,); offsets: (N + 1,)
    """

    def __init__(self, directory: str | Path, split: str, *, dtype: str):
        self.directory = Path(directory)
        self.split = split
        lengths = _map(self.directory / f"{split}.lengths.npy")
        self.offsets = _map(self.directory / f"{split}.offsets.npy")
        if lengths.ndim != 2 or lengths.shape[0] != 2 or len(self.offsets) != lengths.shape[1] + 1:
            raise DataError(
                f"the token store of split '{split}' in '{self.directory}' is inconsistent; "
                "delete that folder and prepare again"
            )
        self.src_lengths, self.tgt_lengths = lengths[0], lengths[1]
        path = self.directory / f"{split}.ids"
        expected = int(self.offsets[-1]) if len(self.offsets) else 0
        size = path.stat().st_size if path.is_file() else -1
        if size != expected * np.dtype(dtype).itemsize:
            raise DataError(
                f"'{path}' holds {size} bytes where its index needs "
                f"{expected * np.dtype(dtype).itemsize}; delete '{self.directory}' and prepare "
                "again"
            )
        if expected == 0:
            self.ids = np.zeros(0, dtype=dtype)
        else:
            self.ids = np.memmap(path, dtype=dtype, mode="r")
            # Batches touch pairs all over the file: no read-ahead of neighbouring pages.
            raw = getattr(self.ids, "_mmap", None)
            if raw is not None and hasattr(mmap, "MADV_RANDOM"):
                raw.madvise(mmap.MADV_RANDOM)

    def __len__(self) -> int:
        return len(self.src_lengths)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Pair i's source and target ids: two read-only views into the mapped file."""
        start, middle = int(self.offsets[i]), int(self.offsets[i]) + int(self.src_lengths[i])
        return self.ids[start:middle], self.ids[middle : int(self.offsets[i + 1])]

    def nbytes(self) -> int:
        """Bytes of the ids and the index on disk (the text files not counted)."""
        names = (f"{self.split}.ids", f"{self.split}.lengths.npy", f"{self.split}.offsets.npy")
        return sum((self.directory / n).stat().st_size for n in names)

    # ----------------------------------------------------------------------------------
    # As a sequence of Examples (text read from the plain files, in order)
    # ----------------------------------------------------------------------------------

    def examples(self, start: int = 0, stop: int | None = None) -> Iterator[Example]:
        """Examples `start` to `stop` (text, references, ids), read sequentially."""
        stop = len(self) if stop is None else min(stop, len(self))
        if start >= stop:
            return
        names = [f"{self.split}.{side}" for side in TEXT_SIDES]
        refs = sorted(
            self.directory.glob(f"{self.split}.ref*"), key=lambda p: int(p.suffix[4:] or 0)
        )
        files = [open(self.directory / n, encoding="utf-8") for n in names]  # noqa: SIM115
        files += [open(p, encoding="utf-8") for p in refs]  # noqa: SIM115
        try:
            lines = zip(*(itertools.islice(f, start, stop) for f in files), strict=False)
            for i, row in enumerate(lines, start=start):
                src, tgt, ident, *more = (line.rstrip("\n") for line in row)
                src_ids, tgt_ids = self.pair(i)
                yield Example(
                    src=src,
                    tgt=tgt,
                    refs=[r for r in more if r],
                    src_ids=src_ids.tolist(),
                    tgt_ids=tgt_ids.tolist(),
                    id=ident,
                )
        finally:
            for f in files:
                f.close()

    def __iter__(self) -> Iterator[Example]:
        return self.examples()

    def __getitem__(self, index: int | slice) -> Example | list[Example]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            return list(self.examples(start, stop))[::step]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"pair {index} is outside the {len(self):,} pairs of {self.split}")
        return next(self.examples(index, index + 1))

    def __bool__(self) -> bool:
        return len(self) > 0

    def __repr__(self) -> str:
        return f"TokenStore({str(self.directory)!r}, {self.split!r}, pairs={len(self):,})"
