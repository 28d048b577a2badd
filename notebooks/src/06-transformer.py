# %% [markdown]
# # 6. Self-attention and the Transformer
#
# The Transformer (Vaswani et al. 2017) keeps attention and drops the recurrence. Every
# position of a sentence attends to every other (*self-attention*); the decoder's
# self-attention is *causal* (a position sees only those before it); the decoder reads the
# source through *cross-attention*; and each attention is split into several *heads* that
# look for different things. This chapter computes one multi-head self-attention by hand,
# then trains a small Transformer and looks at what its layers and heads attend to.

# %%
import numpy as np
import torch

import attnmt
from attnmt.attention import MultiHeadAttention, functional
from attnmt.tutorial import Chapter, table

chapter = Chapter("06-transformer")
STEPS = chapter.pick(smoke=4, full=2000)  # updates of the small Transformer
TRAIN = chapter.pick(smoke=300, full=20000)  # training sequences of the reverse task
TEST = chapter.pick(smoke=30, full=500)  # test sequences decoded for the scores
np.set_printoptions(precision=3, suppress=True)
torch.manual_seed(0)
chapter.budget, STEPS

# %% [markdown]
# ## Queries, keys and values from one sentence
#
# Self-attention projects each position's vector $x_i$ three ways: a query $q_i = x_i
# W^Q$, a key $k_i = x_i W^K$, a value $v_i = x_i W^V$. Head $h$ uses its own slice of
# the width, $d_h = d / H$, and scores every pair by the scaled dot product
# (eq. 1):
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_h}}\right) V,
# \qquad \mathrm{MultiHead}(X) = [\mathrm{head}_1; \dots; \mathrm{head}_H]\, W^O$$
#
# Five positions of width $d = 8$, two heads of width 4, computed with numpy from the
# weights of `attnmt.attention.MultiHeadAttention`, the module the Transformer is built of:

# %%
D, HEADS = 8, 2
mha = MultiHeadAttention(D, HEADS).eval()
X = torch.randn(1, 5, D)  # (batch, positions, width)
p = {k: v.detach().numpy() for k, v in mha.named_parameters()}
x = X[0].numpy()


def heads_by_hand(x, causal=False):
    Q = x @ p["q_proj.weight"].T + p["q_proj.bias"]
    K = x @ p["k_proj.weight"].T + p["k_proj.bias"]
    V = x @ p["v_proj.weight"].T + p["v_proj.bias"]
    dh = D // HEADS
    weights, outputs = [], []
    for h in range(HEADS):
        part = slice(h * dh, (h + 1) * dh)
        scores = Q[:, part] @ K[:, part].T / np.sqrt(dh)  # (T, S)
        if causal:  # position t may not see s > t
            scores = np.where(np.tri(len(x), dtype=bool), scores, -np.inf)
        w = np.exp(scores - scores.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        weights.append(w)
        outputs.append(w @ V[:, part])
    out = np.concatenate(outputs, axis=1) @ p["out_proj.weight"].T + p["out_proj.bias"]
    return np.stack(weights), out


ours_w, ours_out = heads_by_hand(x)
theirs = mha(X, X, X, need_weights=True)  # weights (1, H, T, S), context (1, T, D)
assert np.allclose(ours_w, theirs.weights[0].detach().numpy(), atol=1e-5)
assert np.allclose(ours_out, theirs.context[0].detach().numpy(), atol=1e-5)
ours_w  # head 1, then head 2: row t is where position t looks

# %% [markdown]
# The two heads, from the same five vectors, spread their weight differently: each has its
# own $W^Q$ and $W^K$ slice. Trained, heads specialise (Voita et al. 2019 found
# positional heads, syntactic heads and rare-word heads, and that most can be pruned).
#
# ## The causal mask
#
# The decoder writes left to right, so in training (where the whole target is fed at
# once) position $t$ must not see positions after it. `functional.causal_mask` is `True`
# where a position may be attended — the lower triangle:

# %%
mask = functional.causal_mask(5)
causal_w, _ = heads_by_hand(x, causal=True)
theirs = mha(X, X, X, need_weights=True, causal=True)
assert np.allclose(causal_w, theirs.weights[0].detach().numpy(), atol=1e-5)
mask.int().numpy(), causal_w[0]

# %% [markdown]
# Row 0 has all its weight on position 0; every row sums to one over what it may see.
#
# ## A small Transformer, trained
#
# Two encoder and two decoder layers of width 64 with two heads each (Vaswani's base model
# has 6 layers of width 512 with 8 heads), on the reverse task of chapter 2:
# `configs/reverse.yaml` with `model.name: transformer`.

# %%
run = chapter.train(
    "reverse.yaml", "transformer",
    data={"synthetic_train_size": TRAIN},
    model={"name": "transformer", "hidden_size": 64, "layers": 2, "heads": 2,
           "ff_size": 128, "dropout": 0.0},
    train={"max_steps": STEPS, "lr": 0.002, "schedule": "constant", "validate_every": STEPS,
           "checkpoint_every": STEPS, "valid_sentences": chapter.pick(smoke=10, full=300),
           "log_every": max(1, STEPS // 10), "precision": "fp32"},
)
run.plot()

# %%
model = attnmt.load(run.run_dir)
scores = attnmt.evaluate(model, split="test", beam=1, limit=TEST)
table([("Transformer", scores.bleu, scores.data["exact"], scores.data["parameters"])],
      ["model", "test BLEU", "exact %", "parameters"], digits=1)

# %% [markdown]
# ## Cross-attention, per layer and head
#
# The view offers each decoder layer's cross-attention as the mean of its heads, then each
# head: choose one in "Attention map". A reversing model needs, at output step $i$, the
# source symbol $S - i$: look for the anti-diagonal, and for which layer and head draws it.
# The sentence shown is the first test sequence the model reverses exactly (the table above
# says how many it gets wrong).

# %%
sentence = next((s for s, h in zip(scores.sources, scores.hypotheses, strict=True)
                 if h.split() == s.split()[::-1]), scores.sources[0])
model.translate(sentence)

# %% [markdown]
# The default map (the mean of the second-to-last layer's heads, where alignments are
# usually clearest: Garg et al. 2019) is what `attnmt` uses for word alignments. Each
# head's map can be chosen here, or from Python with `translate(..., layer=, head=)`.
#
# ## The encoder's self-attention
#
# The encoder's layers attend within the source. Its weights come from the model's
# `encode(..., need_weights=True)`; `Model.self_attention` draws them with the same view
# (rows and columns are both source positions), one map per layer and head:

# %%
model.self_attention(sentence)

# %% [markdown]
# Self-attention has no order of its own: the Transformer adds position encodings to the
# embeddings, and some heads learn to attend by position (a neighbour, the sentence end)
# rather than by content. On this task, where what matters is the position, look for
# heads with a diagonal or an off-diagonal band.

# %% [markdown]
# ## One head or many, on a language-like task
#
# Vaswani et al. (2017, Table 3 row A) found one head worse than eight at the same width
# ("single-head attention is 0.9 BLEU worse than the best setting"). The reverse task has
# one alignment and no reason for several; the grammar lab's English→French-like pair
# ([docs/data.md](../docs/data.md), "The grammar lab") has agreement (an article reads its
# noun) and local reordering, where heads could divide the work. `benchmarks/claims.py`
# (claim C4; minutes a model, three seeds, too long for a chapter) trained a 2-layer
# Transformer of width 128 with 1, 2, 4 and 8 heads for 1,500 updates and scored every
# head of its cross-attention against the lab's exact links. Its committed records:

# %%
import json
import statistics

lab_records = [json.loads(line) for line in chapter.results("claims.jsonl").read_text().splitlines()]
by_heads = {}
for r in lab_records:
    if r["family"] == "transformer" and r["pair"] == "en-fr" and "C4" in r["claims"]:
        by_heads.setdefault(int(r["name"].split("-h")[1].split("-")[0]), []).append(r)


def spread(values):
    """mean ± sd [min–max] over the seeds"""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.1f} ± {sd:.1f} [{min(values):.1f}–{max(values):.1f}]"


def best_head(record):
    """the lowest test AER of one (layer, head) of the cross-attention, in %"""
    return 100 * min(h["aer"] for h in record["alignment_test"]["by_head"]
                     if isinstance(h["head"], int))  # fmt: skip


table(
    [(heads, len(rs), spread([r["bleu"] for r in rs]), spread([r["exact"] for r in rs]),
      spread([best_head(r) for r in rs])) for heads, rs in sorted(by_heads.items())],
    ["heads", "seeds", "test BLEU", "exact %", "best head's AER %"],
)  # fmt: skip

# %% [markdown]
# The verdict takes every seed into account: several heads *beat* one only where the
# worst seed with several heads is above the best seed with one (McCoy et al. 2020: seeds
# differ; docs/results.md's rule).

# %%
one = [r["bleu"] for r in by_heads.get(1, [])]
for heads, rs in sorted(by_heads.items()):
    if heads == 1 or not one:
        continue
    many = [r["bleu"] for r in rs]
    found = ("reproduced" if min(many) > max(one)
             else "reversed" if max(many) < min(one) else "not settled")  # fmt: skip
    print(f"{heads} heads above one (test BLEU): {found}")

# %% [markdown]
# ![C4 on the lab](../docs/results/claims-c4.png)

# %% [markdown]
# ## On real verses: the reference Transformer's heads
#
# The same reading on a model of real language: the reference Transformer
# ([docs/reference.md](../docs/reference.md): 4 layers of 4 heads, English→French, trained
# far past a chapter's budget; loaded, not trained) reads John 6:47 with its French
# reference. Choose a layer and head in the view's "Attention map".

# %%
reference = attnmt.load(chapter.reference("transformer-en-fr"), device="cpu")
verse = next(ex for ex in reference.examples("test") if ex.id == "John 6:47")
reference.score(verse.src, verse.tgt)

# %% [markdown]
# Which head aligns, and what do the others do? `benchmarks/reference_figures.py` read every
# cross-attention head over all 879 verses of John against the word links of a statistical
# aligner (eflomal) and recorded, for each head, its AER and where each French word's
# strongest weight falls: on the English word the aligner links it to, one word before
# it, or one after. Its committed measurement:

# %%
measured = json.loads(chapter.results("reference_figures.json").read_text())["transformer_heads"]
heads = {name: h for name, h in measured.items() if "mean" not in name}
table([(name, h["aer"], h["on"], h["one_before"], h["one_after"]) for name, h in heads.items()],
      ["layer, head", "AER %", "on the word %", "one before %", "one after %"], digits=1)
best = min(heads, key=lambda name: heads[name]["aer"])
shifted = max(heads, key=lambda name: heads[name]["one_before"])
print(f"aligns best: {best} (AER {heads[best]['aer']}%); looks one word early most: "
      f"{shifted} ({heads[shifted]['one_before']}% of its rows, "
      f"{heads[shifted]['on']}% on the word)")

# %% [markdown]
# The heads that align sit in the upper layers; a first-layer head looks mostly at the
# English word *before* the one the French word translates: a shifted head, attending by
# position as much as by content. Select it in the view above to see its band one column
# to the left of the alignment.

# %% [markdown]
# ## The encoder, written out
#
# Everything between the source words and what cross-attention reads, with the reference
# model's own weights: embeddings scaled by √d plus sinusoidal positions (§3.4, §3.5),
# then per block layer normalisation, multi-head self-attention and a residual, layer
# normalisation, the feed-forward network and a residual (this model normalises *before*
# each sub-layer, "pre-norm", and once more after the last block; the paper normalises
# after). Checked against the model's own `encode`:

# %%
import math

net = reference.module  # the torch.nn.Module: the Transformer
d, H = net.d_model, net.encoder_layers[0].self_attn.num_heads


def positions(n, d):
    """Sinusoidal positions (§3.5): PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos."""
    p = torch.arange(n, dtype=torch.float32)[:, None]
    angle = p / 10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)  # (n, d/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(n, d)  # sin, cos, ...


def layer_norm(x, norm):
    """(x − mean) / √(variance + ε), then a learned gain and bias (Ba et al. 2016)."""
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def self_attention(x, attn):
    """softmax(Q Kᵀ / √d_h) V in H heads of d_h = d / H, concatenated, then W^O (§3.2)."""
    n, dh = x.shape[0], d // H
    q, k, v = (proj(x).view(n, H, dh).transpose(0, 1)
               for proj in (attn.q_proj, attn.k_proj, attn.v_proj))  # (H, n, d_h) each
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)  # (H, n, n)
    return attn.out_proj((weights @ v).transpose(0, 1).reshape(n, d))


def encoder_block(x, block):
    """x + SelfAttention(LN(x)), then x + FFN(LN(x)), FFN(y) = max(0, y W1 + b1) W2 + b2."""
    x = x + self_attention(layer_norm(x, block.attn_residual.norm), block.self_attn)
    y = layer_norm(x, block.ff_residual.norm)
    return x + block.ff.w_2(torch.relu(block.ff.w_1(y)))


ids = torch.tensor([*reference.vocab.src.encode(verse.src), 3])  # 3 = </s>
with torch.no_grad():
    x = net.src_embed(ids) * math.sqrt(d) + positions(len(ids), d)
    for block in net.encoder_layers:
        x = encoder_block(x, block)
    mine = layer_norm(x, net.encoder_norm)  # (S, d): what cross-attention reads
    theirs = net.encode(ids[None], torch.ones(1, len(ids), dtype=torch.bool)).encoded[0]
assert torch.allclose(mine, theirs, atol=1e-4)
print(f"{len(ids)} source subwords of {verse.id}, {len(net.encoder_layers)} blocks: the same "
      f"{tuple(mine.shape)} encoding (largest difference {(mine - theirs).abs().max():.1e})")

# %%
chapter.done()
