"""transformers universal assisted decoding with do_sample=True: the pruned assistant's q lands on the wrong tokens.

pip install transformers==5.24.0 torch. The assistant is the target re-indexed (ids permuted) plus 2 tokens the
target lacks: q == p on shared tokens, so every draft must be accepted and the output law is p. The pruned head's
rows follow target_to_assistant_input_ids (get_vocab() order); get_target_logits writes them in assistant-id order.
"""

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from transformers.generation.candidate_generator import AssistantVocabTranslatorCache

V, EXTRA, PROMPT, N, T = 8, 2, [1, 2, 3], 1500, 1.0
PERM = [3, 0, 7, 1, 6, 2, 5, 4]  # assistant id i is the target's token PERM[i]


def tokenizer(vocab):
    core = Tokenizer(models.WordLevel(vocab, unk_token=min(vocab, key=vocab.get)))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token=min(vocab, key=vocab.get))


torch.manual_seed(0)
config = GPT2Config(vocab_size=V, n_positions=32, n_embd=32, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=None)
target = GPT2LMHeadModel(config).eval()
with torch.no_grad():
    target.transformer.wte.weight.mul_(4.0)  # peaked laws
assistant = GPT2LMHeadModel(GPT2Config(**{**config.to_dict(), "vocab_size": V + EXTRA})).eval()
state = dict(target.state_dict())
wte = state["transformer.wte.weight"]
state["transformer.wte.weight"] = state["lm_head.weight"] = torch.cat([wte[PERM], torch.randn(EXTRA, wte.shape[1])])
assistant.load_state_dict(state)
target_tokenizer = tokenizer({f"w{i}": i for i in range(V)})
assistant_tokenizer = tokenizer({**{f"w{t}": i for i, t in enumerate(PERM)}, **{f"x{j}": V + j for j in range(EXTRA)}})
assistant.generation_config.num_assistant_tokens = 1
assistant.generation_config.num_assistant_tokens_schedule = "constant"

with torch.no_grad():
    p = torch.softmax(target(torch.tensor([PROMPT])).logits[0, -1] / T, -1)  # the target's law of the first token
counts = torch.zeros(V)
for seed in range(N):
    torch.manual_seed(seed)
    out = target.generate(torch.tensor([PROMPT]), attention_mask=torch.ones(1, 3, dtype=torch.long), do_sample=True,
                          temperature=T, top_k=0, max_new_tokens=2, min_new_tokens=2, pad_token_id=0,
                          assistant_model=assistant, tokenizer=target_tokenizer, assistant_tokenizer=assistant_tokenizer)
    counts[out[0, len(PROMPT)]] += 1
translator = AssistantVocabTranslatorCache.get_translator(target_tokenizer, assistant_tokenizer, V)  # the cached one
order = translator._assistant_to_target_input_ids
rows, written = order[translator.assistant_overlap_token_ids], order[order != -1]
print("pruned head rows are target ids", rows.tolist(), "| get_target_logits writes them to", written.tolist())
q_used = torch.zeros(V)
q_used[written] = p[rows]  # the q _speculative_sampling sees; the drafts come from q == p
accept = p * torch.clamp(p / q_used, max=1.0)
defect = accept + (1 - accept.sum()) * torch.clamp(p - q_used, min=0) / torch.clamp(p - q_used, min=0).sum()
observed = counts / N
for name, law in (("target law p", p), ("law the defect predicts", defect)):
    z = (observed - law) / (law * (1 - law) / N).sqrt()
    print(f"{name:24s}", [round(x, 3) for x in law.tolist()], f"max |z| = {z.abs().max():.1f}")
print(f"{'observed (N=' + str(N) + ')':24s}", [round(x, 3) for x in observed.tolist()])
