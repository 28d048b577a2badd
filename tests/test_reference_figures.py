"""benchmarks/reference_figures.py's counting: local reversals, crossings, head profiles."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from attnmt.alignment.links import local_reversals

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "reference_figures.py"
spec = importlib.util.spec_from_file_location("reference_figures", PATH)
figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figures)


def test_bare_words_lose_end_punctuation_and_case_only():
    assert figures.bare("Life.") == "life" and figures.bare("l'amour,") == "l'amour"
    assert figures.bare("...") == "..."  # nothing but punctuation: kept as it is


def test_a_local_reversal_is_two_adjacent_words_swapped_one_to_one():
    # has(0) eternal(1) life(2) -> a(0) la(1) vie(2) éternelle(3): eternal-life swapped.
    links = {(0, 0), (1, 3), (2, 2)}
    assert local_reversals(links) == [(1, 2, 3, 2)]
    assert local_reversals({(0, 0), (1, 1), (2, 2)}) == []  # monotone: none
    assert local_reversals({(1, 3), (2, 1)}) == []  # swapped, not adjacent
    # A word with two links is not one to one: no reversal, whatever the order.
    assert local_reversals({(1, 3), (1, 4), (2, 2)}) == []
    assert local_reversals({(1, 3), (2, 2), (0, 2)}) == []


def _record(matrix):
    words = [f"w{i}" for i in range(len(matrix[0]))]
    targets = [f"t{j}" for j in range(len(matrix))]
    return {"attention": [{"word": matrix}], "source_words": words, "target_words": targets}


def test_crossings_count_rows_whose_maximum_is_on_the_linked_word():
    gold = [{(0, 0), (1, 3), (2, 2)}] * 2
    crossing = [[1, 0, 0], [0, 1, 0], [0, 0.1, 0.9], [0, 0.8, 0.2]]
    straight = [[1, 0, 0], [0, 1, 0], [0, 0.9, 0.1], [0, 0.2, 0.8]]
    result = figures.crossings([_record(crossing), _record(straight)], gold, 0)
    assert result["reversals"] == 2 and result["crossed"] == 1
    assert result["missed_examples"] == ["w1 w2 -> t2 t3"]


def test_head_profile_places_each_rows_maximum_relative_to_the_linked_word():
    gold = [{(0, 0), (1, 1), (2, 2), (3, 3)}]
    # Row 0 on its word, row 1 one word before (0), row 2 one after (3, also the last
    # word: the first category that holds counts), row 3 on its own word, the last one.
    matrix = np.eye(4)[[0, 0, 3, 3]]
    profile = figures.head_profile([_record(matrix.tolist())], gold, 0)
    assert profile["on"] == 50.0 and profile["one_before"] == 25.0
    assert profile["one_after"] == 25.0 and profile["last_word"] == 0.0
    lost = figures.head_profile([_record(np.eye(4)[[3, 3, 0, 3]].tolist())], gold, 0)
    assert lost["last_word"] == 50.0 and lost["on"] == 25.0  # rows 0 and 1 on the last word
    # AER of the argmax links {(0,0),(0,1),(3,2),(3,3)} against the four sure links: 1 - 4/8.
    assert profile["aer"] == pytest.approx(50.0)
