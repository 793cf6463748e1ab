"""Block verification (Sun et al., ICLR 2025) declared from a file: specref's batched block engine as a black box.

`VERIFIER` declares rule="block" (and ragged and point-mass drafts), but not injected uniforms: the harness holds
it to block verification's laws from its generator alone, as it would a third party's block verifier. Judged by
`specref conform properties/external_impls/block_declared.py:VERIFIER` (lossless (declared rule block)).
"""

from __future__ import annotations

from specref.batched.block import verify_block


class BlockVerifier:
    name = "block-from-a-file"
    rule = "block"
    ragged = True
    point_mass = True

    def verify(self, target_probs, draft_probs, draft_tokens, generator, *, num_draft=None):
        return verify_block(target_probs, draft_probs, draft_tokens, generator, num_draft=num_draft)


VERIFIER = BlockVerifier()
