"""`attnmt demo`: the weights every attention variant gives on one small hand-made example.

One query, close to key 2 of five keys, is scored by every registered combination of
score x scope x mode (`attnmt.attention.names()`), plus `MultiHeadAttention`; the table
shows each row's weights over the five key positions, `*` marking the largest. Scores with
parameters use seeded random (untrained) ones, so `dot`, `scaled_dot` and `cosine` show
the content match and the others show what an untrained layer starts from.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from attnmt import attention
from attnmt.errors import UserError

# Five hand-made keys (S = 5, D = 4): four unit vectors and their normalised sum.
KEYS = [
    [1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0],
    [0.0, 0.0, 0.0, 1.0],
    [0.5, 0.5, 0.5, 0.5],
]
QUERY = [0.2, 0.1, 1.8, 0.3]  # closest to key 2
STEP = 2  # the query's target position t (local-m centres its window there)
HEADS = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    names = attention.names()
    for axis in ("score", "scope", "mode"):
        parser.add_argument(
            f"--{axis}",
            metavar="NAMES",
            help=f"only these {axis}s, comma-separated (default: all of {', '.join(names[axis])})",
        )
    parser.add_argument(
        "--window", type=int, default=1, help="local scopes' half-width D (default: 1)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for the parametrised scores (default: 0)"
    )


def _pick(axis: str, given: str | None) -> list[str]:
    valid = attention.names()[axis]
    if given is None:
        return valid
    chosen = [name.strip() for name in given.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in valid]
    if unknown or not chosen:
        raise UserError(
            f"--{axis} {given!r} names no known {axis} ({', '.join(unknown) or 'empty'}); "
            f"use one or more of: {', '.join(valid)}"
        )
    return chosen


def _line(labels: Sequence[str], position: str, cells: Sequence[str]) -> str:
    columns = f"{labels[0]:<10}  {labels[1]:<7}  {labels[2]:<4}  {position:>5}"
    return (columns + "".join(f"  {cell:<7}" for cell in cells)).rstrip()


def _row(labels: Sequence[str], position: str, weights: Sequence[float]) -> str:
    """One table row; each cell is the weight right-aligned in 6, then `*` on the largest."""
    best = max(range(len(weights)), key=lambda s: weights[s])
    cells = [f"{w:6.3f}" + ("*" if s == best and w > 0 else "") for s, w in enumerate(weights)]
    return _line(labels, position, cells)


def _combo_weights(score: str, scope: str, mode: str, window: int, seed: int):
    torch.manual_seed(seed)  # the same score parameters for every scope and mode
    attn = attention.build(score, query_dim=4, scope=scope, window=window, mode=mode)
    attn.eval()  # hard mode: the argmax, not a sample
    query = torch.tensor([[QUERY]])  # (B=1, T=1, D=4)
    keys = torch.tensor([KEYS])  # (B=1, S=5, D=4)
    with torch.no_grad():
        out = attn(query, keys, keys, positions=STEP)
    position = "-" if out.position is None else f"{out.position[0, 0].item():.2f}"
    return position, out.weights[0, 0].tolist()


def _multihead_weights(seed: int) -> list[float]:
    torch.manual_seed(seed)
    mha = attention.MultiHeadAttention(4, HEADS).eval()
    query = torch.tensor([[QUERY]])  # (B=1, T=1, D=4)
    keys = torch.tensor([KEYS])  # (B=1, S=5, D=4)
    with torch.no_grad():
        out = mha(query, keys, keys, average_weights=True)
    return out.weights[0, 0].tolist()


def run(args: argparse.Namespace) -> int:
    scores, scopes, modes = (_pick(a, getattr(args, a)) for a in ("score", "scope", "mode"))
    if args.window < 1:
        raise UserError(f"--window must be at least 1, got {args.window}; try --window 1")
    print("Attention weights for one query over five keys (S = 5, D = 4):")
    print(f"  query q = {QUERY}, closest to key 2, at target step t = {STEP}")
    print("  keys k0..k3 = unit vectors e0..e3, k4 = [0.5, 0.5, 0.5, 0.5]; values = keys")
    print(f"  scores with parameters: seeded random, untrained (--seed {args.seed})")
    print(f"  local scopes: window D = {args.window}, p_t = aligned position")
    print("  hard mode shown in eval mode (the argmax); * marks each row's largest weight")
    print()
    print(_line(["score", "scope", "mode"], "p_t", [f"{f's={s}':>6}" for s in range(len(KEYS))]))
    with torch.random.fork_rng(devices=[]):
        for score in scores:
            for scope in scopes:
                for mode in modes:
                    position, weights = _combo_weights(score, scope, mode, args.window, args.seed)
                    print(_row([score, scope, mode], position, weights))
        print(_row(["multihead", f"H={HEADS}", "avg"], "-", _multihead_weights(args.seed)))
    return 0
