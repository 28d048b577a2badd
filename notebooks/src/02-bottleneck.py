# %% [markdown]
# # 2. The bottleneck
#
# Before attention, a neural translator read the whole source sentence into **one
# fixed-length vector** and wrote the translation from it alone (Cho et al. 2014;
# Sutskever et al. 2014). Cho et al. (2014b, "On the Properties of Neural Machine
# Translation") found its quality falling fast as sentences grew longer; Bahdanau et al.
# (2014) blamed the fixed-length vector and let the decoder look back at every source
# word instead: their Figure 2 shows the encoder–decoder (RNNencdec) losing BLEU with
# length while RNNsearch, with attention, holds.
#
# This chapter **writes both models itself**, as plain `torch.nn` modules, and trains them,
# the same size and the same number of updates, on a task where length is all that
# matters: **reverse a sequence of numbers** (JoeyNMT's tutorial task). Every output symbol
# is determined by the input, so a model that fails on long inputs fails because it could
# not keep them, not because the task got harder to guess. Then it loads the same weights
# into the library's `RNNEncDec` and `RNNSearch` and checks that they compute the same
# numbers, so that the rest of the course can use the library; trains the library's own
# models at the same budget; reads the same comparison on real text from two reference
# models; and looks at where RNNsearch looks.

# %%
import itertools
import math
import random
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import attnmt
from attnmt.data.synthetic import SymbolVocab, make_task
from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.tutorial import Chapter, table

torch.set_num_threads(1)  # on a busy 2-core machine two threads ran a training step 4-7x slower
chapter = Chapter("02-bottleneck")  # the budget: $ATTNMT_BUDGET, "full" or "smoke"
STEPS = chapter.pick(smoke=3, full=500)  # updates per model
TRAIN = chapter.pick(smoke=300, full=20000)  # training sequences
MAX_LEN = 25  # training sequences have 1..MAX_LEN numbers; the test ones up to 30
TEST = chapter.pick(smoke=40, full=1000)  # test sequences decoded (never seen in training)
BATCH = 2000  # symbols a batch: sequences x the longest one's length (with its </s>)
LR = 0.005  # Adam's learning rate
EMBED, HIDDEN = 32, 64  # the widths of every model here: embeddings, GRU states
chapter.budget, STEPS

# %% [markdown]
# ## The task
#
# The data of `configs/reverse.yaml`, made by the library's own function: sequences of
# the integers 0–50, the target the source reversed. The test sequences are unseen, and
# some are longer than any training sequence (the line below counts them). The encoder
# reads each source with a closing
# `</s>` (id 3); the decoder starts from `<s>` (id 2) and must end with `</s>`.

# %%
splits = make_task("reverse", train_size=TRAIN, max_len=MAX_LEN)  # seed 1, as the config's
vocab = SymbolVocab()  # <pad> <unk> <s> </s>, then "0".."50"
train_set, test_set = splits["train"], splits["test"][:TEST]
longest = max(len(ex.src_ids) for ex in test_set)
print(f"{len(train_set):,} training pairs of 1-{MAX_LEN} symbols; {len(test_set):,} test pairs "
      f"of 1-{longest} symbols ({sum(len(ex.src_ids) > MAX_LEN for ex in test_set)} longer "
      f"than any training pair); {vocab.size} ids")
table([(ex.src, ex.tgt, " ".join(map(str, [*ex.src_ids, EOS]))) for ex in train_set[:5]],
      ["source", "target", "the ids the encoder reads"])

# %% [markdown]
# ## The two models, written out
#
# **The encoder** embeds the source symbols and runs a GRU over them (over the real ones
# only: `pack_padded_sequence` keeps padding out of the recurrence). RNNsearch's GRU runs
# both ways, and its *annotation* of position $j$ is
# $h_j = [\overrightarrow{h}_j; \overleftarrow{h}_j]$, what the forward GRU has read up to
# $j$ beside what the backward one has read from the end back to $j$. RNNencdec's runs
# forward only, and keeps one thing: $c = \tanh(V h_N)$, its last state squeezed through a
# layer. That vector is all its decoder will ever see of the source.
#
# **The decoder**, at output step $i$, holds its state $s_{i-1}$ and the symbol $y_{i-1}$
# it wrote last (`<s>` at first). With attention it scores every annotation against its
# state, $e_{ij} = v_a^\top \tanh(W_a s_{i-1} + U_a h_j)$, turns the scores into weights
# $\alpha_{ij} = \mathrm{softmax}_j(e_{ij})$ and reads their average
# $c_i = \sum_j \alpha_{ij} h_j$; without, $c_i = c$ at every step. Then
# $s_i = \mathrm{GRU}(s_{i-1}, [E y_{i-1}; c_i])$, and the scores of $y_i$ come from a
# maxout layer over $[s_i; E y_{i-1}; c_i]$ (Bahdanau et al. appendix A). The first state
# is $s_0 = \tanh(W_s \overleftarrow{h}_1)$ (the backward GRU's state after reading the
# whole source) or $\tanh(W_s c)$. Note the query: **the weights of step $i$ are chosen
# by $s_{i-1}$, the state before symbol $i$ is written**.

# %%
class Encoder(nn.Module):
    """Source ids (B, S) -> the GRU's state at every position (B, S, D or 2D; zero at
    padding) and its last state per direction (directions, B, D)."""

    def __init__(self, vocab_size, embed, hidden, both_ways):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed, padding_idx=PAD)
        self.gru = nn.GRU(embed, hidden, batch_first=True, bidirectional=both_ways)

    def forward(self, src, mask):
        lengths = mask.sum(1)  # real symbols per row, </s> included
        packed = pack_padded_sequence(self.embed(src), lengths, batch_first=True,
                                      enforce_sorted=False)
        states, last = self.gru(packed)
        states, _ = pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
        return states, last


class Decoder(nn.Module):
    """One output step: y_{i-1} (B,), s_{i-1} (B, D) and the source (annotations h (B, S, K)
    with their U_a h, or c (B, K)) -> scores of y_i (B, V), s_i, weights alpha_i (B, S)."""

    def __init__(self, vocab_size, embed, hidden, width, attend):
        super().__init__()
        self.attend = attend
        self.embed = nn.Embedding(vocab_size, embed, padding_idx=PAD)  # E
        self.start = nn.Linear(hidden, hidden)  # W_s: s_0 = tanh(W_s <-h_1), or tanh(W_s c)
        if attend:
            self.W_a = nn.Linear(hidden, hidden, bias=False)
            self.U_a = nn.Linear(width, hidden, bias=False)
            self.v_a = nn.Linear(hidden, 1, bias=False)
        self.gru = nn.GRUCell(embed + width, hidden)
        self.maxout = nn.Linear(hidden + embed + width, 2 * hidden)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, y_prev, s, h, keys, mask):
        if self.attend:
            e = self.v_a(torch.tanh(self.W_a(s)[:, None] + keys)).squeeze(-1)  # e_ij (B, S)
            alpha = e.masked_fill(~mask, float("-inf")).softmax(-1)  # alpha_ij
            c = torch.bmm(alpha[:, None], h)[:, 0]  # c_i = sum_j alpha_ij h_j (B, K)
        else:
            alpha, c = None, h  # the same c at every step
        y = self.embed(y_prev)
        s = self.gru(torch.cat([y, c], -1), s)  # s_i
        t = self.maxout(torch.cat([s, y, c], -1)).view(len(s), -1, 2).amax(-1)  # max of pairs
        return self.out(t), s, alpha


class EncoderDecoder(nn.Module):
    """RNNsearch (attention=True) or RNNencdec (False), teacher-forced: src, mask (B, S)
    and the decoder's inputs (B, T) -> scores (B, T, V) and each step's weights."""

    def __init__(self, vocab_size, embed, hidden, attention):
        super().__init__()
        self.attention = attention
        self.encoder = Encoder(vocab_size, embed, hidden, both_ways=attention)
        self.summarize = None if attention else nn.Linear(hidden, hidden)  # V in c = tanh(V h_N)
        width = 2 * hidden if attention else hidden  # what the decoder reads: h_j, or c
        self.decoder = Decoder(vocab_size, embed, hidden, width, attention)

    def begin(self, src, mask):
        """Read the source once: what every step reads (h or c), U_a h, and s_0."""
        h, last = self.encoder(src, mask)
        if self.attention:  # last[1] is <-h_1, the backward GRU's state at the first symbol
            return h, self.decoder.U_a(h), torch.tanh(self.decoder.start(last[1]))
        c = torch.tanh(self.summarize(last[0]))  # the fixed-length vector
        return c, None, torch.tanh(self.decoder.start(c))

    def forward(self, src, mask, tgt_in):
        h, keys, s = self.begin(src, mask)
        scores, weights = [], []
        for y_prev in tgt_in.unbind(1):
            logits, s, alpha = self.decoder(y_prev, s, h, keys, mask)
            scores.append(logits)
            weights.append(alpha)
        return torch.stack(scores, 1), torch.stack(weights, 1) if self.attention else None


# %% [markdown]
# ## Training and greedy decoding
#
# Batches hold sequences of about one length, at most `BATCH` symbols each. Training is
# teacher-forced: the decoder reads `<s>` and the reference's symbols, and is scored
# (cross-entropy) on predicting each next one and the final `</s>`; Adam, gradients clipped
# to norm 1. Greedy decoding writes the likeliest symbol at every step until `</s>`; an
# output that never ends is cut at twice the source's length (with its `</s>`) plus 4
# symbols, the library's limit (which keeps one more step for `</s>`).

# %%
def batch_of(examples):
    """Padded tensors: the sources with </s>, True at their real symbols, the decoder's
    inputs (<s> + target) and what it must predict (target + </s>)."""
    def padded(rows):
        width = max(map(len, rows))
        return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])
    src = padded([[*ex.src_ids, EOS] for ex in examples])
    return (src, src != PAD, padded([[BOS, *ex.tgt_ids] for ex in examples]),
            padded([[*ex.tgt_ids, EOS] for ex in examples]))


def batches(examples, seed=1):
    """Endless batches: each epoch shuffled, sorted by length, cut at BATCH symbols, the
    cuts shuffled."""
    rng = random.Random(seed)
    while True:
        cuts, cut = [], []
        for ex in sorted(rng.sample(examples, len(examples)), key=lambda ex: len(ex.src_ids)):
            if cut and (len(cut) + 1) * (len(ex.src_ids) + 1) > BATCH:
                cuts, cut = [*cuts, cut], []
            cut.append(ex)
        cuts.append(cut)
        rng.shuffle(cuts)
        yield from map(batch_of, cuts)


def train(model, stream):
    """STEPS updates; the loss of each."""
    optimizer, losses = torch.optim.Adam(model.parameters(), lr=LR), []
    for _ in range(STEPS):
        src, mask, tgt_in, tgt_out = next(stream)
        scores, _ = model(src, mask, tgt_in)
        loss = F.cross_entropy(scores.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def greedy(model, examples):
    """Each source's output ids (without </s>) and, with attention, every step's weights
    (B, steps, S)."""
    src, mask, _, _ = batch_of(examples)
    h, keys, s = model.begin(src, mask)
    y, written, weights = torch.full((len(examples),), BOS), [], []
    for _ in range(2 * src.shape[1] + 5):
        logits, s, alpha = model.decoder(y, s, h, keys, mask)
        y = logits.argmax(-1)
        written.append(y)
        weights.append(alpha)
    outputs = []
    for row, ex in zip(torch.stack(written, 1).tolist(), examples, strict=True):
        row = row[: 2 * (len(ex.src_ids) + 1) + 4]  # this source's own limit
        outputs.append(row[: row.index(EOS)] if EOS in row else row)
    return outputs, torch.stack(weights, 1) if model.attention else None


# %% [markdown]
# ## Training both
#
# The same widths, the same batches in the same order (seed 1), the same number of
# updates; PyTorch's default initialisation. Each run first says what it trains on.

# %%
def trained(name, start=None):
    """Our model `name`, trained; `start` (a function) initialises it instead of PyTorch."""
    torch.manual_seed(1)
    model = EncoderDecoder(vocab.size, EMBED, HIDDEN, attention=name == "RNNsearch")
    if start is not None:
        start(model)
    stream = batches(train_set)
    first = next(stream)
    src, _, _, tgt_out = first
    print(f"{name} by hand: {sum(p.numel() for p in model.parameters()):,} parameters "
          f"(embeddings {EMBED}, GRU states {HIDDEN}), initialised by "
          f"{start.__name__ if start else 'PyTorch'}; {STEPS:,} updates, Adam at {LR}; batches "
          f"of at most {BATCH:,} symbols from {len(train_set):,} pairs, the first "
          f"{src.shape[0]} sequences of {src.shape[1] - 1} symbols, e.g. "
          f"{vocab.decode(src[0].tolist())!r} -> {vocab.decode(tgt_out[0].tolist())!r}")
    started = time.perf_counter()
    losses = train(model, itertools.chain([first], stream))
    seconds = chapter.trained[f"{name} by hand" + (", paper's start" if start else "")] = (
        time.perf_counter() - started)
    print(f"  trained in {seconds / 60:.1f} min; mean loss of the last 50 updates "
          f"{sum(losses[-50:]) / len(losses[-50:]):.3f}")
    return model.eval(), losses


ours, losses = {}, {}
for name in ("RNNencdec", "RNNsearch"):
    ours[name], losses[name] = trained(name)

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, curve in losses.items():
    window = min(25, len(curve))
    smooth = [sum(curve[i - window:i]) / window for i in range(window, len(curve) + 1)]
    ax.plot(range(window, len(curve) + 1), smooth, label=name)
ax.set(yscale="log", xlabel="update", ylabel=f"training loss (mean of {window})",
       title="written by hand, the same batches")
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## Reversing unseen sequences, by length
#
# Both models decode the test sequences greedily. Exact match (every symbol right, and
# nothing more) by source length, five lengths a bucket:

# %%
def by_length(outputs, examples, width=5):
    """Percent of exact outputs per bucket of source lengths, and the bucket sizes."""
    buckets = {}
    for out, ex in zip(outputs, examples, strict=True):
        low = (len(ex.src_ids) - 1) // width * width + 1
        buckets.setdefault(low, []).append(out == ex.tgt_ids)
    return {f"{low}-{low + width - 1}": (100 * sum(hits) / len(hits), len(hits))
            for low, hits in sorted(buckets.items())}


decoded, looked = {}, {}  # each model's outputs, and RNNsearch's weights at every step
for name, model in ours.items():
    decoded[name], looked[name] = greedy(model, test_set)
exact = {name: by_length(outputs, test_set) for name, outputs in decoded.items()}
labels = list(exact["RNNsearch"])
overall = {name: 100 * sum(o == ex.tgt_ids for o, ex in zip(outs, test_set, strict=True))
           / len(test_set) for name, outs in decoded.items()}
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, rows in exact.items():
    ax.plot(labels, [rows[label][0] for label in labels], marker="o", label=name)
first_unseen = next((i for i, label in enumerate(labels) if int(label.split("-")[0]) > MAX_LEN),
                    len(labels))
ax.axvspan(first_unseen - 0.5, len(labels) - 0.5, color="0.9", label="lengths never trained on")
ax.set(xlabel="source length", ylabel="exact match (%)", ylim=(-3, 103),
       title="written by hand: reversing test sequences")
ax.legend()
fig.tight_layout()
plt.show()
table([("sequences", len(test_set), *[exact["RNNsearch"][label][1] for label in labels])]
      + [(name, overall[name], *[rows[label][0] for label in labels]) for name, rows in exact.items()],
      ["", "all", *labels], digits=1)

# %%
enc, att = exact["RNNencdec"], exact["RNNsearch"]
seen = [label for label in labels if int(label.split("-")[1]) <= MAX_LEN]
unseen = [label for label in labels if label not in seen]
beyond = [label for label in seen if enc[label][0] < enc[labels[0]][0] / 2]
Markdown(
    f"RNNencdec reverses {enc[labels[0]][0]:.0f}% of the test sequences of {labels[0]} symbols, "
    f"{enc[labels[1]][0]:.0f}% of those of {labels[1]}, and at most "
    f"{max(enc[label][0] for label in labels[2:]):.0f}% in any longer bucket: "
    + (f"its exact match falls below half of its shortest bucket's at {beyond[0]} symbols. "
       if beyond else "no bucket falls below half of its shortest bucket's. ")
    + f"RNNsearch, the same widths and the same {STEPS:,} updates, reverses between "
    f"{min(att[label][0] for label in seen):.0f}% and {max(att[label][0] for label in seen):.0f}% "
    f"in every bucket of lengths it trained on"
    + (f", and {att[unseen[0]][0]:.0f}% of the sequences of {unseen[0]} symbols, longer than any "
       "it saw." if unseen else ".")
)

# %% [markdown]
# Exact match is strict: one wrong symbol fails the sequence. Where do RNNencdec's
# outputs go wrong? Output symbol i of a reversal is source symbol n + 1 − i: the first
# one written is the last one read, fresh in the fixed vector; the tenth was read nine
# symbols before the end. The share of outputs whose i-th symbol is right, over the test
# sequences of 11 symbols or more:

# %%
long_ones = [k for k, ex in enumerate(test_set) if len(ex.src_ids) > 10]
positions = range(1, 11)
by_position = {
    name: [100 * sum(len(outs[k]) >= i and outs[k][i - 1] == test_set[k].tgt_ids[i - 1]
                     for k in long_ones) / max(1, len(long_ones)) for i in positions]
    for name, outs in decoded.items()
}
table([(name, *row) for name, row in by_position.items()],
      ["output symbol", *[str(i) for i in positions]], digits=0)

# %%
enc_i, att_i = by_position["RNNencdec"], by_position["RNNsearch"]
Markdown(
    f"Over these {len(long_ones)} sequences RNNencdec writes the first symbol right in "
    f"{enc_i[0]:.0f}% of them, the second in {enc_i[1]:.0f}%, the fifth in {enc_i[4]:.0f}% and "
    f"the tenth in {enc_i[9]:.0f}%; RNNsearch {att_i[0]:.0f}%, {att_i[1]:.0f}%, {att_i[4]:.0f}% "
    f"and {att_i[9]:.0f}%. The fixed vector keeps the last symbols it read "
    + ("best." if enc_i[0] > enc_i[9] else "no better than the earlier ones.")
)

# %% [markdown]
# ## The same functions in the library
#
# The library's models (`attnmt.models.RNNEncDec` and `RNNSearch`, what
# `configs/reverse.yaml` builds) name their parameters their own way, and their decoder
# GRU is an `nn.GRU` of one layer where ours is an `nn.GRUCell` (the same weights, with
# `_l0` after their names). Renamed, our weights load into them with `strict=True`: every
# parameter has exactly one counterpart, of the same shape. Then both read a batch of
# test sequences with their references (teacher forcing) and their scores are compared.

# %%
from attnmt.config import ModelConfig
from attnmt.data.preparation import prepare
from attnmt.models import build_model

RENAMES = {"encoder.gru.": "encoder.rnn.", "decoder.embed.": "tgt_embed.",
           "decoder.start.": "init_proj.", "decoder.W_a.": "attention.score.W_a.",
           "decoder.U_a.": "attention.score.U_a.", "decoder.v_a.": "attention.score.v_a.",
           "decoder.gru.": "rnn.", "decoder.maxout.": "readout.linear.",
           "decoder.out.": "generator."}  # encoder.embed and summarize keep their names


def library_name(name):
    for ours_, theirs in RENAMES.items():
        if name.startswith(ours_):
            name = theirs + name[len(ours_):]
    return name + "_l0" if name.startswith("rnn.") else name  # GRUCell -> layer 0 of nn.GRU


def library_state(model):
    return {library_name(name): tensor for name, tensor in model.state_dict().items()}


display(table([(name, library_name(name), "x".join(map(str, t.shape)))
               for name, t in ours["RNNsearch"].state_dict().items()],
              ["ours (RNNsearch)", "attnmt.models.RNNSearch", "shape"]))
src, mask, tgt_in, _ = batch_of(test_set[:100])
largest = {}
for name, model in ours.items():
    twin = build_model(ModelConfig(name=name.lower(), embed_size=EMBED, hidden_size=HIDDEN),
                       vocab.size, vocab.size).eval()
    twin.load_state_dict(library_state(model))  # strict: raises on a missing or extra name
    with torch.no_grad():
        mine, alphas = model(src, mask, tgt_in)
        theirs = twin(src, mask, tgt_in, need_weights=True)
    largest[name] = (mine - theirs.logits).abs().max().item()
    line = (f"{name}: {type(twin).__name__} with our weights; logits of {src.shape[0]} test "
            f"sequences x {tgt_in.shape[1]} steps x {vocab.size} ids differ by at most "
            f"{largest[name]:.1e}")
    if alphas is not None:
        line += f", attention weights by {(alphas - theirs.weights).abs().max().item():.1e}"
    print(line)
assert max(largest.values()) < 1e-4, largest

# %% [markdown]
# ## The library's own runs at the same budget
#
# The library trains the same two models from `configs/reverse.yaml`: the same data (the
# cell checks that the pairs it stores are ours), widths, updates, batch size and learning
# rate. What differs: its initialisation is the paper's (appendix B:
# orthogonal recurrent matrices, N(0, 0.01²) elsewhere, zero biases) where ours is
# PyTorch's default; its batches are bucketed and shuffled its own way; and its plateau
# schedule never acts, with one validation at the end.

# %%
common = {"max_steps": STEPS, "lr": LR, "validate_every": STEPS, "checkpoint_every": STEPS,
          "valid_sentences": chapter.pick(smoke=10, full=200),  # dev sequences decoded
          "log_every": max(1, STEPS // 10), "precision": "fp32"}
data = {"synthetic_train_size": TRAIN, "synthetic_max_len": MAX_LEN, "batch_tokens": BATCH}
library = {}
for name in ("RNNencdec", "RNNsearch"):
    model = {"name": name.lower(), "embed_size": EMBED, "hidden_size": HIDDEN}
    print(f"{name}, the library's: model {model}; data {data}, the {TRAIN:,} pairs shown "
          f"above ({train_set[0].src!r} -> {train_set[0].tgt!r}, ...); train {common}")
    library[name] = chapter.train("reverse.yaml", name.lower(), data=data, train=common,
                                  model=model)
stored = prepare(attnmt.load(library["RNNsearch"].run_dir).config.data).train
assert [(ex.src_ids, ex.tgt_ids) for ex in stored] == [(ex.src_ids, ex.tgt_ids) for ex in train_set]
print(f"the library stores our {len(stored):,} training pairs")
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, curve in losses.items():
    window = min(50, len(curve))
    ax.plot(range(window, len(curve) + 1), [sum(curve[i - window:i]) / window
                                            for i in range(window, len(curve) + 1)],
            label=f"{name} by hand")
logged = {name: [m for m in run.metrics if m["type"] == "train"] for name, run in library.items()}
for name, points in logged.items():
    ax.plot([m["step"] for m in points], [m["loss"] for m in points], "--", marker=".",
            label=f"{name}, the library's")
ax.axhline(math.log(vocab.size), color="0.6", lw=0.8, label=f"ln {vocab.size}: a uniform guess")
ax.set(yscale="log", xlabel="update", ylabel=f"training loss (mean of {window} updates)",
       title="the same models, two starts and two batch orders")
ax.legend(fontsize=7)
fig.tight_layout()

# %% [markdown]
# Now the library decodes the test sequences with four models: ours (our weights in its
# classes, loaded as above) and its own. Where our weights are decoded, its greedy search
# should write exactly what our `greedy` wrote.

# %%
models = {}
for name in ("RNNencdec", "RNNsearch"):
    models[f"{name} by hand"] = twin = attnmt.load(library[name].run_dir, name=f"{name} by hand")
    twin.module.load_state_dict(library_state(ours[name]))
    models[f"{name}, the library's"] = attnmt.load(library[name].run_dir,
                                                   name=f"{name}, the library's")
scores = {name: attnmt.evaluate(model, split="test", beam=1, limit=TEST)
          for name, model in models.items()}
same = {}
for name in ("RNNencdec", "RNNsearch"):
    evaluated = scores[f"{name} by hand"]
    assert evaluated.sources == [ex.src for ex in test_set]
    same[name] = sum(h == vocab.decode(o) for h, o in zip(evaluated.hypotheses, decoded[name],
                                                          strict=True))
    print(f"{name} by hand: the library's greedy search writes what ours wrote for "
          f"{same[name]} of {len(test_set)} test sequences")
rows = []
for name, done in scores.items():
    rows.append((name, done.bleu, done.data["exact"],
                 *[b["bleu"] for b in done.by_length(width=5)]))
display(scores["RNNencdec by hand"].plot(
    *[done for name, done in scores.items() if name != "RNNencdec by hand"], width=5))
table(rows, ["model", "BLEU", "exact %",
             *[b["label"] for b in scores["RNNsearch by hand"].by_length(width=5)]], digits=1)

# %%
last = {name: points[-1]["loss"] if points else float("nan") for name, points in logged.items()}
theirs_bleu, ours_bleu = ({name: scores[f"{name}{who}"].bleu for name in library}
                          for who in (", the library's", " by hand"))
Markdown(
    f"After {STEPS:,} updates the library's runs reach test BLEU "
    f"{theirs_bleu['RNNsearch']:.1f} (RNNsearch) and {theirs_bleu['RNNencdec']:.1f} "
    f"(RNNencdec), where ours reach {ours_bleu['RNNsearch']:.1f} and "
    f"{ours_bleu['RNNencdec']:.1f}; their "
    f"last logged training losses are {last['RNNsearch']:.2f} and {last['RNNencdec']:.2f}, "
    f"against ln {vocab.size} = {math.log(vocab.size):.2f} for a uniform guess over the "
    "ids (the figure above). The library's RNNencdec and ours are the same function trained "
    "on the same pairs for the same number of updates; they start from different weights "
    "(the paper's initialisation against PyTorch's) and see the batches in different "
    "orders. Which one matters? Ours again, started from the library's initialisation (its "
    "`init_gaussian_orthogonal`), everything else unchanged:"
)

# %%
from attnmt.models.layers import init_gaussian_orthogonal

paper_start, _ = trained("RNNencdec", start=init_gaussian_orthogonal)
library_outputs = [vocab.encode(h) for h in scores["RNNencdec, the library's"].hypotheses]
starts = {"ours, PyTorch's start": decoded["RNNencdec"],
          "ours, the paper's start": greedy(paper_start, test_set)[0],
          "the library's (the paper's start)": library_outputs}
starts = {name: by_length(outputs, test_set) for name, outputs in starts.items()}
table([(f"RNNencdec, {name}", *[rows[label][0] for label in labels])
       for name, rows in starts.items()], ["exact match (%)", *labels], digits=1)

# %%
ours_pt, ours_paper, theirs = (rows[labels[0]][0] for rows in starts.values())
closer = ("the library's run" if abs(ours_paper - theirs) < abs(ours_paper - ours_pt)
          else "ours from PyTorch's start")
Markdown(
    f"On sequences of {labels[0]} symbols, ours started from PyTorch's weights reverses "
    f"{ours_pt:.0f}%, ours started from the paper's {ours_paper:.0f}%, the library's "
    f"{theirs:.0f}%: with the paper's start, ours is closer to {closer}. "
    + ("At this budget the initialisation, not the code, separates the two runs." if closer
       == "the library's run" else "So the initialisation does not explain the gap; the batch "
       "order remains.")
)

# %% [markdown]
# ## On real text: the reference pair
#
# On real text the comparison needs far more training than a chapter has. The repository
# ships two models made for it ([docs/reference.md](../docs/reference.md)): the reference
# RNNsearch and RNNencdec, trained on the Bible (English→French), far past this chapter's
# budget (the table: sizes, updates, where and how they stopped). Their test evaluations
# on John, recorded when they were made, are read back here: `recorded=True` decodes
# nothing.

# %%
import json

pair = {"RNNencdec": "rnnencdec-en-fr", "RNNsearch": "rnnsearch-en-fr"}
real = {name: attnmt.evaluate(chapter.reference(run), recorded=True) for name, run in pair.items()}
for name, done in real.items():
    done.name = name
facts = {name: json.loads((chapter.reference(run) / "reference.json").read_text())
         for name, run in pair.items()}
table([(name, f"{f['parameters']:,}", f"{f['steps']:,}", f"{f['best_step']:,}", f["stopped"],
        f["wall_minutes"], f["gpu"], f["test"]["sentences"], f["test"]["references"],
        f["test_beam"], real[name].bleu) for name, f in facts.items()],
      ["model", "parameters", "updates", "best dev BLEU at", "stopped by", "minutes", "on",
       "test verses", "references", "beam", "test BLEU"], digits=2)

# %%
display(real["RNNencdec"].plot(real["RNNsearch"]))
curves = {name: done.by_length() for name, done in real.items()}
table([("verses", *[b["sentences"] for b in curves["RNNsearch"]])]
      + [(name, *[b["bleu"] for b in rows]) for name, rows in curves.items()],
      ["", *[b["label"] for b in curves["RNNsearch"]]], digits=1)

# %%
enc_real, att_real = ({b["label"]: b["bleu"] for b in curves[n]} for n in ("RNNencdec", "RNNsearch"))
Markdown(
    f"This is Bahdanau et al.'s Figure 2 on our corpus. RNNencdec scores {enc_real['1-10']:.1f} "
    f"BLEU on verses of 1–10 words and {enc_real['31-40']:.1f} on those of 31–40 "
    f"({enc_real['31-40'] / enc_real['1-10']:.0%} of it); RNNsearch {att_real['1-10']:.1f} and "
    f"{att_real['31-40']:.1f} ({att_real['31-40'] / att_real['1-10']:.0%}). (The longest "
    "buckets hold few verses: the table's first row; their BLEU is noisy.) RNNencdec stopped "
    f"by `{facts['RNNencdec']['stopped']}`: its dev BLEU had not improved since update "
    f"{facts['RNNencdec']['best_step']:,} of {facts['RNNencdec']['steps']:,}, so more updates "
    "would not have kept the long verses; RNNsearch stopped by "
    f"`{facts['RNNsearch']['stopped']}`, its best dev BLEU at update "
    f"{facts['RNNsearch']['best_step']:,} of {facts['RNNsearch']['steps']:,}"
    + (": still improving when its time ran out." if facts["RNNsearch"]["best_step"]
       == facts["RNNsearch"]["steps"] else ".")
)

# %% [markdown]
# ## What RNNsearch looks at
#
# Our RNNsearch's weights on two test sequences: the longest one it reverses exactly, and
# the longest one it gets wrong. Each row is an output step, each column a source symbol,
# `</s>` included (the encoder reads it, and the decoder may look at it). The red rings
# mark where the symbol being written sits in the source.

# %%
outputs, weights = decoded["RNNsearch"], looked["RNNsearch"]
length = lambda k: len(test_set[k].src_ids)  # noqa: E731
right = [k for k, ex in enumerate(test_set) if outputs[k] == ex.tgt_ids]
wrong = [k for k, ex in enumerate(test_set) if outputs[k] != ex.tgt_ids]
picks = {what: max(ks, key=length) for what, ks in (("right", right), ("wrong", wrong)) if ks}


def correct_prefix(k):
    """How many symbols of output k are right before its first mistake."""
    pairs = list(zip(outputs[k], test_set[k].tgt_ids, strict=False))
    return next((i for i, (a, b) in enumerate(pairs) if a != b), len(pairs))


def draw(ax, k):
    ex, out = test_set[k], outputs[k]
    n = len(ex.src_ids)
    steps = min(len(out) + 1, weights.shape[1], n + 6)  # + the step of </s>; at most n + 6
    ax.imshow(weights[k, :steps, : n + 1], cmap="Blues", vmin=0, vmax=1)
    for i in range(min(n, steps)):  # output i is source symbol n - 1 - i
        ax.plot(n - 1 - i, i, "o", ms=4, mfc="none", mec="red", mew=0.8)
    ax.set_xticks(range(n + 1), [*ex.src.split(), "</s>"], rotation=90, fontsize=6)
    ax.set_yticks(range(steps), [*vocab.id_pieces(out), "</s>"][:steps], fontsize=6)
    ax.set(xlabel="source", ylabel="output")


fig, axes = plt.subplots(1, len(picks), figsize=(5.5 * len(picks), 5.5), squeeze=False)
for ax, (what, k) in zip(axes[0], picks.items(), strict=True):
    draw(ax, k)
    n, out = length(k), outputs[k]
    ax.set_title(f"{n} symbols, reversed exactly" if what == "right" else
                 f"{n} symbols: wrote {len(out)}, the first {correct_prefix(k)} right"
                 + (f" (its first {n + 6} steps)" if len(out) + 1 > n + 6 else ""), fontsize=9)
fig.tight_layout()
plt.show()
for what, k in picks.items():
    print(f"{what}: {test_set[k].src!r}\n    -> {vocab.decode(outputs[k])!r}")

# %%
def cycle(symbols):
    """The length of the shortest block that `symbols` repeats (its own length if none)."""
    return next(p for p in range(1, len(symbols) + 1)
                if all(a == b for a, b in zip(symbols, symbols[p:], strict=False)))


story = ""
if "wrong" in picks:
    k = picks["wrong"]
    n, out, good = length(k), outputs[k], correct_prefix(picks["wrong"])
    story = (
        f"The second sequence is wrong, and the picture shows how: of its {n} symbols the "
        f"first {good} are reversed right, then the output "
        + (f"goes on for {len(out) - n} more symbol(s), {vocab.decode(out[n:])!r}, where it "
           f"should have stopped: `</s>` is not written at step {n + 1}. "
           if good == n and len(out) > n else
           f"stops after {len(out)} symbols. " if good == len(out) else
           f"writes {vocab.decode(out[good:good + 1])!r} where "
           f"{vocab.decode(test_set[k].tgt_ids[good:good + 1])!r} belongs, and "
           + (f"never stops: {len(out)} symbols, cut at the length limit, repeating "
              f"{vocab.decode(out[good:good + cycle(out[good:])])!r}. "
              if len(out) >= 2 * (n + 1) + 4 else f"ends after {len(out)} symbols. "))
        + f"No training sequence was longer than {MAX_LEN} symbols."
    )
Markdown(story)

# %% [markdown]
# Where exactly does the largest weight of each output step sit? Over every test sequence
# a model reverses exactly, ours and the library's own run (both read the reference with
# teacher forcing, which for these sequences is what they wrote): the offset of the
# position weighted most from the symbol being written. 0 is the symbol being written;
# +1 the one to its right, the symbol written at the step before (for the first step,
# `</s>`); −1 the next one to write.

# %%
from collections import Counter


def where_it_looks(model, examples):
    """Counter of (position weighted most - position of the symbol being written) over
    every output symbol but </s>; the mean weight at offsets 0 and +1; the first steps on </s>."""
    src, mask, tgt_in, _ = batch_of(examples)
    with torch.no_grad():
        alphas = (model(src, mask, tgt_in)[1] if isinstance(model, EncoderDecoder)
                  else model(src, mask, tgt_in, need_weights=True).weights)
    best, offsets, mass, on_end = alphas.argmax(-1).tolist(), Counter(), Counter(), 0
    for b, ex in enumerate(examples):
        n = len(ex.src_ids)
        on_end += best[b][0] == n
        for i in range(n):  # output step i writes source symbol n - 1 - i
            offsets[best[b][i] - (n - 1 - i)] += 1
            for offset in (0, 1):
                mass[offset] += alphas[b, i, n - 1 - i + offset].item()
    return offsets, mass, on_end


library_run = models["RNNsearch, the library's"]
reversed_by = {
    "ours": [test_set[k] for k in right],
    "the library's run": [ex for ex, h in zip(test_set, scores["RNNsearch, the library's"]
                                              .hypotheses, strict=True) if h == ex.tgt],
}
print(", ".join(f"{who} reverses {len(exs)} test sequence{'s' * (len(exs) != 1)} exactly"
                for who, exs in reversed_by.items())
      + "; a run that reverses fewer than 50 is left out")
reversed_by = {who: exs for who, exs in reversed_by.items() if len(exs) >= 50}
looks = {who: where_it_looks(ours["RNNsearch"] if who == "ours" else library_run.module, exs)
         for who, exs in reversed_by.items()}
shown = sorted({offset for offsets, _, _ in looks.values() for offset in offsets})
table([(f"{offset:+d}", *[100 * offsets[offset] / max(1, sum(offsets.values()))
                          for offsets, _, _ in looks.values()]) for offset in shown],
      ["offset", *[f"{who}: % of {sum(o.values()):,} symbols ({len(reversed_by[who])} "
                   "sequences)" for who, (o, _, _) in looks.items()]], digits=1)

# %%
def reading(who):
    offsets, mass, on_end = looks[who]
    total = max(1, sum(offsets.values()))
    return (f"{who}: the symbol being written for {offsets[0] / total:.0%} of the output "
            f"symbols (mean weight {mass[0] / total:.2f}), the one to its right for "
            f"{offsets[1] / total:.0%} (mean weight {mass[1] / total:.2f}); its first step "
            f"weighs `</s>` most in {on_end} of {len(reversed_by[who])} sequences")


lagging = [who for who, (o, _, _) in looks.items() if o[1] > o[0]]
Markdown(
    "Where the largest weight sits — " + "; ".join(reading(who) for who in looks) + ".\n\n"
    + (f"So {' and '.join(lagging)} look{'s' if len(lagging) == 1 else ''} **one step "
       "late**, at the symbol written last, more often than at the one being written. "
       if lagging else "Mostly on the symbol being written, then, and otherwise one step "
       "late, on the symbol written last. ")
    + "Both serve to reverse: the weights of step i are chosen by s_{i−1}, the state before "
    "symbol i is written, and the annotation of the symbol written last has, in its forward "
    "half, just read the symbol before it in the source: the one to write now. "
    + ("The anti-diagonal one would draw by hand is where the model reads most, not "
       "everywhere: " if not lagging else "So ")
    + "attention weights show where the decoder reads, not which source symbol a target "
    "symbol 'is'."
)

# %% [markdown]
# The rest of the course draws attention with the library's explorable view (hover a
# cell, click a symbol). Here it shows our RNNsearch, in the library's class, on the
# sequence of the first picture. The view draws words only, without `</s>`:

# %%
view = models["RNNsearch by hand"].translate(test_set[picks.get("right", 0)].src)
drawn = view.record["attention"][view.record["default_attention"]]["word"]
kept = sum(drawn[0]) if drawn else None
print("the output is empty: the view has no row" if kept is None else
      f"the view's first row holds {kept:.0%} of the first step's weight"
      + (f"; the other {1 - kept:.0%} is on </s>, which the view does not draw"
         if kept < 0.995 else ""))
view

# %% [markdown]
# ## What this chapter found

# %%
hand, lib = scores["RNNsearch by hand"], scores["RNNsearch, the library's"]
hand_enc, lib_enc = scores["RNNencdec by hand"], scores["RNNencdec, the library's"]
Markdown("\n".join([
    f"- **The bottleneck, by hand.** With {HIDDEN} GRU units and {STEPS:,} updates, RNNencdec "
    f"reverses {enc[labels[0]][0]:.0f}% of the test sequences of {labels[0]} symbols and "
    f"{enc[labels[1]][0]:.0f}% of those of {labels[1]}; its best longer bucket reaches "
    f"{max(enc[label][0] for label in labels[2:]):.0f}%. RNNsearch, the same widths and "
    f"updates, reverses {overall['RNNsearch']:.1f}% of all the test sequences "
    f"(RNNencdec {overall['RNNencdec']:.1f}%).",
    "- **Attention does not make unseen lengths free.** "
    + (f"RNNsearch reverses {att[unseen[0]][0]:.0f}% of the sequences of {unseen[0]} symbols, "
       f"longer than any it trained on, against {min(att[label][0] for label in seen):.0f}% or "
       "more in every bucket it trained on." if unseen else "(No test sequence was longer "
       "than the training ones at this budget.)"),
    f"- **The library computes the same functions.** Our weights in `attnmt.models` give "
    f"logits within {max(largest.values()):.1e} of ours, and its greedy search writes our "
    f"outputs for {same['RNNencdec']} (RNNencdec) and {same['RNNsearch']} (RNNsearch) of the "
    f"{len(test_set)} test sequences.",
    f"- **At the same budget, the library's own runs** reach test BLEU {lib.bleu:.1f} "
    f"(exact {lib.data['exact']:.1f}%) for RNNsearch and {lib_enc.bleu:.1f} "
    f"({lib_enc.data['exact']:.1f}%) for RNNencdec, where ours reach {hand.bleu:.1f} "
    f"({hand.data['exact']:.1f}%) and {hand_enc.bleu:.1f} ({hand_enc.data['exact']:.1f}%); "
    f"their last logged training losses are {last['RNNsearch']:.2f} and "
    f"{last['RNNencdec']:.2f} (a uniform guess: {math.log(vocab.size):.2f}). "
    f"The same functions on the same pairs: with the paper's start, our RNNencdec reverses "
    f"{ours_paper:.0f}% of the sequences of {labels[0]} symbols, against {ours_pt:.0f}% with "
    f"PyTorch's and {theirs:.0f}% for the library's run.",
    f"- **On real text** the reference RNNencdec falls from {enc_real['1-10']:.1f} BLEU "
    f"(verses of 1–10 words) to {enc_real['31-40']:.1f} (31–40); the reference RNNsearch "
    f"goes from {att_real['1-10']:.1f} to {att_real['31-40']:.1f}.",
    "- **Where the weight sits.** On the test sequences each reverses exactly, "
    + "; ".join(f"{who} weighs most the symbol being written for {o[0] / max(1, sum(o.values())):.0%}"
                f" of the output symbols and the one written the step before for "
                f"{o[1] / max(1, sum(o.values())):.0%}" for who, (o, _, _) in looks.items())
    + ".",
]))

# %% [markdown]
# **Summary.** A decoder that sees the source only through one fixed-length vector must
# keep every symbol in it, and its outputs fail as sources grow longer; the same decoder
# reading a weighted average of every annotation at every step does not have to. The
# library's `RNNEncDec` and `RNNSearch` are these two models, parameter for parameter, so
# the following chapters use them; how fast they learn depends on where training starts
# as much as on the model. And a heatmap shows where the decoder reads, chosen before it
# writes: it need not be the alignment one would draw by hand.
#
# ## Exercises
#
# Each reruns the hand-written cells (a minute or two at the full budget); write down
# your prediction first.
#
# 1. **The score.** In `Decoder.forward`, replace the additive score by a bilinear one
#    (Luong's `general`, $s_{i-1}^\top W_a^\top U_a h_j$: no tanh, no $v_a$):
#    `e = torch.bmm(keys, self.W_a(s)[:, :, None]).squeeze(-1)`. Does RNNsearch still
#    reverse the test sequences in as many updates? Where does the largest weight sit
#    now? (The library check will then fail: the library's RNNsearch scores additively.)
# 2. **The length range.** Set `MAX_LEN = 10` (the test sequences still reach 30). What
#    will RNNsearch do on 11–30 symbols, and RNNencdec on 1–10?
# 3. **The width and the start.** Set `HIDDEN = 128` (or 32) and train RNNencdec again
#    (`trained("RNNencdec")`): does a wider fixed vector move its fall to longer
#    sequences? Train RNNsearch from the paper's start
#    (`trained("RNNsearch", start=init_gaussian_orthogonal)`): does it stay on the
#    plateau as the library's run did?

# %%
chapter.done()
