# %% [markdown]
# # 1. Attention by hand
#
# Attention is a weighted average. A decoder about to write a word has a *query* (its
# state); each source word offers a *key* and a *value* (its encoder state); a *score*
# says how well each key answers the query; a softmax turns the scores into *weights*
# that are positive and sum to one; and what the decoder reads, the *context*, is the
# weighted sum of the values (Bahdanau et al. 2014, §3.1, eqs. 5-6):
#
# $$e_j = \mathrm{score}(s, h_j), \qquad \alpha_j = \frac{\exp e_j}{\sum_k \exp e_k}, \qquad c = \sum_j \alpha_j h_j$$
#
# This chapter computes each step by hand with numpy on a sentence of five words, for
# every score the field has used, then gets the same numbers from `attnmt.attention`, the
# module every model of this toolkit is built on. Nothing is trained here: the chapters
# after this one train the models.

# %%
import numpy as np
import torch

from attnmt import attention
from attnmt.tutorial import Chapter, table

chapter = Chapter("01-attention-by-hand")  # budget from $ATTNMT_BUDGET: "full" or "smoke"
np.set_printoptions(precision=3, suppress=True)
torch.manual_seed(0)
chapter.budget

# %% [markdown]
# ## A sentence, a query
#
# Five source words, each a vector of width 4 (in a model these are the encoder's
# states; here they are random numbers), and one query: the decoder's state when it is
# about to write its next word.

# %%
words = ["the", "black", "cat", "sleeps", "</s>"]
rng = np.random.default_rng(1)
H = rng.normal(size=(5, 4)).astype(np.float32)  # keys = values: one row per source word
H *= 1.5 / np.linalg.norm(H, axis=1, keepdims=True)  # all of one length, 1.5
s = H[2] + 0.3 * rng.normal(size=4).astype(np.float32)  # a query that resembles "cat"
H.round(2), s.round(2)

# %% [markdown]
# ## The simplest score: the dot product (Luong et al. 2015, eq. 8, "dot")
#
# A key that points the same way as the query scores high. Softmax, then the weighted sum:

# %%
def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


e_dot = H @ s  # e_j = s · h_j
alpha = softmax(e_dot)  # positive, sums to 1
context = alpha @ H  # c = Σ_j α_j h_j
assert words[alpha.argmax()] == "cat"
{w: round(float(a), 3) for w, a in zip(words, alpha, strict=True)}, context.round(3)

# %% [markdown]
# Most of the weight is on *cat*: the query was made to resemble it. The context is
# close to *cat*'s vector, with a little of the others mixed in: soft attention never
# picks one word outright.
#
# ## Every score, by hand and by `attnmt.attention`
#
# | score | equation | paper |
# |---|---|---|
# | dot | $s^\top h_j$ | Luong et al. 2015 |
# | general | $s^\top W_a h_j$ | Luong et al. 2015 |
# | concat | $v_a^\top \tanh(W_a [s; h_j])$ | Luong et al. 2015 |
# | additive | $v_a^\top \tanh(W_a s + U_a h_j)$ | Bahdanau et al. 2014 |
# | scaled dot | $s^\top h_j / \sqrt{d}$ | Vaswani et al. 2017 |
# | cosine | $\beta \cos(s, h_j)$ | Graves et al. 2014 (content-based) |
#
# `attention.build(name, query_dim=..., key_dim=...)` makes each one with its own
# parameters ($W_a$, $U_a$, $v_a$, randomly initialised). We read those parameters out
# and compute the score with numpy; the module must give the same numbers.

# %%
def by_hand(name, module):
    """The scores e_j of `name`, computed with numpy from the module's own weights."""
    p = {k: v.detach().numpy() for k, v in module.score.named_parameters()}
    if name == "dot":
        return H @ s
    if name == "general":
        return H @ p["W_a.weight"].T @ s  # s^T W_a h_j
    if name == "concat":
        W, v = p["W_a.weight"], p["v_a.weight"][0]
        return np.array([v @ np.tanh(W @ np.concatenate([s, h])) for h in H])
    if name == "additive":
        W, U, v = p["W_a.weight"], p["U_a.weight"], p["v_a.weight"][0]
        return np.array([v @ np.tanh(W @ s + U @ h) for h in H])
    if name == "scaled_dot":
        return H @ s / np.sqrt(len(s))
    if name == "cosine":  # β = softplus(w_β · s + b_β), the key strength (NTM §3.3.1)
        beta = np.log1p(np.exp(p["w_beta.weight"][0] @ s + p["w_beta.bias"][0]))
        return beta * (H @ s) / (np.linalg.norm(H, axis=1) * np.linalg.norm(s))
    raise ValueError(name)


query, keys = torch.from_numpy(s)[None, None], torch.from_numpy(H)[None]  # (B=1, T=1, D), (1, S, D)
rows = []
for name in ["dot", "general", "concat", "additive", "scaled_dot", "cosine"]:
    module = attention.build(name, query_dim=4, key_dim=4, hidden_dim=6).eval()
    out = module(query, keys, keys)  # AttentionOutput: .weights (1, 1, S), .context (1, 1, D)
    ours = softmax(by_hand(name, module))
    assert np.allclose(ours, out.weights[0, 0].detach().numpy(), atol=1e-5), name
    assert np.allclose(ours @ H, out.context[0, 0].detach().numpy(), atol=1e-5), name
    if name in ("dot", "scaled_dot", "cosine"):  # no parameters: the query alone decides
        assert words[ours.argmax()] == "cat", name
    rows.append((name, *ours.round(3)))

table(rows, ["score", *words])

# %% [markdown]
# Every score agrees with its equation to 1e-5. The parameter-free scores (dot, scaled
# dot, cosine) already put their largest weight on *cat*; the others start from random
# $W_a$, $U_a$, $v_a$, so their weights mean nothing yet — training is what makes them
# find the right word (chapter 3). Scaled dot is dot divided by $\sqrt{d} = 2$: flatter
# weights, which is why the Transformer scales (large $d$ makes dot products large and
# the softmax nearly one-hot, with tiny gradients; Vaswani et al. 2017, §3.2.1).
#
# ## Masks: positions that may not be looked at
#
# Sentences in a batch have different lengths; the padding after a short one must get
# zero weight. attnmt's masks say `True` where a position *may* be attended
# (DESIGN.md's polarity). A masked position gets a score of $-\infty$ before the softmax:

# %%
mask = torch.tensor([[True, True, True, False, False]])  # a 3-word sentence padded to 5
out = attention.build("dot", query_dim=4)(query, keys, keys, mask=mask)
by_hand_masked = softmax(np.where(mask[0].numpy(), H @ s, -np.inf))
out.weights[0, 0].numpy().round(3), by_hand_masked.round(3)

# %% [markdown]
# ## Soft and hard
#
# *Soft* attention reads the weighted average. *Hard* attention (Xu et al. 2015, §4.1)
# picks one position: in training it samples one from the weights (and learns with
# REINFORCE, since a sample has no gradient); at inference it takes the most likely. The
# weights it returns are one-hot; `probs` keeps the distribution it chose from.

# %%
hard = attention.build("dot", query_dim=4, mode="hard")
hard.train()  # training: sample
samples = [int(hard(query, keys, keys).weights[0, 0].argmax()) for _ in range(2000)]
sampled = np.bincount(samples, minlength=5) / len(samples)
hard.eval()  # inference: the most likely position
out = hard(query, keys, keys)
{
    "probs": out.probs[0, 0].numpy().round(3),
    "sampled 2000 times": sampled.round(3),
    "eval weights (one-hot)": out.weights[0, 0].numpy(),
}

# %% [markdown]
# The sampled frequencies match the probabilities (up to sampling noise of about
# $\sqrt{p(1-p)/2000} \approx 0.01$), and in eval mode the one-hot sits on the most likely
# word.
#
# ## Global and local
#
# *Global* attention scores every source word. Luong et al. 2015 (§3.2) also proposed
# *local* attention: look only in a window $[p_t - D, p_t + D]$. *local-m* puts the
# window's centre at the target position ($p_t = t$, monotonic); *local-p* predicts it,
# $p_t = S \cdot \sigma(v_p^\top \tanh(W_p s))$, and multiplies the weights by a
# Gaussian around $p_t$ ($\sigma = D/2$), so they sum to at most one. A longer sentence
# shows it best: 12 source positions, 12 target steps, $D = 2$.

# %%
S = 12
keys12 = torch.randn(1, S, 4)
queries12 = torch.randn(1, S, 4)  # one query per target step t = 0..11
maps = {}
for scope in ["global", "local-m", "local-p"]:
    module = attention.build("dot", query_dim=4, scope=scope, window=2).eval()
    maps[scope] = module(queries12, keys12, keys12).weights[0].detach().numpy()  # (T, S)
{scope: (w > 1e-6).sum(axis=1)[:6] for scope, w in maps.items()}  # positions seen, steps 0-5

# %%
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
for ax, (scope, w) in zip(axes, maps.items(), strict=True):
    ax.imshow(w, cmap="Blues", vmin=0, vmax=1)
    ax.set(title=scope, xlabel="source position", ylabel="target step")
fig.tight_layout()

# %% [markdown]
# Global attention spreads over all 12 positions; local-m sees at most $2D + 1 = 5$ around
# the diagonal; local-p sees a window around its predicted centre (here untrained, so
# the centres are wherever the random predictor puts them).
#
# ## The same weights as an explorable view
#
# Every result of attnmt draws itself in a notebook as an interactive heatmap: hover a
# cell to read its weight and its two words, click a word to pin its row or column. The
# view is plain HTML and JavaScript inside this output (nothing is fetched), and a picture
# is drawn before any script runs, so an untrusted notebook or a static viewer shows it
# too. Here the five-word sentence and its dot-product weights for three made-up target
# words:

# %%
import attnmt

targets = ["le", "chat", "noir"]
Q = 2 * np.stack([H[0], H[2], H[1]]) + 0.3 * rng.normal(size=(3, 4)).astype(np.float32)
W = np.stack([softmax(H @ q) for q in Q])  # (3 French words, 5 English words)
view = attnmt.show({"dot-product attention": W}, words, targets,
                   title="by hand: a query per French word")  # fmt: skip
links = view.records[0]["attention"][0]["alignment"]  # Pharaoh source-target, in source order
assert links == "0-0 1-2 2-1", links  # the→le, black→noir, cat→chat
view

# %% [markdown]
# *chat* looks at *cat* and *noir* at *black*: the crossing lines of an adjective–noun
# reordering, which chapter 3 shows a trained model learning by itself.
#
# ## What this chapter found
#
# Each number below is read from the cells above.

# %%
import html

from IPython.display import Markdown, display

dot_weights = softmax(H @ s)
hard_probs = hard(query, keys, keys).probs[0, 0].numpy()  # eval mode: what it samples from
hard_gap = float(np.abs(sampled - hard_probs).max())
seen = {scope: int((w > 1e-6).sum(axis=1).max()) for scope, w in maps.items()}
on_cat = [name for name, *weights in rows if words[int(np.argmax(weights))] == "cat"]
elsewhere = {name: words[int(np.argmax(weights))] for name, *weights in rows if name not in on_cat}
flatter = softmax(H @ s / np.sqrt(len(s))).max()
masked = attention.build("dot", query_dim=4)(query, keys, keys, mask=mask).weights[0, 0]
assert (masked[~mask[0]] == 0).all()  # the padding: weight exactly zero
display(Markdown(
    f"- **A weighted average.** The dot score gives *cat*, the word the query was made to "
    f"resemble, {dot_weights.max():.1%} of the weight; the context is mostly its vector, "
    f"never only it.\n"
    f"- **One interface, six scores.** All {len(rows)} scores of `attnmt.attention` give "
    f"the weights and the context of their equations to 1e-5, computed here from each "
    f"module's own parameters. Their largest weight: on *cat* for {', '.join(on_cat)}; "
    + "; ".join(f"on *{html.escape(word)}* for {name}" for name, word in elsewhere.items())
    + " (random $W_a$, $U_a$, $v_a$: what training will set).\n"
    f"- **Scaling flattens.** Dividing by $\\sqrt{{d}}$ lowers *cat*'s weight from "
    f"{dot_weights.max():.1%} to {flatter:.1%}.\n"
    f"- **Masks** give padded positions a weight of exactly zero.\n"
    f"- **Hard attention** samples from the soft weights: over {len(samples):,} samples "
    f"the frequencies stay within {hard_gap:.3f} of the probabilities.\n"
    f"- **Local attention** looks at no more than {seen['local-m']} positions a step "
    f"(local-m; {seen['local-p']} for local-p, whose window follows a predicted centre), "
    f"global at all {seen['global']}."
))

# %% [markdown]
# ## Exercises
#
# Predict the answer first, then change the cell and run it again.
#
# 1. Multiply the query `s` by three before the dot product. Does the weight on *cat*
#    grow or shrink, and what happens to the context? What would the scaled dot do?
# 2. In the masks cell, let the sentence end after *black* (two words). Where does the
#    weight that *cat* held go?
# 3. Build the local attentions with `window=1`. How many positions does local-m see a
#    step now, and why is the first row of its map narrower than the middle ones?

# %%
chapter.done()
