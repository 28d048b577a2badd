"""Image tasks from the UCI digits (attnmt.data.images): the canvases and their ground
truth, the disjoint scan pools, the pixel-token text and vocabulary, and the picture."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from attnmt.data import BOS, EOS, PAD, UNK, images
from attnmt.data.images import (
    CANVAS,
    LEVEL_CHARS,
    TASKS,
    Canvas,
    CanvasVocab,
    canvas_text,
    digit_vocab,
    draw_examples,
    make_image_task,
    scan_pools,
    text_pixels,
    to_examples,
)
from attnmt.errors import DataError

SIZES = {"train_size": 300, "dev_size": 60, "test_size": 60}
SPLITS = ("train", "dev", "test")


@pytest.fixture(scope="module")
def made() -> dict[str, dict[str, list[Canvas]]]:
    """Both tasks at seed 1 (small)."""
    return {name: make_image_task(name, **SIZES, seed=1) for name in TASKS}


def _every(made, name):
    return [(split, c) for split in SPLITS for c in made[name][split]]


def _same(a: list[Canvas], b: list[Canvas]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.pixels, y.pixels)
        and (x.digits, x.boxes, x.scans) == (y.digits, y.boxes, y.scans)
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("name", TASKS)
def test_the_same_seed_makes_the_same_canvases_and_another_seed_others(made, name):
    again = make_image_task(name, **SIZES, seed=1)
    other = make_image_task(name, **SIZES, seed=2)
    for split in SPLITS:
        assert _same(made[name][split], again[split])
        assert not _same(made[name][split], other[split])


@pytest.mark.parametrize("name", TASKS)
def test_dev_and_test_do_not_depend_on_the_training_size(made, name):
    bigger = make_image_task(name, train_size=500, dev_size=60, test_size=60, seed=1)
    assert _same(made[name]["dev"], bigger["dev"]) and _same(made[name]["test"], bigger["test"])
    assert _same(made[name]["train"], bigger["train"][:300])  # the same stream, drawn further


@pytest.mark.parametrize("name", TASKS)
def test_canvases_have_the_task_shape_and_levels(made, name):
    assert [len(made[name][s]) for s in SPLITS] == [300, 60, 60]
    for _, canvas in _every(made, name):
        assert canvas.pixels.shape == CANVAS[name] and canvas.pixels.dtype == np.uint8
        assert canvas.pixels.max() <= 16
        assert len(canvas.digits) == len(canvas.boxes) == len(canvas.scans)
        assert all(isinstance(d, int) and 0 <= d <= 9 for d in canvas.digits)


def test_digit_strings_hold_two_to_five_digits_left_to_right_without_overlap(made):
    height, width = CANVAS["digits"]
    labels = images._scans()[1]
    counts = set()
    for _, canvas in _every(made, "digits"):
        counts.add(len(canvas.digits))
        assert canvas.digits == [int(labels[s]) for s in canvas.scans]
        for top, left, bottom, right in canvas.boxes:
            assert 0 <= top < bottom <= height and 0 <= left < right <= width
            assert bottom - top == right - left and 8 <= right - left <= 12  # square, 8..12
        for (_, _, _, right), (_, left, _, _) in zip(canvas.boxes, canvas.boxes[1:], strict=False):
            assert right <= left  # the next digit starts where this one ended, or later
    assert counts == {2, 3, 4, 5}


def test_a_digit_box_holds_exactly_its_scan_and_fragments_stay_outside(made):
    fragments_seen = 0
    for _, canvas in _every(made, "digits"):
        outside = canvas.pixels.copy()
        for (top, left, bottom, right), scan in zip(canvas.boxes, canvas.scans, strict=True):
            region = canvas.pixels[top:bottom, left:right]
            # no distractor and no other digit reaches into a digit's box
            assert np.array_equal(region, images._sized(bottom - top)[scan])
            assert region.sum() > 0  # the box holds ink
            outside[top:bottom, left:right] = 0
        assert np.count_nonzero(outside) <= 3 * 4 * 4  # 1-3 fragments of at most 4x4
        fragments_seen += bool(outside.any())
    assert fragments_seen > 0.9 * len(_every(made, "digits"))  # nearly all show a distractor


def test_a_cluttered_canvas_holds_one_digit_among_clutter(made):
    height, width = CANVAS["cluttered"]
    labels = images._scans()[1]
    clutter_outside = 0
    for _, canvas in _every(made, "cluttered"):
        [(top, left, bottom, right)], [scan] = canvas.boxes, canvas.scans
        assert canvas.digits == [int(labels[scan])]
        assert 0 <= top < bottom <= height and 0 <= left < right <= width
        assert bottom - top == right - left and 10 <= right - left <= 14
        region = canvas.pixels[top:bottom, left:right]
        assert (region >= images._sized(bottom - top)[scan]).all()  # clutter may add ink
        assert region.sum() > 0
        outside = canvas.pixels.copy()
        outside[top:bottom, left:right] = 0
        assert np.count_nonzero(outside) <= 8 * 4 * 4
        clutter_outside += bool(outside.any())
    assert clutter_outside > 0.9 * len(_every(made, "cluttered"))


def test_scan_pools_split_the_scans_disjointly_by_seed():
    pools = scan_pools(1)
    sizes = [len(pools[s]) for s in SPLITS]
    assert sizes == [1258, 270, 269] and sum(sizes) == 1797
    train, dev, test = (set(pools[s]) for s in SPLITS)
    assert not (train & dev or train & test or dev & test)
    assert train | dev | test == set(range(1797))
    assert scan_pools(1) == pools and scan_pools(2)["test"] != pools["test"]


@pytest.mark.parametrize("name", TASKS)
def test_every_digit_and_fragment_comes_from_its_splits_pool(made, name, monkeypatch):
    pools = scan_pools(1)
    for split, canvas in _every(made, name):
        assert set(canvas.scans) <= set(pools[split])
    # fragments: the pool every fragment is cut from (test_a_fragment_is_a_crop_... shows
    # that a fragment is a crop of a scan of the pool it is given)
    which = {frozenset(pool): split for split, pool in pools.items()}
    cut_from: list[str] = []
    fragment = images._fragment

    def spy(rng, pool, size):
        cut_from.append(which.get(frozenset(pool), "another pool"))
        return fragment(rng, pool, size)

    monkeypatch.setattr(images, "_fragment", spy)
    again = make_image_task(name, train_size=10, dev_size=10, test_size=10, seed=1)
    assert all(_same(again[s], made[name][s][:10]) for s in SPLITS)  # the spy changes nothing
    # the splits are made in turn (train, dev, test), each cutting from its own pool only
    assert cut_from == sorted(cut_from, key=SPLITS.index) and set(cut_from) == set(SPLITS)


def test_a_fragment_is_a_crop_of_a_pool_scan_with_ink():
    levels = images._levels()
    rng = np.random.default_rng(0)
    for scan in (0, 17, 1796):
        for size in (3, 4):
            crop = images._fragment(rng, [scan], size)
            assert crop.shape == (size, size) and crop.dtype == np.uint8
            windows = np.lib.stride_tricks.sliding_window_view(levels[scan], (size, size))
            assert (windows == crop).all(axis=(-2, -1)).any()  # a window of that scan
            assert crop.sum() >= 32


def test_resampling_keeps_levels_and_corners():
    scan = images._scans()[0][5]
    same = images._resized(scan, 8)
    assert np.array_equal(same, scan.astype(np.uint8))  # side 8: the scan itself
    big = images._resized(scan, 12)
    assert big.shape == (12, 12) and big.dtype == np.uint8 and big.max() <= 16
    assert big[0, 0] == scan[0, 0] and big[-1, -1] == scan[-1, -1]  # corners aligned
    assert np.array_equal(images._sized(12)[5], big)  # the cached table, scan by scan


def test_canvas_text_writes_rows_of_level_characters():
    pixels = np.array([[0, 16, 10], [1, 2, 3]], dtype=np.uint8)
    assert canvas_text(pixels) == "0ga 123"
    assert np.array_equal(text_pixels("0ga 123"), pixels)
    assert text_pixels("0ga 123").dtype == np.uint8
    assert LEVEL_CHARS[16] == "g" and len(LEVEL_CHARS) == 17
    with pytest.raises(ValueError, match=r"0\.\.16"):
        canvas_text(np.array([[0, 17]]))
    with pytest.raises(ValueError, match=r"\(H, W\) integer array"):
        canvas_text(np.zeros(4, dtype=np.uint8))


@pytest.mark.parametrize("name", TASKS)
def test_canvas_text_round_trips_every_canvas(made, name):
    for _, canvas in _every(made, name)[:100]:
        text = canvas_text(canvas.pixels)
        rows = text.split(" ")
        assert len(rows) == CANVAS[name][0] and {len(r) for r in rows} == {CANVAS[name][1]}
        assert np.array_equal(text_pixels(text), canvas.pixels)


@pytest.mark.parametrize(
    ("text", "needle"),
    [("", "empty"), ("   ", "empty"), ("00 000", r"lengths \[2, 3\]"), ("0h 00", r"\['h'\]")],
)
def test_a_malformed_image_text_is_a_clear_data_error(text, needle):
    with pytest.raises(DataError, match=needle):
        text_pixels(text)
    with pytest.raises(DataError, match=needle):
        CanvasVocab(2, 2).encode(text)


def test_canvas_vocab_encodes_a_pixel_as_four_plus_its_level_and_decodes_back(made):
    vocab = CanvasVocab(*CANVAS["digits"])
    assert vocab.size == 21 and vocab.itos == ["<pad>", "<unk>", "<s>", "</s>", *LEVEL_CHARS]
    assert vocab.stoi["0"] == 4 and vocab.stoi["g"] == 20
    canvas = made["digits"]["test"][0]
    text = canvas_text(canvas.pixels)
    ids = vocab.encode(text)
    assert len(ids) == 24 * 64 and ids == (canvas.pixels.reshape(-1) + 4).tolist()
    assert vocab.decode(ids) == text
    assert vocab.decode([BOS, *ids, EOS, 20, 20]) == text  # stops at EOS, skips BOS
    assert vocab.decode([PAD, *ids, PAD]) == text
    assert vocab.pieces(text) == list(text.replace(" ", "")) and len(vocab.pieces(text)) == 1536
    assert vocab.word_of(text) == list(range(1536))
    assert vocab.id_pieces([BOS, 4, 20, EOS]) == ["<s>", "0", "g", "</s>"]
    small = CanvasVocab(2, 3)
    assert small.encode("0ga 123") == [4, 20, 14, 5, 6, 7]
    assert small.decode([4, 20, UNK, 5, 6, 7]) == "0g0 123"  # UNK reads as level 0


def test_canvas_vocab_rejects_an_image_of_another_shape_naming_both():
    text = canvas_text(np.zeros(CANVAS["cluttered"], dtype=np.uint8))
    with pytest.raises(DataError, match=r"24x64.*40x40"):
        CanvasVocab(*CANVAS["digits"]).encode(text)
    with pytest.raises(ValueError, match="positive"):
        CanvasVocab(0, 5)


def test_canvas_vocab_saves_and_loads(tmp_path):
    vocab = CanvasVocab(24, 64)
    path = vocab.save(tmp_path / "vocab")
    assert path == tmp_path / "vocab" / "canvas.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {"height": 24, "width": 64}
    assert [p.name for p in path.parent.iterdir()] == ["canvas.json"]  # no temporary left
    loaded = CanvasVocab.load(tmp_path / "vocab")
    assert loaded == vocab and hash(loaded) == hash(vocab) and loaded.itos == vocab.itos
    assert vocab != CanvasVocab(40, 40) and vocab != digit_vocab()
    assert repr(vocab) == "CanvasVocab(24x64)"


@pytest.mark.parametrize(
    "content", [None, "not json", "[24, 64]", '{"height": 24}', '{"height": -1, "width": 5}']
)
def test_a_missing_or_bad_canvas_file_is_a_data_error(tmp_path, content):
    if content is not None:
        (tmp_path / "canvas.json").write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=r"canvas\.json.*CanvasVocab\.save"):
        CanvasVocab.load(tmp_path)


def test_the_target_side_is_the_ten_digits():
    vocab = digit_vocab()
    assert vocab.size == 14 and vocab.itos[4:] == [str(d) for d in range(10)]
    assert vocab.encode("3 1 4") == [7, 5, 8] and vocab.decode([7, 5, 8, EOS, 4]) == "3 1 4"


@pytest.mark.parametrize("name", TASKS)
def test_to_examples_pairs_the_image_text_with_its_digits(made, name):
    canvases = made[name]["dev"][:5]
    examples = to_examples(name, canvases, "dev")
    assert [ex.id for ex in examples] == [f"{name}.dev:{i}" for i in range(5)]
    source, target = CanvasVocab(*CANVAS[name]), digit_vocab()
    for ex, canvas in zip(examples, canvases, strict=True):
        assert ex.src == canvas_text(canvas.pixels)
        assert ex.tgt == " ".join(map(str, canvas.digits))
        assert ex.src_ids == [] and ex.tgt_ids == []  # the caller fills them
        assert len(source.encode(ex.src)) == canvas.pixels.size
        assert target.decode(target.encode(ex.tgt)) == ex.tgt


def test_draw_examples_writes_a_png(made, tmp_path):
    path = draw_examples(made["digits"]["test"], tmp_path / "show" / "digits.png", title="test")
    assert path == tmp_path / "show" / "digits.png"
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000
    few = draw_examples(made["cluttered"]["dev"][:3], tmp_path / "few.png")
    assert few.read_bytes().startswith(b"\x89PNG")
    bare = Canvas(np.zeros((4, 6), np.uint8), [1], [])  # read back from text: no boxes
    assert draw_examples([bare], tmp_path / "bare.png").stat().st_size > 0
    with pytest.raises(ValueError, match="at least one canvas"):
        draw_examples([], tmp_path / "none.png")


def test_an_unknown_task_or_a_bad_size_is_a_value_error():
    with pytest.raises(ValueError, match="valid: digits, cluttered"):
        make_image_task("mnist", train_size=10)
    for bad in ({"train_size": 0}, {"train_size": 10, "dev_size": -1}, {"train_size": 2.5}):
        with pytest.raises(ValueError, match="_size must be an integer of at least 1"):
            make_image_task("digits", **{"train_size": 10, **bad})
    with pytest.raises(ValueError, match="seed"):
        make_image_task("digits", train_size=10, seed=-1)


def test_the_canvases_of_seed_one_stay_as_they_were():
    """Prepared data and reported results were made with these canvases: a change to the
    generator (or its random streams) must be deliberate, and this fingerprint updated."""
    digest = hashlib.sha256()
    for name in TASKS:
        for canvases in make_image_task(name, train_size=4, dev_size=2, test_size=2).values():
            for c in canvases:
                digest.update(c.pixels.tobytes() + repr((c.digits, c.boxes, c.scans)).encode())
    assert digest.hexdigest()[:16] == "3c84fe103477301e"
