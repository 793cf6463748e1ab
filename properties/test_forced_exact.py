"""specref.forced: generator states whose chosen outputs make float32 torch.rand exactly 0, proven with torch itself.

Every claim the edge probe's verdicts rest on is checked here on torch's own CPU generator: the forced outputs
give float32 (and float16, bfloat16) uniforms of exactly 0 in each layout's draw order, float64 uniforms and
exponential_ draws stay > 0 (the natural event only: never an all-zero word), the outputs that are not forced are
not zeros, and the reading of how far a call read the forced stream.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specref import forced
from specref.conformance.chain.scenarios import probe_event_probability, probe_event_words

pytestmark = pytest.mark.exact


def test_untemper_inverts_mt19937_tempering():
    words = np.random.Generator(np.random.PCG64(0)).integers(0, 1 << 32, size=100_000, dtype=np.uint64)
    assert np.array_equal(forced.temper(forced.untemper(words)), words)
    assert np.array_equal(forced.untemper(forced.temper(words)), words)


def test_a_state_from_torch_itself_is_read_as_tempered_words():
    # the layout the module states: a freshly seeded state twists on its first draw; float32 rand then reads the
    # low 24 bits of state[k] tempered, for the k-th draw
    generator = torch.Generator().manual_seed(3)
    first = torch.rand(3, generator=generator, dtype=torch.float32)
    words = generator.get_state().numpy()[24 : 24 + 8 * 624].view("<u8")[:3]
    expected = (forced.temper(words) & ((1 << 24) - 1)).astype(np.float64) * 2.0**-24
    assert first.double().tolist() == expected.tolist()


@pytest.mark.parametrize("count", [1, 200, forced.FORCEABLE])
def test_the_first_k_float32_draws_are_exactly_zero(count):
    generator = forced.forced_generator(range(count), seed=count)
    u = torch.rand(count, generator=generator)
    assert (u == 0).all()
    assert (torch.rand(4096, generator=generator) > 0).all()  # past the forced ones (and the twist): natural


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_draws_are_zero_too(dtype):
    assert (torch.rand(100, generator=forced.forced_generator(range(100), seed=1), dtype=dtype) == 0).all()


def test_float64_and_exponential_draws_are_never_zero():
    everything = range(forced.FORCEABLE)
    u64 = torch.rand(forced.FORCEABLE // 2, generator=forced.forced_generator(everything, 2), dtype=torch.float64)
    assert (u64 > 0).all() and (u64 <= 2.0**-21).all()  # tiny (the high 8 bits of a forced word), never 0
    for dtype in (torch.float32, torch.float64):
        drawn = torch.empty(forced.FORCEABLE // 2, dtype=dtype).exponential_(generator=forced.forced_generator(
            everything, 3))  # fmt: skip
        assert (drawn > 0).all() and torch.isfinite(drawn).all()
    # torch.multinomial (exponential_ inside) never picks a zero-probability category under the forced stream
    rows = torch.tensor([0.0, 0.375, 0.625, 0.0]).expand(64, 4).contiguous()
    picked = torch.multinomial(rows, 1, generator=forced.forced_generator(everything, 4))
    assert set(picked.flatten().tolist()) <= {1, 2}


def test_forced_words_keep_their_high_bits_and_the_others_are_random():
    outputs = forced.forced_outputs(range(0, 600, 3), seed=5)[: forced.FORCEABLE]
    hit = np.zeros(forced.FORCEABLE, dtype=bool)
    hit[0:600:3] = True
    assert ((outputs[hit] & 0xFFFFFF) == 0).all() and ((outputs[hit] >> 24) > 0).all()
    assert ((outputs[~hit] & 0xFFFFFF) != 0).all()
    u = torch.rand(forced.FORCEABLE, generator=forced.forced_generator(range(0, 600, 3), seed=5))
    assert torch.equal(u == 0, torch.from_numpy(hit))


LAYOUT_DRAWS = {  # layout -> how a verifier with that draw order reads its accept uniforms [B, g]
    "every_draw": lambda g_, b, gamma: torch.rand(b, gamma, generator=g_),
    "every_other": lambda g_, b, gamma: torch.rand(b * gamma, 2, generator=g_)[:, 0].view(b, gamma),
    "after_first_draw": lambda g_, b, gamma: (torch.rand(b, generator=g_), torch.rand(b, gamma, generator=g_))[1],
    "accept_tests_of_rows": lambda g_, b, gamma: torch.rand(b, gamma + 1, generator=g_)[:, :1],
}


@pytest.mark.parametrize("name", sorted(forced.LAYOUTS))
def test_each_layout_zeroes_the_accept_tests_of_its_draw_order(name):
    rows, gamma = 64, 2
    generator = forced.forced_generator(forced.LAYOUTS[name](rows, gamma), seed=6)
    accept_uniforms = LAYOUT_DRAWS[name](generator, rows, gamma)
    assert (accept_uniforms == 0).all(), name
    assert len(forced.LAYOUTS[name](rows, gamma)) <= forced.FORCEABLE


def test_outputs_used_reads_how_far_the_forced_stream_went():
    generator = forced.forced_generator([0], seed=7)
    assert forced.outputs_used(generator.get_state()) == 0
    torch.rand(5, generator=generator)
    torch.rand(2, generator=generator, dtype=torch.float64)
    assert forced.outputs_used(generator.get_state()) == 9
    torch.rand(forced.FORCEABLE, generator=generator)
    assert forced.outputs_used(generator.get_state()) is None  # twisted: past every forced output


def test_positions_out_of_range_are_refused():
    with pytest.raises(ValueError, match="zero_at"):
        forced.forced_state([forced.FORCEABLE])
    with pytest.raises(ValueError, match="zero_at"):
        forced.forced_state([-1])


def test_event_probability_by_device_and_dtype():
    assert forced.event_probability("cpu", torch.float32) == 2.0**-24
    # float32 rounded to bfloat16 (8 bits): 0, and the 2^15 grid points in [1 - 2^-9, 1) that round to 1.0
    assert forced.event_probability("cpu", torch.bfloat16) == (1 + 2**15) / 2**24
    assert forced.event_probability("cuda", torch.float32) == 2.0**-25
    assert forced.event_probability("cpu", torch.float64) is None
    assert forced.event_probability("cuda", torch.float64) is None
    assert probe_event_probability("cuda", torch.float32) == 2.0**-25
    assert "not reachable" in probe_event_words("cpu", torch.float64)
    assert "2^-25" in probe_event_words("cuda", torch.float32)
    assert "float32 assumed" in probe_event_words("cpu", None)
