"""litgpt 0.5.13 speculative decoding: (1) generate() drops the first token it samples and returns a variable count;
(2) with top_p < 1 the first rejection crashes. Needs only litgpt and torch (tiny random models, CPU)."""

import torch
from litgpt import GPT, Config
from litgpt.generate.base import generate as base_generate
from litgpt.generate.speculative_decoding import generate as spec_generate


def model(seed: int, n_layer: int) -> GPT:
    torch.manual_seed(seed)
    config = Config(name="tiny", block_size=32, vocab_size=16, padded_vocab_size=16, n_layer=n_layer, n_head=2,
                    n_embd=16, rotary_percentage=1.0, parallel_residual=False, bias=False, norm_class_name="RMSNorm",
                    mlp_class_name="LLaMAMLP", intermediate_size=32)
    m = GPT(config).eval()
    for p in m.parameters():  # peaked logits, so that greedy decoding is not all one token
        torch.nn.init.normal_(p, std=1.0)
    m.max_seq_length = 32
    m.set_kv_cache(batch_size=1)
    return m


def reset(*models):
    for m in models:
        for block in m.transformer.h:
            block.attn.kv_cache.reset_parameters()


target, draft = model(0, 2), model(1, 1)
prompt = torch.tensor([3, 5, 7, 9])
with torch.inference_mode():
    print("(1) greedy (top_k=1), 6 new tokens asked for (max_returned_tokens = 4 + 6):")
    plain = base_generate(target, prompt, 10, temperature=1.0, top_k=1, include_prompt=False)
    reset(target)
    print("  base.generate                 ", plain.tolist())
    for draft_model, label in ((target, "draft = target"), (draft, "tiny draft    ")):
        spec, rate = spec_generate(draft_model, target, prompt, 10, temperature=1.0, top_k=1, speculative_k=3,
                                   include_prompt=False)
        reset(draft_model, target)
        print(f"  speculative_decoding ({label})", spec.tolist(), f"acceptance {rate:.2f}")
    print("(2) T=0.8, top_p=0.9:")
    torch.manual_seed(0)
    for call in range(50):
        try:
            spec_generate(draft, target, prompt, 10, temperature=0.8, top_p=0.9, speculative_k=3, include_prompt=False)
        except RuntimeError as error:
            print(f"  call {call}: RuntimeError: {error}")
            break
        finally:
            reset(draft, target)
    else:
        print("  50 calls, no error")
