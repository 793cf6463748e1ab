"""The reference engines: readable, one sequence at a time, all randomness through `specref.randomness`.

* `chain` (re-exported here, so `specref.reference.verify` etc. are the chain engine): exact speculative
  sampling of g drafts (Leviathan et al. 2023; Chen et al. 2023).
* `tree`: verification of a draft tree by one of the lossless tree rules (the tree contract is in its
  docstring); a chain is the tree whose node i has parent i - 1.
* `drafting`: the drafting schemes a tree rule assumes (i.i.d., without replacement, de-duplicated, top-k) and
  one tree cycle.
* `block`: block verification of a chain (Sun et al., ICLR 2025).
"""

from . import block, chain, drafting, tree
from .chain import Model, Row, cycle, draw_drafts, generate, verify

__all__ = ["Model", "Row", "block", "chain", "cycle", "draw_drafts", "drafting", "generate", "tree", "verify"]
