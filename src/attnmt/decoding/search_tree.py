"""The search recorded as a tree: every candidate beam search weighed at every step, with
its parent, token, scores, fate (`status`), the next tokens it produced that went nowhere
and the attention row that produced it. `Recorder` builds one `SearchTree` per sentence
while `attnmt.decoding.search.beam_search` runs, and reports each step's nodes as they
are made (`StepHook`, what the server streams).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attnmt.data.vocab import BOS
from attnmt.decoding.array_ops import ArrayOps
from attnmt.decoding.hypotheses import Hypothesis, Start, length_penalty

if TYPE_CHECKING:  # torch tensors, or numpy arrays for an export (attnmt.runtime)
    from torch import Tensor

# The fate of a candidate in a recorded search (`Node.status`).
ROOT, FORCED, KEPT, PRUNED, FINISHED, ENDED = (
    "root",  # the start: BOS read
    "forced",  # a token of an imposed prefix
    "kept",  # entered the beam and was extended at the next step
    "pruned",  # among the sentence's 2K best candidates of its step, but lost the ranking
    "finished",  # an EOS candidate that became a finished hypothesis
    "ended",  # in the beam when the search stopped (enough finished, or the length limit)
)


class Node:
    """One candidate of a recorded search: `token` appended to its `parent`'s hypothesis.
    The search's own, holding its step's arrays; `records.SearchNode` is its JSON record
    (pieces for tokens, the aligning row of the weights, rounded), which every face shows.

    `log_prob` is the token's own log-probability, `cum_log_prob` the hypothesis' total
    (what the beam ranks), `score` the total over GNMT's length penalty of `depth` tokens
    (an EOS node: the finished hypothesis' score). `rejected` (on an expanded node): the
    tokens among its 2K best next tokens that neither entered the beam nor finished, with
    their log-probabilities. `best`: on the path of the best finished hypothesis; `rank`:
    a finished node's place in the returned n-best list.

    The weights and the rejected list are read when asked for, from what the search kept
    of its step (the step's weights, its candidates): recording makes no tensor per node
    (a tenth of the recording's cost at beam 5: benchmarks/search_record.py).

    Shapes:
        weights: the attention row that produced the token, (S,) RNN, (L, H, S)
        Transformer, (M, S) ensemble, cut to the first `width` source positions when set;
        None for the root or without weights.
    """

    __slots__ = (
        "_rejected",
        "_row",
        "_rows",
        "best",
        "cum_log_prob",
        "depth",
        "id",
        "log_prob",
        "parent",
        "rank",
        "score",
        "status",
        "token",
        "width",
    )  # fmt: skip

    def __init__(
        self,
        id: int,
        parent: int | None,
        depth: int,
        token: int,
        status: str,
        log_prob: float = 0.0,
        cum_log_prob: float = 0.0,
        score: float = 0.0,
        *,
        rows: Tensor | None = None,
        row: int = 0,
    ) -> None:
        self.id, self.parent, self.depth, self.token, self.status = id, parent, depth, token, status
        self.log_prob, self.cum_log_prob, self.score = log_prob, cum_log_prob, score
        self.best, self.rank, self.width = False, None, None
        self._rows, self._row = rows, row  # the weights: rows[row]
        self._rejected: Any = None  # a list, or (tokens, log-probs, taken) to filter

    @property
    def weights(self) -> Tensor | None:
        if self._rows is None:
            return None
        row = self._rows[self._row]
        return row if self.width is None else row[..., : self.width]

    @property
    def rejected(self) -> list[tuple[int, float]]:
        if isinstance(self._rejected, tuple):
            tokens, log_probs, taken = self._rejected
            self._rejected = [
                (t, lp)
                for t, lp in zip(tokens, log_probs, strict=True)
                if t not in taken and lp != float("-inf")
            ]
        return self._rejected or []

    def __repr__(self) -> str:
        return (
            f"Node(id={self.id}, parent={self.parent}, depth={self.depth}, token={self.token}, "
            f"status={self.status!r}, cum_log_prob={self.cum_log_prob:.4f})"
        )


@dataclass
class SearchTree:
    """The recorded search of one sentence: `nodes` in the order they were made (by depth),
    `nbest` the ids of the returned hypotheses' finished nodes, best first."""

    beam: int
    alpha: float
    nodes: list[Node] = field(default_factory=list)
    nbest: list[int] = field(default_factory=list)

    def add(self, node: Node) -> Node:
        node.id = len(self.nodes)
        self.nodes.append(node)
        return node

    def path(self, node_id: int) -> list[Node]:
        """The nodes from depth 1 to `node_id` (the root left out)."""
        out = []
        node = self.nodes[node_id]
        while node.parent is not None:
            out.append(node)
            node = self.nodes[node.parent]
        return out[::-1]


# (sentence index in the batch, nodes): each step the nodes it expanded (sent before, now
# with their `rejected` lists), then the nodes it made; by id, the last sent is the node.
StepHook = Callable[[int, list[Node]], None]


class Recorder:
    """Builds one `SearchTree` per sentence while `beam_search` runs (see `Node`).

    Each step it reads the step's candidates once (`read_step`), then, per sentence, the
    fate the search gave each of its 2K best candidates (`sentence`): a node per candidate,
    the tokens an expanded hypothesis produced that went nowhere as its `rejected` list.
    `rows` maps each beam row of the step to the node of the hypothesis it holds.
    """

    def __init__(
        self, start: Start, k: int, alpha: float, on_step: StepHook | None, ops: ArrayOps
    ) -> None:
        self.k, self.alpha, self.on_step, self.ops = k, alpha, on_step, ops
        batch = start.tokens.shape[0]
        self.trees = [SearchTree(beam=k, alpha=alpha) for _ in range(batch)]
        self.rows: list[int | None] = []
        forced_lp = start.token_log_probs.tolist()
        forced = start.tokens.tolist()
        for b, tree in enumerate(self.trees):
            node = tree.add(Node(0, None, 0, BOS, ROOT))
            cum = 0.0
            made = [node]
            rows = None if start.weights is None else start.weights[b]  # (P, ...)
            for t, (token, lp) in enumerate(zip(forced[b], forced_lp[b], strict=True)):
                cum += lp
                score = cum / float(length_penalty(t + 1, alpha))
                node = tree.add(
                    Node(0, node.id, t + 1, token, FORCED, lp, cum, score, rows=rows, row=t)
                )
                made.append(node)
            self.rows += [node.id] + [None] * (k - 1)
            if on_step is not None:
                on_step(b, made)
        self.new_rows: list[int | None] = []

    def read_step(self, step, beam_top, beam_token, beam_scores, step_weights) -> None:
        self.depth = step + 1
        self.penalty = float(length_penalty(self.depth, self.alpha))
        self.top, self.top_token = beam_top.tolist(), beam_token.tolist()  # (n, K, 2K)
        self.beam_scores = beam_scores.tolist()
        self.weights = None if step_weights is None else self.ops.host(step_weights[:, 0])
        self.new_rows = []

    def sentence(self, sentence, b, scores, origins, tokens, fates, ends, done) -> None:
        tree, k, rows, depth = self.trees[sentence], self.k, self.rows, self.depth
        nodes, beam_scores, weights, penalty = (
            tree.nodes,
            self.beam_scores[b],
            self.weights,
            self.penalty,
        )
        fate = dict(fates)
        finished = sum(1 for _, status in fates if status == FINISHED)
        made, kept, ended_here = [], [], []
        children: dict[int, set[int]] = {}
        for j, score in enumerate(scores):
            if score == float("-inf"):
                break
            status = fate.get(j, PRUNED)
            origin = origins[j]
            row = b * k + origin
            parent = rows[row]
            if parent is None:  # a copy beam of the first step: never live
                continue
            if status == KEPT and ends:
                status = ENDED
            node = Node(
                len(nodes), parent, depth, tokens[j], status, score - beam_scores[origin], score,
                score / penalty, rows=weights, row=row,
            )  # fmt: skip
            nodes.append(node)
            made.append(node)
            if status == FINISHED:  # the i-th finished this step is done[-f + i]
                done[len(done) - finished + len(ended_here)].node = node.id
                ended_here.append(node.id)
            if status in (KEPT, FINISHED, ENDED):
                children.setdefault(row, set()).add(tokens[j])
            if status == KEPT:
                kept.append(node.id)
        for origin in range(k):  # what each expanded hypothesis produced that went nowhere
            row = b * k + origin
            parent = self.rows[row]
            if parent is None:
                continue
            taken = children.get(row, ())
            tree.nodes[parent]._rejected = (self.top_token[b][origin], self.top[b][origin], taken)
        if not ends:
            self.new_rows += kept + [None] * (k - len(kept))
        if self.on_step is not None:  # the expanded nodes again: their `rejected` is new
            expanded = sorted({p for p in self.rows[b * k : (b + 1) * k] if p is not None})
            self.on_step(sentence, [tree.nodes[p] for p in expanded] + made)

    def next_rows(self, keep) -> None:
        self.rows = self.new_rows

    def close(self, results: list[list[Hypothesis]]) -> list[SearchTree]:
        for tree, hyps in zip(self.trees, results, strict=True):
            tree.nbest = [h.node for h in hyps if h.node is not None]
            for rank, node_id in enumerate(tree.nbest):
                tree.nodes[node_id].rank = rank
            if tree.nbest:
                for node in [tree.nodes[0], *tree.path(tree.nbest[0])]:
                    node.best = True
        return self.trees
