"""Attention -> word alignments -> AER, checked on cases small enough to compute by hand."""

from fractions import Fraction

import numpy as np
import pytest
import torch

from attnmt.alignment.links import (
    alignment_scores,
    diagonal_alignment,
    extract_alignment,
    merge_to_words,
)

# 3 target pieces (2 words: pieces 0-1 and 2) over 4 source pieces (2 words: 0-1, 2-3) + EOS.
PIECE_WEIGHTS = np.array(
    [
        [0.1, 0.2, 0.3, 0.3, 0.1],
        [0.5, 0.1, 0.1, 0.2, 0.1],
        [0.0, 0.6, 0.2, 0.2, 0.0],
    ]
)


def test_merge_sums_source_pieces_and_averages_target_pieces():
    words = merge_to_words(PIECE_WEIGHTS, src_word_of=[0, 0, 1, 1], tgt_word_of=[0, 0, 1])
    # Source sums per piece row: [0.3, 0.6], [0.6, 0.3], [0.6, 0.4] (EOS column dropped).
    # Target word 0 = mean of rows 0 and 1 = [0.45, 0.45]; word 1 = row 2 = [0.6, 0.4].
    np.testing.assert_allclose(words, [[0.45, 0.45], [0.6, 0.4]])
    # Rows summed to one; they still do, less the EOS mass (0.1 for word 0, 0 for word 1).
    np.testing.assert_allclose(words.sum(axis=1), [0.9, 1.0])
    assert (words.sum(axis=1) <= 1.0 + 1e-12).all()


def test_merge_drops_minus_one_pieces_and_takes_tensors():
    words = merge_to_words(
        torch.tensor(PIECE_WEIGHTS), src_word_of=[0, -1, 1, 1], tgt_word_of=[-1, 0, 1]
    )
    np.testing.assert_allclose(words, [[0.5, 0.3], [0.0, 0.4]], atol=1e-7)


def test_merge_keeps_all_pieces_when_maps_cover_everything():
    weights = np.random.default_rng(0).dirichlet(np.ones(5), size=4)  # rows sum to 1
    words = merge_to_words(weights, [0, 1, 1, 2, 3], [0, 1, 1, 2])
    assert words.shape == (3, 4)
    np.testing.assert_allclose(words.sum(axis=1), 1.0)


def test_merge_names_shapes_in_errors():
    with pytest.raises(ValueError, match=r"\(T_sub, S_sub\).*\(3, 1, 1, 5\)"):
        merge_to_words(PIECE_WEIGHTS[:, None, None, :], [0], [0])
    with pytest.raises(ValueError, match=r"6 entries.*only 5 src positions"):
        merge_to_words(PIECE_WEIGHTS, [0, 0, 1, 1, 2, 2], [0, 0, 1])
    with pytest.raises(ValueError, match=r"tgt_word_of.*0\.\.N-1"):
        merge_to_words(PIECE_WEIGHTS, [0, 0, 1, 1], [0, 0, 2])


def test_extract_alignment_with_and_without_threshold():
    weights = np.array(
        [
            [0.7, 0.2, 0.1],
            [0.1, 0.3, 0.6],
            [0.0, 0.0, 0.0],  # attends nowhere: no link
        ]
    )
    assert extract_alignment(weights) == {(0, 0), (2, 1)}
    assert extract_alignment(weights, threshold=0.25) == {(0, 0), (1, 1), (2, 1)}
    assert extract_alignment(weights, threshold=0.1) == {
        (0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)
    }  # fmt: skip
    # A threshold above every weight still leaves the best link of each row.
    assert extract_alignment(weights, threshold=0.99) == {(0, 0), (2, 1)}
    # Ties go to the first source word.
    assert extract_alignment(np.array([[0.5, 0.5]])) == {(0, 0)}


def test_aer_perfect_and_disjoint():
    gold = [{(0, 0), (1, 1)}, {(0, 0)}]
    perfect = alignment_scores(gold, gold)
    assert perfect["aer"] == 0.0
    assert perfect["precision"] == perfect["recall"] == 1.0
    disjoint = alignment_scores([{(1, 0), (0, 1)}, {(1, 1)}], gold)
    assert disjoint["aer"] == 1.0
    assert disjoint["precision"] == disjoint["recall"] == 0.0


def test_aer_worked_example_with_possible_links():
    predicted = [{(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 0)}]
    sure = [{(0, 0), (1, 1)}, {(0, 0), (1, 1)}]
    possible = [{(2, 1)}, set()]  # sure links are added: P1 = {(0,0),(1,1),(2,1)}, P2 = S2
    # |A| = 3 + 2 = 5, |S| = 2 + 2 = 4, |P| = 3 + 2 = 5
    # |A∩S| = 2 + 1 = 3, |A∩P| = 3 + 1 = 4
    # precision = 4/5, recall = 3/4, AER = 1 - (3 + 4) / (5 + 4) = 2/9
    scores = alignment_scores(predicted, sure, possible)
    assert scores["precision"] == pytest.approx(4 / 5)
    assert scores["recall"] == pytest.approx(3 / 4)
    assert scores["aer"] == pytest.approx(2 / 9)
    counts = {k: scores[k] for k in ("predicted", "sure", "possible", "sure_hits")}
    assert counts == {"predicted": 5, "sure": 4, "possible": 5, "sure_hits": 3}
    assert scores["possible_hits"] == 4
    # Without possible links P = S: |A∩P| = 3, precision 3/5, AER = 1 - 6/9 = 1/3.
    strict = alignment_scores(predicted, sure)
    assert strict["precision"] == pytest.approx(3 / 5)
    assert strict["aer"] == pytest.approx(1 / 3)


def test_aer_empty_cases_do_not_divide_by_zero():
    both_empty = alignment_scores([set()], [set()])
    assert (both_empty["precision"], both_empty["recall"], both_empty["aer"]) == (1.0, 1.0, 0.0)
    nothing_predicted = alignment_scores([set()], [{(0, 0)}])
    assert nothing_predicted["precision"] == 1.0
    assert nothing_predicted["recall"] == 0.0
    assert nothing_predicted["aer"] == 1.0
    assert alignment_scores([], [])["aer"] == 0.0
    with pytest.raises(ValueError, match="one per sentence"):
        alignment_scores([set()], [set(), set()])


def test_diagonal_baseline_square_and_rectangular():
    assert diagonal_alignment(3, 3) == {(0, 0), (1, 1), (2, 2)}
    assert diagonal_alignment(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    assert diagonal_alignment(4, 2) == {(1, 0), (3, 1)}  # 0.5 and 2.5 round half up
    assert diagonal_alignment(5, 3) == {(0, 0), (2, 1), (4, 2)}
    assert diagonal_alignment(0, 3) == diagonal_alignment(3, 0) == set()
    with pytest.raises(ValueError, match=">= 0"):
        diagonal_alignment(-1, 2)


@pytest.mark.parametrize("src_len", range(1, 12))
@pytest.mark.parametrize("tgt_len", range(1, 12))
def test_diagonal_baseline_matches_its_formula(src_len, tgt_len):
    links = diagonal_alignment(src_len, tgt_len)
    assert sorted(j for _, j in links) == list(range(tgt_len))  # one link per target word
    for i, j in links:
        position = Fraction(2 * j + 1, 2) * Fraction(src_len, tgt_len) - Fraction(1, 2)
        expected = min(max(int(position + Fraction(1, 2)), 0), src_len - 1)  # half up, clip
        assert i == expected


def test_a_diagonal_attention_scores_like_the_diagonal_baseline():
    merged = merge_to_words(np.eye(4, 5), [0, 1, 2, 3], [0, 1, 2, 3])
    predicted = extract_alignment(merged)
    assert predicted == diagonal_alignment(4, 4)
    assert alignment_scores([predicted], [diagonal_alignment(4, 4)])["aer"] == 0.0
