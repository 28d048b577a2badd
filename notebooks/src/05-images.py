# %% [markdown]
# # 5. Where a model looks in an image
#
# Attention is not only for translation. Xu et al. (2015), *Show, Attend and Tell*, put
# Bahdanau's attention over the regions of an image while a recurrent decoder writes a
# caption, one word at a time. A CNN turns the image into a grid of annotation vectors
# a_1..a_L (one per region); at step t the decoder scores every region against its state,
# e_ti = f_att(a_i, h_{t−1}), and reads
#
# - **soft** attention: the expected context z_t = Σ_i α_ti a_i, α_t = softmax(e_t)
#   (§4.2: trained by ordinary backpropagation);
# - **hard** attention: one region s_t sampled from α_t, z_t = a_{s_t} (§4.1: the
#   sampling is not differentiable, so the attention is trained with REINFORCE).
#
# Their Figures 2 and 3 show the weights upsampled onto the image, one panel per word.
# A year earlier Mnih et al. (2014), *Recurrent Models of Visual Attention*, read an image
# only through a few **glimpses**: small patches around a location that a policy chooses,
# again trained with REINFORCE.
#
# No caption corpus can be downloaded here, so attnmt builds tasks from real handwritten
# digits (the UCI scans shipped in scikit-learn; docs/images.md): a 24×64 canvas with 2-5
# digits to read left to right (the "caption" is the digits, e.g. `3 1 4`), and a 40×40
# canvas with one digit among clutter for the glimpses. Because the digits were placed
# by us, each digit's box is known, and we can *measure* whether the model looks at the
# digit it writes.


# %%
from IPython.display import Markdown

import attnmt
from attnmt.tutorial import Chapter, table

chapter = Chapter("05-images")  # the budget: $ATTNMT_BUDGET, "full" or "smoke"
SHOW = [0, 1]  # which test canvases to draw
chapter.budget

# %% [markdown]
# ## Four models, trained once
#
# The four shipped configs, each trained to its own budget by `make reference`
# (`python benchmarks/reference.py captions-soft captions-plain captions-hard glimpses`;
# docs/reference.md): the two REINFORCE models need 6,000 and 20,000 updates, far past a
# chapter's six minutes, so this chapter loads them from `reference/` and trains nothing.
# To train one yourself: `attnmt.train("configs/captions-soft.yaml")`.
#
# - `configs/captions-soft.yaml`, **Show, Attend and Tell (soft)**: a small CNN gives a
#   6×16 grid of annotations (each cell sees 17×17 pixels), an attentional GRU decoder
#   with Bahdanau's additive score writes the digits.
# - `configs/captions-plain.yaml`, **Show and Tell** (Vinyals et al. 2015), its
#   no-attention baseline: the same CNN's grid pooled into 2×8 regions, flattened into one
#   vector that starts and feeds the decoder. Same canvases, same 2,000 updates.
# - `configs/captions-hard.yaml`, **hard attention**: the soft captioner's network, one
#   cell sampled per step, trained with REINFORCE (a baseline, an entropy bonus, and Xu's
#   trick of using the soft context for some of the images: `model.hard_expectation`).
# - `configs/glimpses.yaml`, **glimpses** (Mnih et al. 2014): one digit somewhere on a
#   40×40 canvas among clutter. At each of 6 glimpses the model reads patches of 8, 16 and
#   32 pixels around a location, each shrunk to 8×8, and a Gaussian policy chooses the next
#   location; a context network that sees the canvas averaged down to 10×10 chooses the
#   first (Ba et al. 2015).

# %%
NAMES = {
    "Show, Attend and Tell (soft)": "captions-soft",
    "Show and Tell (no attention)": "captions-plain",
    "hard attention (REINFORCE)": "captions-hard",
    "glimpses (REINFORCE)": "glimpses",
}
runs = {name: attnmt.TrainedRun.read(chapter.reference(ref)) for name, ref in NAMES.items()}
# each reference keeps its best checkpoint (by dev exact match): its update, the training
# minutes to it (one thread, on a busy 2-core AMD EPYC: docs/reference.md) and its score
table([(name, run.step, run.data["seconds"] / 60, run.best) for name, run in runs.items()],
      ["model", "kept update", "training minutes", "dev exact %"], digits=1)  # fmt: skip

# %% [markdown]
# The soft captioner learns by ordinary backpropagation; its dev exact match by update:

# %%
soft_run = runs["Show, Attend and Tell (soft)"]
soft_run.plot()

# %%
{m["step"]: f"{m['exact']:.1f}% exact" for m in soft_run.metrics if m["type"] == "valid"}

# %% [markdown]
# Hard attention learns where to look from the reward alone, and its policy takes off
# only after a long flat start (docs/results.md measured it at 2,000-3,000 updates):

# %%
hard_run = runs["hard attention (REINFORCE)"]
{m["step"]: f"{m['exact']:.1f}%" for m in hard_run.metrics if m["type"] == "valid"}

# %% [markdown]
# ## How well they read, and whether the attention is on the digit
#
# `attnmt.evaluate` on an image run gives the exact match (every digit of the canvas
# right, in order) and, in `.data["images"]`, the image scores of `attnmt evaluate`:
# per-digit accuracy and **localisation** (with the model reading the true digits, the
# share of each step's attention mass inside the box of the digit being read, beside the
# share uniform attention would put there, and how often its peak is in that box). The
# references recorded their greedy test evaluation (500 canvases); `recorded=True` reads
# it back.

# %%
reports = {
    name: attnmt.evaluate(str(run.run_dir), split="test", beam=1, recorded=True).data["images"]
    for name, run in runs.items()
}


def where(report):
    found = report.get("localisation")
    if not found:
        return "—", "—", "—"
    return found["mass_on_digit"], found["uniform"], found["peak_on_digit"]


table([(name, r["exact"], r["digit_accuracy"], *where(r)) for name, r in reports.items()],
      ["model", "exact %", "per digit %", "mass on the digit %", "uniform %",
       "peak in its box %"], digits=1)  # fmt: skip

# %% [markdown]
# ## Where it looks, digit by digit
#
# `Model.looks(index)` (what `attnmt plot` draws for image runs) decodes one test canvas
# greedily, spreads each grid cell's weight over the 4×4 pixels it covers and draws one
# panel per emitted digit, the true box dashed (Xu et al. 2015, Fig. 2-3). The soft
# captioner first:

# %%
models = {name: attnmt.load(str(run.run_dir)) for name, run in runs.items()}
soft = models["Show, Attend and Tell (soft)"]
soft.looks(SHOW[0])

# %%
soft.looks(SHOW[1])

# %% [markdown]
# ## Hard attention: one cell per digit
#
# At test time the hard model looks where its policy puts the most weight, one cell per
# step (Xu et al. §4.1). Each panel shows that cell's weight spread over its pixels:

# %%
hard = models["hard attention (REINFORCE)"]
hard.looks(SHOW[0])

# %% [markdown]
# ## Glimpses: Mnih et al. 2014
#
# The glimpse model writes one symbol (the digit, then the end), so the picture has two
# panels with the same map: the finest patches of the 6 glimpses averaged, and the glimpse
# centres in order, numbered.

# %%
glimpses = models["glimpses (REINFORCE)"]
glimpses.looks(SHOW[0])

# %%
glimpses.looks(SHOW[1])

# %% [markdown]
# ## What this shows
#
# One seed each, at the shipped budgets. This execution's numbers:

# %%
soft_r, plain_r, hard_r, glimpse_r = reports.values()


def located(r):
    found = r.get("localisation")
    if not found:
        return "no attention to measure"
    return (f"{found['mass_on_digit']}% of each step's attention mass on the digit being read "
            f"(uniform: {found['uniform']}%), its peak in that box for {found['peak_on_digit']}%")


Markdown("\n".join(
    f"- {name}: {r['exact']}% of the test canvases read exactly, {r['digit_accuracy']}% of "
    f"the digits; {located(r)}."
    for name, r in reports.items()
))  # fmt: skip

# %%
# The claims below, read off the numbers above: a rebuild that changed them stops here.
# Chance for a digit is 10%; the uniform share is what attention spread evenly would get.
checks = {
    "soft attention puts over 3x the uniform share on the digit":
        soft_r["localisation"]["mass_on_digit"] > 3 * soft_r["localisation"]["uniform"],
    "soft attention reads more canvases exactly than no attention":
        soft_r["exact"] > plain_r["exact"],
    "hard attention's one cell is in the digit's box over 90% of the time":
        hard_r["localisation"]["peak_on_digit"] > 90,
    "glimpses read the digit at over 5x chance": glimpse_r["digit_accuracy"] > 5 * 10,
}  # fmt: skip
assert all(checks.values()), checks
checks

# %% [markdown]
# - **Soft attention localises** (Xu et al. 2015, Fig. 2-3: the weights fall on the object
#   named at each word). Here it is measured: the mass on the digit being read is many
#   times the uniform share, and the panels move from digit to digit, left to right, the
#   end-of-sequence step looking past the last digit. Looking at the right digit is not
#   reading it right: a panel can light up the right box over a wrong answer.
# - **Attention against no attention**: at the same 2,000 updates the captioner with
#   attention reads more canvases exactly than Show and Tell, the direction Xu et al.
#   report against Vinyals et al. (their Table 1). Show and Tell sees the canvas only as
#   one vector of 2×8 pooled regions.
# - **Hard attention** (Xu et al. §4.1) ends up looking at one cell inside the right
#   digit's box; its dev curve above shows how long REINFORCE waits before the policy
#   finds the digits.
# - **Glimpses** (Mnih et al. 2014): the glimpse centres go to the digit from the first
#   or second glimpse and the classifier reads what the patches show. Mnih et al.'s error
#   rates on their 60×60 and 100×100 cluttered MNIST cannot be told here (other canvases,
#   8×8 UCI digits).
# - Each is one run of one seed: docs/results.md gives the spread over three runs of the
#   captioners.

# %%
chapter.done()
