"""Mnih et al. 2014, "Recurrent Models of Visual Attention" (RAM), as a `Seq2Seq`: the
model never sees the whole image, only N glimpses at places a policy chooses.

Per glimpse n = 1..N (Mnih §3, §4 "Model"):

    ρ(x, l_n)      glimpse sensor: `scales` square patches centred at l_n, sides p, 2p, 4p
                   pixels, each resampled to p x p (a retina: sharp centre, coarse edge)
    g_n = ReLU(W_g [ReLU(W_ρ ρ); ReLU(W_l l_n)])   glimpse network, from "what" and "where"
    h_n = GRU(h_{n-1}, g_n)                          core network (Mnih use an LSTM-free RNN)
    μ_n = tanh(W_μ h_n)                              location network; l_{n+1} ~ N(μ_n, σ²)
    b_n = W_b h_n                                    baseline: the expected reward given h_n
    y ~ softmax(W_y h_N)                             action (classification) network

Locations are (row, col) in [-1, 1]², (-1, -1) the top-left corner. l_1 is the centre
(0, 0), fixed (no log-probability). In training l_{n+1} is sampled and then clamped to
[-1, 1]; its log-probability is that of the Gaussian sample *before* the clamp. In eval
mode l_{n+1} = μ_n, so greedy and beam search are deterministic. The location and
baseline networks read h_n detached: the classification loss trains the sensor, glimpse,
core and action networks; REINFORCE (`attnmt.training.losses`, reward 1 for the right
digit, `train.reinforce_reward: correct`) trains the location network, and the squared
error (b_n - R)² the baseline. b_n is paired with the action l_{n+1} taken from h_n.

Decoding, as every attnmt model: the target is the label then EOS; step 0 gives the
action network's scores, every later step gives EOS. `need_weights` gives, for each step,
the glimpses' finest patches spread over the image's pixels (H·W positions, not grid
cells), averaged over the glimpses; `glimpse_path` gives the path in pixels.

Initialisation: PyTorch's defaults.

Shapes legend: B batch, S pixel tokens (H·W + 1), H, W image, N glimpses, P patch side,
K scales, D hidden width, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.data.vocab import EOS
from attnmt.models.base import BatchFirst, ModelOutput, Seq2Seq, check_inputs
from attnmt.models.vision import pixels_of

NOT_EOS = -1e4  # logits after the label: everything but EOS this far below it


@dataclass
class GlimpseMemory(BatchFirst):
    """The glimpse sequence of a batch (it does not depend on the target).

    Shapes:
        logits (B, V); locations (B, N, 2) in [-1, 1]; log_prob, baseline (B, N - 1) in
        training, else None
    """

    logits: Tensor
    locations: Tensor
    log_prob: Tensor | None = None
    baseline: Tensor | None = None
    width: int = 0  # the image width W (shared by every row)


@dataclass
class GlimpseState(BatchFirst):
    """Between decoder steps: `read` (B,) counts the target tokens read."""

    read: Tensor


class Glimpses(Seq2Seq):
    """The recurrent attention model; see the module docstring.

    Shapes:
        src (B, H·W + 1) pixel tokens; tgt_in (B, T) -> logits (B, T, V), weights
        (B, T, H·W)
    """

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
    ) -> None:
        super().__init__()
        if glimpses < 1 or patch < 1 or scales < 1 or location_std <= 0:
            raise ValueError("glimpses, patch and scales must be >= 1 and location_std > 0")
        D = hidden_size
        self.image_height, self.glimpses = image_height, glimpses
        self.patch, self.scales, self.location_std = patch, scales, location_std
        self.what = nn.Linear(scales * patch * patch, D)  # W_ρ
        self.where = nn.Linear(2, D)  # W_l
        self.glimpse = nn.Linear(2 * D, D)  # W_g
        self.core = nn.GRUCell(D, D)
        self.locate = nn.Linear(D, 2)  # W_μ
        self.baseline = nn.Linear(D, 1)  # W_b
        self.classify = nn.Linear(D, tgt_vocab_size)  # W_y
        self.dropout = nn.Dropout(dropout)
        eos = torch.full((tgt_vocab_size,), NOT_EOS)
        eos[EOS] = 0.0
        self.register_buffer("eos_logits", eos, persistent=False)

    def sense(self, images: Tensor, location: Tensor) -> Tensor:
        """The glimpse sensor ρ(x, l): K patches of sides P·2^k around l, each P x P.

        Shapes:
            images (B, 1, H, W), location (B, 2) (row, col) in [-1, 1] -> (B, K·P²)
        """
        batch, _, height, width = images.shape
        patches = []
        for k in range(self.scales):
            side = self.patch * 2**k  # pixels covered by this scale
            # an affine grid that maps [-1, 1]² of the output onto the square at l
            theta = images.new_zeros(batch, 2, 3)
            theta[:, 0, 0] = side / width  # x (columns) scale
            theta[:, 1, 1] = side / height  # y (rows) scale
            theta[:, 0, 2] = location[:, 1]  # x centre: the column
            theta[:, 1, 2] = location[:, 0]  # y centre: the row
            grid = F.affine_grid(theta, (batch, 1, self.patch, self.patch), align_corners=False)
            patch = F.grid_sample(images, grid, align_corners=False, padding_mode="zeros")
            patches.append(patch.flatten(1))  # (B, P²)
        return torch.cat(patches, dim=1)  # (B, K·P²)

    def log_density(self, sample: Tensor, mean: Tensor) -> Tensor:
        """log N(sample; mean, σ² I), summed over the two coordinates. Shapes: (B, 2) -> (B,)"""
        var = self.location_std**2
        per = -((sample - mean) ** 2) / (2 * var) - 0.5 * math.log(2 * math.pi * var)
        return per.sum(dim=-1)

    def encode(self, src: Tensor, src_mask: Tensor) -> GlimpseMemory:
        """Take the N glimpses and classify. Shapes: src (B, S) -> GlimpseMemory."""
        check_inputs(src, src_mask)
        images = pixels_of(src, self.image_height)  # (B, 1, H, W)
        batch = images.shape[0]
        hidden = images.new_zeros(batch, self.core.hidden_size)  # h_0
        location = images.new_zeros(batch, 2)  # l_1: the centre
        locations, log_probs, baselines = [location], [], []
        for n in range(self.glimpses):
            what = F.relu(self.what(self.sense(images, location)))  # (B, D)
            where = F.relu(self.where(location))  # (B, D)
            g = F.relu(self.glimpse(torch.cat([what, where], dim=-1)))  # g_n: (B, D)
            hidden = self.core(self.dropout(g), hidden)  # h_n
            if n == self.glimpses - 1:
                break
            mean = torch.tanh(self.locate(hidden.detach()))  # μ_n: (B, 2)
            if self.training:
                sample = (mean + self.location_std * torch.randn_like(mean)).detach()
                log_probs.append(self.log_density(sample, mean))  # log π(l_{n+1} | h_n)
                baselines.append(self.baseline(hidden.detach()).squeeze(-1))  # b_n
                location = sample.clamp(-1.0, 1.0)
            else:
                location = mean
            locations.append(location)
        logits = self.classify(self.dropout(hidden))  # from h_N: (B, V)
        stacked = torch.stack(locations, dim=1)  # (B, N, 2)
        if self.training and log_probs:
            log_prob = torch.stack(log_probs, dim=1)  # (B, N - 1)
            return GlimpseMemory(
                logits, stacked, log_prob, torch.stack(baselines, dim=1), images.shape[-1]
            )
        return GlimpseMemory(logits, stacked, width=images.shape[-1])

    def init_state(self, memory: GlimpseMemory) -> GlimpseState:
        return GlimpseState(read=memory.logits.new_zeros(memory.logits.shape[0]))

    def step(
        self,
        prev_tokens: Tensor,
        state: GlimpseState,
        memory: GlimpseMemory,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, GlimpseState, Tensor | None]:
        """Step 0: the label's scores; later steps: EOS. Shapes: prev_tokens (B,) ->
        logits (B, V), weights (B, H·W) or None."""
        first = (state.read == 0)[:, None]  # (B, 1)
        logits = torch.where(first, memory.logits, self.eos_logits.expand_as(memory.logits))
        weights = self.glimpse_map(memory) if need_weights else None
        return logits, GlimpseState(read=state.read + 1), weights

    def forward(
        self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, *, need_weights: bool = False
    ) -> ModelOutput:
        check_inputs(src, src_mask, tgt_in)
        memory = self.encode(src, src_mask)
        steps = tgt_in.shape[1]
        later = self.eos_logits.expand(memory.logits.shape[0], steps - 1, -1)  # (B, T-1, V)
        logits = torch.cat([memory.logits[:, None], later], dim=1)  # (B, T, V)
        weights = None
        if need_weights:
            weights = self.glimpse_map(memory)[:, None].expand(-1, steps, -1)  # (B, T, H·W)
        return ModelOutput(
            logits, weights, attn_log_prob=memory.log_prob, reward_baseline=memory.baseline
        )

    def glimpse_path(self, memory: GlimpseMemory) -> Tensor:
        """The glimpse centres in pixel coordinates (row, col). Shapes: -> (B, N, 2)"""
        scale = memory.locations.new_tensor([self.image_height, memory.width])
        return (memory.locations + 1) / 2 * scale - 0.5  # [-1, 1] -> pixel centres

    def glimpse_map(self, memory: GlimpseMemory) -> Tensor:
        """Each glimpse's finest patch as uniform mass over the pixels it covers, averaged
        over the glimpses. Shapes: -> (B, H·W), rows summing to 1 (0 if all outside)."""
        height, width = self.image_height, memory.width
        rows = torch.arange(height, device=memory.locations.device).float() + 0.5
        cols = torch.arange(width, device=memory.locations.device).float() + 0.5
        centre = (memory.locations + 1) / 2  # (B, N, 2) in [0, 1]
        half = self.patch / 2
        inside_r = (rows[None, None] - centre[..., :1] * height).abs() <= half  # (B, N, H)
        inside_c = (cols[None, None] - centre[..., 1:] * width).abs() <= half  # (B, N, W)
        area = inside_r[..., :, None] & inside_c[..., None, :]  # (B, N, H, W)
        mass = area.float()
        mass = mass / mass.sum(dim=(2, 3), keepdim=True).clamp(min=1)
        return mass.mean(dim=1).flatten(1)  # (B, H·W)
