"""The recorded search (`SearchTree`), prefix-constrained decoding and alternatives, on
tiny random models of each family: the tree is the search that ran, a forced prefix is
honoured and scored as `attnmt score` scores it, alternatives are the next tokens' best."""

import itertools
import math

import pytest
import torch
from tests.test_decode import RANDOM_MODELS, _random_model

from attnmt.data import EOS, pad_batch
from attnmt.decoding.hypotheses import begin
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.scoring import forced_weights, score_pairs
from attnmt.decoding.search import alternatives, beam_search, greedy
from attnmt.decoding.search_tree import ENDED, FINISHED, FORCED, KEPT, PRUNED, ROOT

CPU = torch.device("cpu")
SOURCES = [[4, 5, 6, 7, 8], [9, 10, 4], [4]]


def _batch(sources):
    return pad_batch([[*s, EOS] for s in sources], CPU)


def _search(model, sources, options):
    src, mask = _batch(sources)
    trees = []
    hyps = beam_search(model, src, mask, options, trees=trees)
    return hyps, trees


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
def test_the_tree_is_the_search_that_ran(name):
    model = _random_model(name)
    options = SearchOptions(beam=3, n_best=3, max_len_ratio=1.5, need_weights=True)
    hyps, trees = _search(model, SOURCES, options)
    plain = beam_search(model, *_batch(SOURCES), options)
    # Recording changes nothing in what the search finds.
    assert [[h.tokens for h in n] for n in hyps] == [[h.tokens for h in n] for n in plain]
    pruned_seen = 0
    for _source, nbest, tree in zip(SOURCES, hyps, trees, strict=True):
        nodes = tree.nodes
        assert nodes[0].status == ROOT and nodes[0].parent is None
        for node in nodes[1:]:  # parents exist, one level up, made before their children
            assert node.parent is not None and node.parent < node.id
            assert nodes[node.parent].depth == node.depth - 1
            assert nodes[node.parent].status in (ROOT, FORCED, KEPT)
            lp = nodes[node.parent].cum_log_prob + node.log_prob
            assert node.cum_log_prob == pytest.approx(lp, abs=1e-4)
        # The finished leaves are the n-best (K = n_best here: all of them), same scores.
        finished = [n for n in nodes if n.status == FINISHED]
        assert sorted(n.id for n in finished) == sorted(tree.nbest)
        for rank, (hyp, node_id) in enumerate(zip(nbest, tree.nbest, strict=True)):
            leaf = nodes[node_id]
            assert leaf.rank == rank and hyp.node == node_id
            assert leaf.score == pytest.approx(hyp.score, abs=1e-5)
            assert leaf.cum_log_prob == pytest.approx(hyp.log_prob, abs=1e-5)
            path = tree.path(node_id)
            assert [n.token for n in path] == [*hyp.tokens, EOS]
            # Each node's attention row is the row its hypothesis keeps for that token.
            rows = torch.stack([n.weights for n in path])
            torch.testing.assert_close(rows, hyp.weights, atol=1e-6, rtol=0)
        best_path = {n.id for n in tree.path(tree.nbest[0])} | {0}
        assert {n.id for n in nodes if n.best} == best_path
        # At every step the kept hypotheses outscore the pruned ones.
        for depth in range(1, max(n.depth for n in nodes) + 1):
            level = [n for n in nodes if n.depth == depth]
            kept = [n.cum_log_prob for n in level if n.status == KEPT]
            pruned = [n.cum_log_prob for n in level if n.status == PRUNED]
            pruned_seen += len(pruned)
            if kept and pruned:
                assert min(kept) >= max(pruned)
            assert len(kept) + sum(n.status == ENDED for n in level) <= 3
        # Rejected candidates are the expanded node's other top tokens, never a child's.
        for node in nodes:
            children = {n.token for n in nodes if n.parent == node.id and n.status != PRUNED}
            assert not children & {token for token, _ in node.rejected}
            assert all(lp <= 0 for _, lp in node.rejected)
        # (at the length limit only EOS may follow: nothing else is a candidate there)
        assert any(n.rejected for n in nodes if n.status == KEPT)
    assert pruned_seen > 0  # not vacuous


def test_the_steps_streamed_are_the_tree():
    model = _random_model("transformer")
    src, mask = _batch(SOURCES)
    streamed: dict[int, list] = {i: [] for i in range(len(SOURCES))}
    trees = []
    beam_search(
        model,
        src,
        mask,
        SearchOptions(beam=2, need_weights=True),
        trees=trees,
        on_step=lambda b, nodes: streamed[b].extend(nodes),
    )
    for b, tree in enumerate(trees):
        latest = {n.id: n for n in streamed[b]}  # a node sent again replaces what was sent
        assert sorted(latest) == [n.id for n in tree.nodes]
        assert [latest[n.id].token for n in tree.nodes] == [n.token for n in tree.nodes]
        first = list(dict.fromkeys(n.id for n in streamed[b]))  # made in the tree's order
        assert first == [n.id for n in tree.nodes]


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
def test_greedy_tree_is_a_path_equal_to_greedy_output(name):
    model = _random_model(name)
    src, mask = _batch(SOURCES)
    plain = greedy(model, src, mask, SearchOptions(need_weights=True))
    trees = []
    beam_search(model, src, mask, SearchOptions(beam=1, need_weights=True), trees=trees)
    for hyp, tree in zip(plain, trees, strict=True):
        spine = [n for n in tree.nodes if n.status in (ROOT, KEPT, FINISHED)]
        assert [n.depth for n in spine] == list(range(len(spine)))
        assert all(b.parent == a.id for a, b in itertools.pairwise(spine))
        assert [n.token for n in spine[1:]] == [*hyp.tokens, EOS]
        assert spine[-1].score == pytest.approx(hyp.score, abs=1e-5)


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
def test_forcing_the_models_own_start_gives_back_its_translation(name):
    model = _random_model(name)
    for source in SOURCES:
        src, mask = _batch([source])
        (own,) = greedy(model, src, mask, SearchOptions(need_weights=True))
        for k in range(len(own.tokens) + 1):
            prefix = torch.tensor([own.tokens[:k]])
            (again,) = greedy(model, src, mask, SearchOptions(need_weights=True), prefix=prefix)
            assert again.tokens == own.tokens
            assert again.log_prob == pytest.approx(own.log_prob, abs=1e-4)
            torch.testing.assert_close(again.weights, own.weights, atol=1e-5, rtol=0)
        # Beam search: the whole of its best output forced gives back that output; a part
        # of it need not. The prefix's descendants fill the K places that other branches
        # held, and one of them can push the best's continuation out of the beam later
        # (seen on this rnnsearch: source [4], prefix [9]), so beam search from the model's
        # own prefix is not monotone (docs/decoding.md says so).
        ((best, *_),) = beam_search(model, src, mask, SearchOptions(beam=3))
        for k in (0, len(best.tokens)):
            prefix = torch.tensor([best.tokens[:k]])
            ((again, *_),) = beam_search(model, src, mask, SearchOptions(beam=3), prefix=prefix)
            assert again.tokens == best.tokens
            assert again.score == pytest.approx(best.score, abs=1e-4)


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
@pytest.mark.parametrize("beam", [1, 3])
def test_a_forced_prefix_appears_verbatim_and_is_scored_as_score_scores_it(name, beam):
    model = _random_model(name)
    forced = [[7, 7, 11], [5, 9, 10]]  # unlikely tokens: the model would not say them
    src, mask = _batch(SOURCES[:2])
    prefix = torch.tensor(forced)
    if beam == 1:
        hyps = greedy(model, src, mask, SearchOptions(need_weights=True), prefix=prefix)
    else:
        hyps = [
            h[0]
            for h in beam_search(
                model, src, mask, SearchOptions(beam=beam, need_weights=True), prefix=prefix
            )
        ]
    for source, hyp, start in zip(SOURCES, hyps, forced, strict=False):
        assert hyp.tokens[:3] == start
        (scored,) = score_pairs(model, [(source, hyp.tokens)], need_weights=True)
        assert hyp.log_prob == pytest.approx(scored.log_prob, abs=1e-4)
        assert hyp.score == pytest.approx(scored.score, abs=1e-4)
        width = len(source) + 1
        torch.testing.assert_close(hyp.weights[..., :width], scored.weights, atol=1e-5, rtol=0)
        # Alone, the same sentence and prefix find the same thing (the batch is not mixed).
        alone_src, alone_mask = _batch([source])
        if beam == 1:
            (alone,) = greedy(model, alone_src, alone_mask, prefix=torch.tensor([start]))
        else:
            ((alone, *_),) = beam_search(
                model, alone_src, alone_mask, SearchOptions(beam=beam), prefix=torch.tensor([start])
            )
        assert alone.tokens == hyp.tokens


def test_a_prefix_is_read_once_and_recorded_as_forced():
    model = _random_model("rnnsearch")
    src, mask = _batch([SOURCES[0]])
    start = begin(model, src, mask, torch.tensor([[7, 8]]), need_weights=True)
    assert start.tokens.tolist() == [[7, 8]] and start.weights.shape[:2] == (1, 2)
    expected = forced_weights(model, [(SOURCES[0], [7, 8])])[0][:2]
    torch.testing.assert_close(start.weights[0], expected, atol=1e-5, rtol=0)
    trees = []
    (_hyps,) = beam_search(
        model, src, mask, SearchOptions(beam=3, need_weights=True), start=start, trees=trees
    )
    forced = [n for n in trees[0].nodes if n.status == FORCED]
    assert [(n.depth, n.token) for n in forced] == [(1, 7), (2, 8)]
    assert all(n.best for n in forced)
    assert min(n.depth for n in trees[0].nodes if n.status not in (ROOT, FORCED)) == 3


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
@pytest.mark.parametrize("beam", [1, 2])
def test_alternatives_are_the_next_tokens_each_completed_and_scored_whole(name, beam):
    model = _random_model(name)
    source = SOURCES[0]
    src, mask = _batch([source])
    prefix = torch.tensor([[6]])
    found = alternatives(
        model, src, mask, prefix, SearchOptions(beam=beam, need_weights=True), count=4
    )
    assert len(found) == 4
    alts = [hyp for _, _, hyp in found]
    start = begin(model, src, mask, prefix)
    with torch.no_grad():
        logits, _, _ = model.step(start.prev, start.state, start.memory)
    log_probs = torch.log_softmax(logits.float(), dim=-1)[0]
    nexts = [h.tokens[1] if len(h.tokens) > 1 else EOS for h in alts]
    assert len(set(nexts)) == 4
    expected = [float(log_probs[t]) for t in nexts]
    assert expected == sorted(expected, reverse=True)  # most likely first
    assert [t for t, _, _ in found] == nexts
    assert [lp for _, lp, _ in found] == pytest.approx(expected, abs=1e-5)
    for hyp in alts:
        assert hyp.tokens[0] == 6
        (scored,) = score_pairs(model, [(source, hyp.tokens)])
        assert hyp.log_prob == pytest.approx(scored.log_prob, abs=1e-4)
        assert hyp.score == pytest.approx(scored.score, abs=1e-4)
        assert hyp.weights.shape[0] == len(hyp.tokens) + 1
    # The best alternative, completed, is what the search from the prefix finds.
    if beam == 1:
        (plain,) = greedy(model, src, mask, prefix=prefix)
        assert alts[0].tokens == plain.tokens
    # The cut-off: alternatives below it are not expanded, the most likely always is.
    cut = math.exp(expected[1]) + 1e-9
    assert len(alternatives(model, src, mask, prefix, count=4, min_prob=cut)) == 1


def test_recording_costs_nothing_when_off():
    """With no recorder the search makes no node (the recording's cost is measured in
    benchmarks/: this only checks that nothing is recorded behind the caller's back)."""
    model = _random_model("rnnsearch")
    src, mask = _batch(SOURCES)
    hyps = beam_search(model, src, mask, SearchOptions(beam=3))
    assert all(h.node is None for n in hyps for h in n)


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
def test_forced_lengths_give_exactly_that_many_tokens_and_their_true_score(name):
    """Greedy decoding with `exact_lengths`: EOS barred before, forced after; the score is
    what `attnmt score` gives the output; without them the search is what it was."""
    from attnmt.decoding.decode_ids import translate_ids

    model = _random_model(name)
    src, mask = _batch(SOURCES)
    want = [1, 7, 12]  # shorter, longer than the sources, and past the default limit
    hyps = greedy(
        model, src, mask, SearchOptions(max_len_ratio=1.0), exact_lengths=torch.tensor(want)
    )
    assert [len(h.tokens) for h in hyps] == want
    for source, hyp in zip(SOURCES, hyps, strict=True):
        assert EOS not in hyp.tokens
        (scored,) = score_pairs(model, [(source, hyp.tokens)])
        assert hyp.log_prob == pytest.approx(scored.log_prob, abs=1e-4)
    # translate_ids batches by length and keeps the order of `lengths` with its sources
    out = translate_ids(model, SOURCES, lambda ids: " ".join(map(str, ids)), exact_lengths=want)
    assert [len(t.tokens) for t in out] == want
    # A model that wants to stop at once: without exact lengths it does (the option is
    # off unless given), with them it writes the given number of tokens all the same.
    step = model.step

    def eager_to_stop(*args, **kwargs):
        logits, state, weights = step(*args, **kwargs)
        return logits + 100.0 * (torch.arange(logits.shape[-1]) == EOS), state, weights

    model.step = eager_to_stop
    assert [h.tokens for h in greedy(model, src, mask)] == [[], [], []]
    forced = greedy(model, src, mask, exact_lengths=torch.tensor(want))
    assert [len(h.tokens) for h in forced] == want
    with pytest.raises(ValueError, match="greedy"):
        translate_ids(model, SOURCES, str, SearchOptions(beam=2), exact_lengths=want)
