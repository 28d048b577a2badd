"""Mnih et al. 2014, "Recurrent Models of Visual Attention" (RAM), as a `Seq2Seq`: the
model never sees the whole image, only N glimpses at places a learned policy chooses.

Per glimpse n = 1..N (Mnih §3 "The Recurrent Attention Model", §4 "Experiments"):

    ρ(x, l_n)                             glimpse sensor: K square patches centred at l_n,
                                          sides P, 2P, 4P... pixels, each averaged down to
                                          P x P (a retina: sharp centre, coarse surround)
    h_g = ReLU(W_ρ ρ(x, l_n))             glimpse network f_g (§4 "glimpse network"):
    h_l = ReLU(W_l l_n)                   "what" and "where",
    g_n = ReLU(W_gg h_g + W_gl h_l)       joined
    h_n = GRU(h_{n-1}, g_n), h_0 = 0      core network f_h
    μ_n = tanh(W_μ h_n)                   location network f_l: the mean of
    l_{n+1} ~ N(μ_n, σ² I)                the location policy π(l_{n+1} | h_n)
    b_n = W_b h_n                         baseline: b_n ≈ E[R | h_n] (§3 "learned baseline")
    y ~ softmax(W_y h_N)                  action network f_a: the label, after glimpse N

With a context network (`context` = C > 0; Ba et al. 2015, "Multiple Object Recognition
with Visual Attention", §3 "context network" and the two-layer core of their Fig. 1), the
"where" has its own recurrent layer, started from a coarse view of the whole image:

    c = ReLU(W_c1 thumb_C(x))             the image averaged down to C x C
    r_0 = tanh(W_c2 c)                    context network: the "where" state's start
    l_1 ~ N(tanh(W_μ r_0), σ² I)          the first location is an action too
    h_n = GRU(h_{n-1}, g_n)               the "what" layer, as above (it classifies)
    r_n = GRU'(r_{n-1}, h_n)              the "where" layer (h_n detached)
    l_{n+1} ~ N(tanh(W_μ r_n), σ² I),  b_n = W_b r_n

Choices, where Mnih et al. leave room or where attnmt needs one:

- Coordinates: a location is (row, col) in [-1, 1]², (-1, -1) the top-left corner of the
  image and (1, 1) its bottom-right corner (the edges of the corner pixels, as
  `grid_sample` with `align_corners=False` reads them).
- Core network: a `GRUCell` (Mnih's classification experiments use a rectifier RNN,
  h_n = ReLU(Linear(h_{n-1}) + Linear(g_n)); their dynamic environments an LSTM).
- First location: without a context network l_1 = (0, 0), the centre, fixed: it is no
  action and has no log-probability, and the policy acts N - 1 times (l_2..l_N from
  h_1..h_{N-1}). With one, the policy acts N times (l_1 from r_0, l_{n+1} from r_n).
  μ_N is never needed: h_N only classifies.
- Location policy: μ_n = tanh(·) keeps the mean on the image; σ = `location_std` is fixed.
  In training l_{n+1} is sampled, then clamped to [-1, 1] before the sensor reads it; the
  log-probability is the Gaussian density of the sample *before* the clamp (the clamp is
  part of the environment, so the score-function gradient stays exact). In eval mode
  l_{n+1} = μ_n: greedy and beam search are deterministic.
- Detaching (Mnih §3: the location network is trained by REINFORCE only, the rest by
  the classification loss): the sampled locations are detached, and the location and
  baseline networks read h_n detached. So the cross-entropy trains the glimpse, core and
  action networks and never the location network; -Σ_n (R - b_n) log π(l_{n+1} | h_n)
  trains only the location network; Σ_n (b_n - R)² only the baseline. b_n is paired with
  the action l_{n+1} it precedes. With a context network the same split holds with a
  deeper "where": REINFORCE trains W_μ, the "where" GRU and the context network (the
  location mean reads r_n *not* detached, r_n reads h_n detached), the cross-entropy
  trains the "what" side only, and b_n reads r_n detached. Ba et al. keep the classifier
  off the context for the same reason: the label should come from the glimpses. (It can
  still leak through l: the glimpse network reads the location, so a policy may learn to
  *say* what its thumbnail saw by where it looks; the thumbnail should be too coarse to
  name the label.) The loss side is `attnmt.training.losses` (reward 1 for the right
  label, `train.reinforce_reward: correct`).
- The sensor is not differentiated w.r.t. l (the locations it reads are detached).

Decoding, as every attnmt model: the target is the label then EOS (tgt_in = [BOS, label],
tgt_out = [label, EOS]). `encode` takes all N glimpses (they do not depend on the target);
step 0 returns the action network's scores, every later step a fixed row that puts all its
mass on EOS (every other token `NOT_EOS` below it), so greedy and beam search stop.

Attention weights (`need_weights`): their source axis is the image's *pixels*, H·W of
them row by row (not grid cells, not pixel tokens + EOS). Each glimpse spreads a unit of
mass uniformly over the pixels its finest patch (side P) covers; the map is the mean over
the N glimpses (rows sum to 1), the same for every target step. `glimpse_path` gives the
glimpse centres in pixel coordinates (row, col).

Initialisation: PyTorch's defaults for every layer.

Shapes legend: B batch, S pixel tokens (H·W + 1 with EOS), H, W image height and width,
N glimpses, P patch side, K scales, D hidden width, V target vocabulary, T target length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.data.vocab import EOS
from attnmt.models.base import BatchFirst, ModelOutput, Seq2Seq, check_inputs
from attnmt.models.vision import MAX_SYMBOLS, pixels_of

NOT_EOS = -1e4  # after the label, every token but EOS scores this far below EOS


def location_log_prob(sample: Tensor, mean: Tensor, std: float) -> Tensor:
    """log π(l | μ) = log N(l; μ, σ² I) of a 2-D location, summed over its coordinates.

    Differentiable w.r.t. `mean` (the score function of REINFORCE, Mnih §3 eq. 2).

    Shapes:
        sample, mean (..., 2) -> (...)
    """
    var = std**2
    per_coord = -((sample - mean) ** 2) / (2 * var) - 0.5 * math.log(2 * math.pi * var)
    return per_coord.sum(dim=-1)


def footprint(locations: Tensor, height: int, width: int, side: float) -> Tensor:
    """Unit mass spread uniformly over the pixels a square of `side` pixels centred at each
    location covers (by area; the part outside the image is dropped, the rest renormalised).

    A square centred anywhere in [-1, 1]² overlaps the image (at least a quarter of it, or
    the whole image), so every map sums to 1.

    Shapes:
        locations (B, N, 2) (row, col) in [-1, 1] -> (B, N, H, W)
    """
    centre_row = (locations[..., 0] + 1) / 2 * height  # (B, N), pixel edges at 0..H
    centre_col = (locations[..., 1] + 1) / 2 * width  # (B, N)

    def overlap(centre: Tensor, size: int) -> Tensor:
        edges = torch.arange(size, device=centre.device, dtype=centre.dtype)  # (size,)
        low = torch.maximum(edges, centre[..., None] - side / 2)  # (B, N, size)
        high = torch.minimum(edges + 1, centre[..., None] + side / 2)  # (B, N, size)
        return (high - low).clamp(min=0)  # covered length of each pixel row / column

    area = overlap(centre_row, height)[..., :, None] * overlap(centre_col, width)[..., None, :]
    total = area.sum(dim=(-2, -1), keepdim=True)  # (B, N, 1, 1)
    return area / total.clamp(min=1e-12)  # (B, N, H, W)


@dataclass
class GlimpseMemory(BatchFirst):
    """A batch's glimpse sequence and label scores (they do not depend on the target).

    Fields:
        logits0: the action network's scores of the label (decoder step 0).
        locations: l_1..l_N as the sensor read them (clamped in training), (row, col).
        log_prob: log π(l | ·) of the sampled locations (before the clamp),
            train mode only; else None.
        baseline: b_n, the learned baseline paired with each sampled location (from h_n,
            or r_n with a context network, before the action), train mode only; else None.
        width: the image width W (shared by every row).

    Shapes:
        logits0 (B, V); locations (B, N, 2) in [-1, 1]; log_prob, baseline (B, A): A the
        actions, N - 1 (N with a context network)
    """

    logits0: Tensor
    locations: Tensor
    log_prob: Tensor | None = None
    baseline: Tensor | None = None
    width: int = 0


@dataclass
class GlimpseState(BatchFirst):
    """Between decoder steps: how many target tokens each row has read (0 before the label,
    1 after it). A tensor, so that beam search's `select` carries it.

    Shapes:
        read (B,) long
    """

    read: Tensor


class Glimpses(Seq2Seq):
    """The recurrent attention model of Mnih et al. 2014; see the module docstring.

    Args:
        image_height: H, the height of the data's images (`pixels_of`).
        hidden_size: D, the width of h_g, h_l, g_n and h_n.
        glimpses: N, glimpses per image.
        patch: P, the side of the finest patch and of every resized patch.
        scales: K, patches of sides P, 2P, ..., 2^(K-1)·P per glimpse.
        location_std: σ of the Gaussian location policy (locations in [-1, 1]).
        dropout: on g_n before the core network and on h_N before the action network.
        context: C, the side of the thumbnail a context network reads to choose l_1 and to
            start a separate "where" layer (Ba et al. 2015); 0: none (l_1 the centre).

    Shapes:
        src, src_mask (B, H·W + 1); tgt_in (B, T) -> logits (B, T, V), weights
        (B, T, H·W), attn_log_prob and reward_baseline (B, A) in train mode (A = N - 1,
        or N with a context network)
    """

    uses_attention = True
    reads_images = True
    max_output_tokens = MAX_SYMBOLS + 1  # (the label and EOS are all it ever writes)

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        image_height: int,
        hidden_size: int = 256,
        glimpses: int = 6,
        patch: int = 8,
        scales: int = 3,
        location_std: float = 0.15,
        dropout: float = 0.0,
        context: int = 0,
    ) -> None:
        super().__init__()
        if min(image_height, hidden_size, glimpses, patch, scales) < 1:
            raise ValueError(
                "image_height, hidden_size, glimpses, patch and scales must be >= 1, got "
                f"{image_height}, {hidden_size}, {glimpses}, {patch}, {scales}"
            )
        if context < 0:
            raise ValueError(f"context must be >= 0 (0: no context network), got {context}")
        if not location_std > 0:
            raise ValueError(f"location_std must be > 0, got {location_std!r}")
        if tgt_vocab_size <= EOS:
            raise ValueError(f"the target vocabulary must hold EOS={EOS}, got {tgt_vocab_size}")
        D = hidden_size
        self.image_height, self.glimpses = image_height, glimpses
        self.patch, self.scales, self.location_std = patch, scales, location_std
        self.what = nn.Linear(scales * patch * patch, D)  # W_ρ: h_g = ReLU(W_ρ ρ)
        self.where = nn.Linear(2, D)  # W_l: h_l = ReLU(W_l l)
        self.join_what = nn.Linear(D, D)  # W_gg in g = ReLU(W_gg h_g + W_gl h_l)
        self.join_where = nn.Linear(D, D)  # W_gl
        self.core = nn.GRUCell(D, D)  # f_h
        self.locate = nn.Linear(D, 2)  # W_μ: μ = tanh(W_μ h), f_l
        self.baseline = nn.Linear(D, 1)  # W_b: b = W_b h
        self.classify = nn.Linear(D, tgt_vocab_size)  # W_y: f_a
        self.context = context
        if context:  # Ba et al. 2015: r_0 = tanh(W_c2 ReLU(W_c1 thumb(x))), r_n = GRU'(...)
            self.context_in = nn.Linear(context * context, D)  # W_c1
            self.context_out = nn.Linear(D, D)  # W_c2
            self.where_core = nn.GRUCell(D, D)  # the "where" layer
        self.dropout = nn.Dropout(dropout)
        eos_row = torch.full((tgt_vocab_size,), NOT_EOS)
        eos_row[EOS] = 0.0
        self.register_buffer("eos_logits", eos_row, persistent=False)  # (V,)

    # -- Mnih §4's networks -------------------------------------------------------------

    def sense(self, images: Tensor, location: Tensor) -> Tensor:
        """The glimpse sensor ρ(x, l): K square patches centred at l, of sides P·2^k pixels
        (k = 0..K-1), each averaged down to P x P (2^k x 2^k blocks), flattened row by row
        and concatenated finest first. Outside the image reads 0 (black).

        Each patch is read at full resolution with `grid_sample` (bilinear, zeros padding,
        `align_corners=False`), so a patch whose corner falls on pixel edges copies pixels
        exactly; then `avg_pool2d` shrinks it.

        Shapes:
            images (B, 1, H, W), location (B, 2) (row, col) in [-1, 1] -> (B, K·P²)
        """
        batch, _, height, width = images.shape
        location = location.to(images.dtype)
        patches = []
        for k in range(self.scales):
            side = self.patch * 2**k  # pixels this scale covers, a side
            # theta maps the output's [-1, 1]² onto the square of `side` pixels at l
            # (grid_sample's x is the column, y the row)
            theta = images.new_zeros(batch, 2, 3)
            theta[:, 0, 0] = side / width
            theta[:, 1, 1] = side / height
            theta[:, 0, 2] = location[:, 1]  # x: the column
            theta[:, 1, 2] = location[:, 0]  # y: the row
            grid = F.affine_grid(theta, [batch, 1, side, side], align_corners=False)
            full = F.grid_sample(images, grid, padding_mode="zeros", align_corners=False)
            small = F.avg_pool2d(full, 2**k) if k else full  # (B, 1, P, P)
            patches.append(small.flatten(1))  # (B, P²)
        return torch.cat(patches, dim=1)  # (B, K·P²)

    def glimpse_net(self, images: Tensor, location: Tensor) -> Tensor:
        """g_n = ReLU(W_gg ReLU(W_ρ ρ(x, l)) + W_gl ReLU(W_l l)) (Mnih §4 "glimpse network").

        Shapes:
            images (B, 1, H, W), location (B, 2) -> (B, D)
        """
        h_g = F.relu(self.what(self.sense(images, location)))  # "what": (B, D)
        h_l = F.relu(self.where(location.to(h_g.dtype)))  # "where": (B, D)
        return F.relu(self.join_what(h_g) + self.join_where(h_l))  # (B, D)

    def location_mean(self, state: Tensor) -> Tensor:
        """μ_n = tanh(W_μ state): `encode` passes h_n detached (only REINFORCE trains the
        location network), or, with a context network, r_n, whose graph REINFORCE trains.

        Shapes:
            state (B, D) -> (B, 2), float32
        """
        return torch.tanh(self.locate(state).float())

    def context_state(self, images: Tensor) -> Tensor:
        """r_0 = tanh(W_c2 ReLU(W_c1 thumb_C(x))): the context network (Ba et al. 2015 §3)
        reads the image averaged down to C x C pixels.

        Shapes:
            images (B, 1, H, W) -> (B, D)
        """
        thumb = F.adaptive_avg_pool2d(images, self.context).flatten(1)  # (B, C²)
        return torch.tanh(self.context_out(F.relu(self.context_in(thumb))))  # (B, D)

    def expected_reward(self, hidden: Tensor) -> Tensor:
        """b_n = W_b h_n, h_n detached: only the squared error (b_n - R)² trains it.

        Shapes:
            hidden (B, D) -> (B,), float32
        """
        return self.baseline(hidden.detach()).squeeze(-1).float()

    # -- the Seq2Seq interface ----------------------------------------------------------

    def encode(self, src: Tensor, src_mask: Tensor) -> GlimpseMemory:
        """Take the N glimpses and score the label (Mnih §3: the agent's whole episode).

        Raises ValueError for malformed inputs (`check_inputs`) or a wrong image height.

        Shapes:
            src, src_mask (B, H·W + 1) -> GlimpseMemory(logits0 (B, V), locations
            (B, N, 2), log_prob and baseline (B, A) in train mode)
        """
        check_inputs(src, src_mask)
        images = pixels_of(src, self.image_height)  # (B, 1, H, W)
        batch = images.shape[0]
        hidden = images.new_zeros(batch, self.core.hidden_size)  # h_0: (B, D)
        locations, log_probs, baselines = [], [], []

        def act(policy_state: Tensor) -> Tensor:
            """The next location from h_n (or r_n): sampled in training, μ in eval."""
            mean = self.location_mean(policy_state)  # μ_n: (B, 2)
            if not self.training:
                return mean.detach()  # the policy's mean: deterministic
            sample = (mean + self.location_std * torch.randn_like(mean)).detach()
            log_probs.append(location_log_prob(sample, mean, self.location_std))  # (B,)
            baselines.append(self.expected_reward(policy_state))  # b_n: (B,)
            return sample.clamp(-1.0, 1.0)  # l_{n+1} ~ N(μ_n, σ²), clamped: (B, 2)

        where = self.context_state(images) if self.context else None  # r_0: (B, D)
        location = act(where) if self.context else images.new_zeros(batch, 2)  # l_1
        for n in range(1, self.glimpses + 1):
            locations.append(location)
            g = self.glimpse_net(images, location)  # g_n: (B, D)
            hidden = self.core(self.dropout(g), hidden)  # h_n: (B, D)
            if n == self.glimpses:
                break  # h_N classifies; no l_{N+1}
            if where is not None:
                where = self.where_core(hidden.detach(), where)  # r_n: (B, D)
            location = act(hidden.detach() if where is None else where)  # l_{n+1}: (B, 2)
        logits0 = self.classify(self.dropout(hidden))  # f_a(h_N): (B, V)
        log_prob = baseline = None
        if self.training:
            empty = images.new_zeros(batch, 0)  # N = 1 and no context: no action taken
            log_prob = torch.stack(log_probs, dim=1) if log_probs else empty  # (B, A)
            baseline = torch.stack(baselines, dim=1) if baselines else empty  # (B, A)
        return GlimpseMemory(
            logits0=logits0,
            locations=torch.stack(locations, dim=1),  # (B, N, 2)
            log_prob=log_prob,
            baseline=baseline,
            width=images.shape[-1],
        )

    def init_state(self, memory: GlimpseMemory) -> GlimpseState:
        """Nothing read yet. Shapes: read (B,)."""
        batch = memory.logits0.shape[0]
        return GlimpseState(read=torch.zeros(batch, dtype=torch.long, device=memory.logits0.device))

    def step(
        self,
        prev_tokens: Tensor,
        state: GlimpseState,
        memory: GlimpseMemory,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, GlimpseState, Tensor | None]:
        """Step 0 (reading BOS): the label's scores; every later step: the EOS row.

        Shapes:
            prev_tokens (B,) -> logits (B, V), weights (B, H·W) or None
        """
        first = (state.read == 0)[:, None]  # (B, 1)
        eos = self.eos_logits.to(memory.logits0.dtype).expand_as(memory.logits0)  # (B, V)
        logits = torch.where(first, memory.logits0, eos)  # (B, V)
        weights = self.glimpse_map(memory) if need_weights else None
        return logits, GlimpseState(read=state.read + 1), weights

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        *,
        need_weights: bool = False,
        logits: bool = True,
    ) -> ModelOutput:
        """Teacher forcing: position 0 the label's scores, positions >= 1 the EOS row.

        Shapes:
            src, src_mask (B, H·W + 1); tgt_in (B, T) -> logits (B, T, V), weights
            (B, T, H·W), attn_log_prob and reward_baseline (B, A) in train mode; the
            logits always (no output layer to leave to the loss: `logits` is ignored)
        """
        check_inputs(src, src_mask, tgt_in)
        memory = self.encode(src, src_mask)
        batch, steps = tgt_in.shape
        eos = self.eos_logits.to(memory.logits0.dtype)
        later = eos.expand(batch, max(steps - 1, 0), -1)  # (B, T - 1, V)
        logits = torch.cat([memory.logits0[:, None], later], dim=1)[:, :steps]  # (B, T, V)
        weights = None
        if need_weights:
            weights = self.glimpse_map(memory)[:, None].expand(-1, steps, -1)  # (B, T, H·W)
        return ModelOutput(
            logits=logits,
            weights=weights,
            attn_log_prob=memory.log_prob,
            attn_entropy=None,
            reward_baseline=memory.baseline,
        )

    # -- what plots and scores read -----------------------------------------------------

    def glimpse_map(self, memory: GlimpseMemory) -> Tensor:
        """Where the model looked, as attention over pixels: each glimpse's finest patch
        (side P) as uniform mass over the pixels it covers (`footprint`), averaged over the
        N glimpses; the source axis is the H·W pixels row by row.

        Shapes:
            -> (B, H·W), non-negative, rows summing to 1
        """
        locations = memory.locations.float()  # (B, N, 2)
        maps = footprint(locations, self.image_height, memory.width, self.patch)  # (B, N, H, W)
        return maps.mean(dim=1).flatten(1)  # (B, H·W)

    def glimpse_path(self, memory: GlimpseMemory) -> Tensor:
        """The glimpse centres l_1..l_N in pixel coordinates (row, col): pixel (i, j)'s
        centre is (i, j), so (-1, -1) is (-0.5, -0.5) and (1, 1) is (H - 0.5, W - 0.5).

        Shapes:
            -> (B, N, 2)
        """
        locations = memory.locations.float()  # (B, N, 2)
        size = locations.new_tensor([self.image_height, memory.width])  # (2,)
        return (locations + 1) / 2 * size - 0.5  # (B, N, 2)


__all__ = [
    "NOT_EOS",
    "GlimpseMemory",
    "GlimpseState",
    "Glimpses",
    "footprint",
    "location_log_prob",
]
