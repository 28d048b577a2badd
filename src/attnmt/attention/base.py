"""What every attention mechanism shares: the output dataclass, the score base class, and
the shape checks that turn a wrong tensor into a `ValueError` naming expected and actual
shapes.

Shapes legend: B batch, S source length, T target length, D model width, H heads, Dh head
width; Dq, Dk, Dv the query, key and value widths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor, nn


@dataclass(frozen=True)
class AttentionOutput:
    """What one attention call returns. Nothing is kept on the module between calls.

    Fields:
        context: the weighted sum of the values, `weights @ value`.
        weights: the weights that formed `context` (soft: rows sum to 1 over the positions
            that may be attended, except local-p, whose Gaussian factor makes them sum to
            at most 1; hard: one-hot). `None` when not asked for (multi-head fused path).
        log_prob: hard mode only: log-probability of the chosen position, for a REINFORCE
            loss `-(reward - baseline) * log_prob` (Xu et al. 2015 §4.1). Else `None`.
        position: local scopes only: the aligned source position p_t. Else `None`.
        probs: the normalised distribution behind `weights` (rows sum to 1 over the
            positions that may be attended): soft mode, the softmax before local-p's
            Gaussian factor; hard mode, the distribution the position was sampled from. Use
            it for an entropy bonus or to show soft weights. `None` for multi-head.

    Shapes:
        context: (B, T, Dv)  [multi-head: (B, T, D)]
        weights: (B, T, S)   [multi-head: (B, H, T, S), or (B, T, S) averaged over heads]
        log_prob: (B, T)
        position: (B, T), float
        probs: (B, T, S)
    """

    context: Tensor
    weights: Tensor | None
    log_prob: Tensor | None = None
    position: Tensor | None = None
    probs: Tensor | None = None


def describe_shape(spec: Sequence[str | tuple[str, int]], sizes: dict[str, int]) -> str:
    """Render a shape spec such as `("B", "T", ("Dq", 512))` as `(B=2, T, Dq=512)`."""
    parts = []
    for item in spec:
        if isinstance(item, tuple):
            parts.append(f"{item[0]}={item[1]}")
        elif item in sizes:
            parts.append(f"{item}={sizes[item]}")
        else:
            parts.append(item)
    return "(" + ", ".join(parts) + ")"


def check_shape(
    name: str, tensor: Tensor, spec: Sequence[str | tuple[str, int]], sizes: dict[str, int]
) -> None:
    """Check `tensor` against `spec`, binding symbolic sizes in `sizes` on first sight.

    A spec item is a symbol (`"B"`: any size, but the same everywhere it appears) or a
    named fixed size (`("Dq", 512)`). Raises `ValueError` naming expected and actual shape.
    """
    ok = tensor.dim() == len(spec)
    bound: dict[str, int] = {}
    if ok:
        for item, size in zip(spec, tensor.shape, strict=True):
            if isinstance(item, tuple):
                ok = ok and size == item[1]
            elif item in sizes or item in bound:
                ok = ok and size == sizes.get(item, bound.get(item))
            else:
                bound[item] = size
    if not ok:
        expected = describe_shape(spec, sizes)
        raise ValueError(f"{name} must have shape {expected}, got {tuple(tensor.shape)}")
    sizes.update(bound)


class Score(nn.Module):
    """A score function: how well each query matches each (projected) key.

    Subclasses set `name`, may override `precompute_keys` (the part of the score that
    depends on the keys alone, computed once per source sentence) and implement `forward`.

    Shapes:
        precompute_keys: key (B, S, Dk) -> projected_key (B, S, Dp), Dp = projected_key_dim
        forward: query (B, T, Dq), projected_key (B, S, Dp) -> scores (B, T, S)
    """

    name: ClassVar[str] = ""
    needs_equal_dims: ClassVar[bool] = False

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        for label, dim in (("query_dim", query_dim), ("key_dim", key_dim)):
            if not isinstance(dim, int) or dim < 1:
                raise ValueError(f"{label} must be a positive integer, got {dim!r}")
        if self.needs_equal_dims and query_dim != key_dim:
            raise ValueError(
                f"score '{self.name}' needs query_dim == key_dim (it multiplies query and "
                f"key directly), got query_dim={query_dim}, key_dim={key_dim}; use "
                "'general' or 'additive' to learn a map between different widths"
            )
        self.query_dim = query_dim
        self.key_dim = key_dim

    @property
    def projected_key_dim(self) -> int:
        """Width Dp of `precompute_keys`' output."""
        return self.key_dim

    def precompute_keys(self, key: Tensor) -> Tensor:
        """Key-only part of the score, (B, S, Dk) -> (B, S, Dp). Default: the key itself."""
        return key

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}"
