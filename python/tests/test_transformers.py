"""A Hugging Face Llama (tiny random configuration) with
attn_implementation="kernelkit" against "sdpa": the logits within float32
tolerance, the same greedy tokens, and every attention call (prefill and
decode) made by KernelKit. Skipped when torch or transformers is absent."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import Capture  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "examples", "python")))


def test_llama_kernelkit_vs_sdpa():
    import llama_kernelkit as ex

    import kernelkit.torch as kt

    with Capture("kk_attention", (0,)) as cap:
        diff, same = ex.compare("cpu", torch.float32, seq=20, new_tokens=4, verbose=False)
    assert diff <= ex.TOLERANCE[torch.float32]
    assert same
    # 2 layers: one forward, then generate's prefill and 3 decode steps
    assert len(cap.calls) == 2 * (1 + 1 + 3)
    assert not kt._fallback_logged


def test_padded_batch_falls_back():
    import llama_kernelkit as ex

    ref = ex.tiny_llama("sdpa")
    kk = ex.tiny_llama("kernelkit")
    kk.load_state_dict(ref.state_dict())
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding
    with torch.no_grad():
        a = ref(ids, attention_mask=mask).logits
        b = kk(ids, attention_mask=mask).logits
    torch.testing.assert_close(a[1], b[1], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(a[0, 4:], b[0, 4:], atol=1e-4, rtol=1e-4)
