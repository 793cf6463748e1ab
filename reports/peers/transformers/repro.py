"""transformers' _speculative_sampling accepts a draft of target probability 0 when its float32 uniform is 0.

`r_i = torch.rand_like(probability_ratio)` is float32, and float32 torch.rand returns exactly 0.0 with probability
2^-24 per draw on CPU. `is_accepted = r_i <= probability_ratio` then accepts a draft whose ratio p/q is 0: a token the
target never emits is emitted. torch.manual_seed(5528393) is a seed whose first float32 uniform is exactly 0.0 (found
by scanning seeds; one seed in about 2^24 does this). Needs only torch and transformers.
"""

import torch
import transformers
from transformers.generation.utils import _speculative_sampling

SEED_WITH_U_ZERO = 5528393

torch.manual_seed(SEED_WITH_U_ZERO)
print("torch.rand(1) after the seed:", torch.rand(1).item())  # 0.0

vocab, drafted = 4, 2
target_probs = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]])  # [1, g+1, V]: p(token 2) = 0
draft_probs = torch.tensor([[[0.1, 0.1, 0.8, 0.0]]])  # [1, g, V]: the draft proposed token 2 with q = 0.8
candidate = torch.tensor([[drafted]])  # [1, g]

for seed in (SEED_WITH_U_ZERO, SEED_WITH_U_ZERO + 1):
    torch.manual_seed(seed)
    tokens, n_matches = _speculative_sampling(candidate, draft_probs.log(), 1, target_probs.log())
    first = tokens[0, 0].item()
    print(f"transformers {transformers.__version__}, seed {seed}: emitted {tokens[0].tolist()}, "
          f"first token {first} has target probability {target_probs[0, 0, first].item()}")
# Expected: no emitted token ever has target probability 0. Observed with the first seed: token 2, probability 0.0.
