"""OpenVINO GenAI speculative decoding with do_sample=True does not keep the target's law (top_k=4, T=0.8).

pip install openvino-genai==2026.4.1.0 optimum-intel==2.2.0 torch   (then: pip uninstall -y torchvision)
Two tiny random GPT-2s (16 tokens, fixed seeds) are exported with optimum-intel: target and draft. 3-token
continuations of one prompt are counted over N runs, with and without draft_model, against the exact law.
"""

import itertools, tempfile, numpy as np, openvino as ov, openvino_genai as genai, torch
from openvino_tokenizers import convert_tokenizer
from optimum.intel import OVModelForCausalLM
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

V, PROMPT, N_NEW, N, T, TOP_K = 16, [1, 2, 3], 3, 4000, 0.8, 4
core = Tokenizer(models.WordLevel({f"w{i}": i for i in range(V)}, unk_token="w0"))
core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tokenizers = convert_tokenizer(PreTrainedTokenizerFast(tokenizer_object=core, unk_token="w0"), with_detokenizer=True)


def tiny_model(seed):  # peaked, context-dependent laws; exported with tokenizer files (needed even for token ids)
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=V, n_positions=32, n_embd=32, n_layer=1, n_head=2, bos_token_id=0)
    model, folder = GPT2LMHeadModel(config).eval(), tempfile.mkdtemp()
    with torch.no_grad():
        model.transformer.wte.weight.mul_(4.0)
    model.save_pretrained(folder)
    OVModelForCausalLM.from_pretrained(folder, export=True).save_pretrained(folder)
    for tokenizer, name in zip(tokenizers, ("openvino_tokenizer.xml", "openvino_detokenizer.xml")):
        ov.save_model(tokenizer, f"{folder}/{name}")
    return model, folder


(target, target_dir), (_, draft_dir) = tiny_model(0), tiny_model(1)
outcomes = list(itertools.product(range(V), repeat=N_NEW))
with torch.no_grad():  # exact P(y1 y2 y3 | prompt) of softmax(top-k(logits) / T), from the torch target
    logits = target(torch.tensor([PROMPT + list(ys) for ys in outcomes])).logits[:, len(PROMPT) - 1 : -1] / T
    logits[logits < logits.topk(TOP_K, -1).values[..., -1:]] = -float("inf")
    exact = torch.softmax(logits, -1).gather(2, torch.tensor(outcomes)[:, :, None]).squeeze(-1).prod(1).numpy()
index = {ys: i for i, ys in enumerate(outcomes)}
scheduler = genai.SchedulerConfig()
scheduler.enable_prefix_caching = False  # with it on, some calls crash (openvino.genai#4190)
f32 = {"INFERENCE_PRECISION_HINT": "f32"}
for label, extra in (("draft_model", {"draft_model": genai.draft_model(draft_dir, "CPU", **f32)}), ("no draft", {})):
    pipe, counts = genai.LLMPipeline(target_dir, "CPU", scheduler_config=scheduler, **extra, **f32), np.zeros(len(exact))
    for seed in range(N):
        config = genai.GenerationConfig(do_sample=True, temperature=T, top_k=TOP_K, max_new_tokens=N_NEW, rng_seed=seed,
                                        eos_token_id=0, ignore_eos=True, **({"num_assistant_tokens": 3} if extra else {}))
        counts[index[tuple(pipe.generate(ov.Tensor(np.array([PROMPT], dtype=np.int64)), config).tokens[0])]] += 1
    impossible = int(counts[exact == 0].sum())
    tv = 0.5 * np.abs(counts / N - exact).sum()
    worst = int(np.argmax(np.abs(counts / N - exact)))
    print(f"{label:12s} N={N}: {impossible} continuations of exact probability 0; TV(observed, exact) = {tv:.3f}; "
          f"worst {outcomes[worst]}: observed {counts[worst] / N:.4f}, exact {exact[worst]:.4f}")
