"""Speculative decoding over real (tiny) transformers models: models, processors, generation, exact laws, checks.

tiny         tiny GPT-2 target and draft, trained for seconds on a specref Markov corpus, cached on disk
processors   temperature / top-k / top-p, as transformers' warpers, applied to target and draft alike
forward      ragged rows: left padding, attention mask, position ids (no KV cache)
generation   batched speculative generation with any verify callable (default specref.batched.verify)
target_law   the exact law of n new tokens by batched enumeration of prefixes
lawcheck     chi-square of continuations against that law
tau          measured tau against tau predicted from the models' p/q
speed        plain against speculative wall time, and the latency model
pipelines    PipelineAdapter: specref-generate, transformers-generate, processor-mismatch mutants
"""
