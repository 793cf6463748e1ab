"""A contract that is not specref's, written as a third party would: one package and one row of
specref.builtins.CONTRACTS (test_new_contract.py adds the row). It checks a plain sampler,

    sample(probs [B, V] float, generator) -> tokens [B] int64,

against the law it is given: every token an id in [0, V) (t0_valid_ids, the chain's kind with a form of its own
here), and the sampled law by Pearson chi-square (toy_law, a kind declared here)."""
