# hw4p1: instructor-only
"""What a judge imports while it grades: not sympy (about 0.9 CPU s of every grading), which torch
2.13 imports the first time a tensor's ``backward`` is given a gradient or ``MultiheadAttention`` a
key padding mask; the hidden tests' truths take their vector-Jacobian products with
``hw4lib.numeric_truths.backward_with`` (``tests/library/test_numeric_truths.py``) and give torch's
module one merged mask (``mha_tests.torch_attention``: the module's output and gradients, bit for
bit).

The judge is the real one, started by the Autolab Makefile on an honest handin; its Python is a
wrapper that runs it as ``python -m`` would and, at the judge's own ``os._exit``, writes the names
of the modules it holds.

    .venv/bin/python -m pytest -q tests/grader/test_judge_imports.py
"""
import json
import math
import sys

import numpy as np
import pytest
import torch

from autograder.judging.scoring import rubric
from autograder.judging.scoring.hidden_tests.mha_tests import torch_attention
from hw4lib.numeric_truths import as_tensor, padding_and_causal_masks, torch_multihead_attention
from tests.grader.autograder_helpers import attack_handin, run_grader

# Run as the Makefile's $(PYTHON) with "-m autograder.judging.grade ...": the judge, as python -m
# runs it, whose exit (grade.exit_at_once: os._exit) first writes its sys.modules to MODULES.
PROBE = """
import json, os, runpy, sys
judge, real_exit = os.getpid(), os._exit


def exit_writing_modules(status):
    if os.getpid() == judge:  # not a child forked from the judge
        with open({modules!r}, "w") as out:
            json.dump(sorted(sys.modules), out)
    real_exit(status)


os._exit = exit_writing_modules
assert sys.argv[1] == "-m", sys.argv
sys.argv[:3] = [sys.argv[2]]
sys.path.insert(0, os.getcwd())
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_a_judge_grading_a_handin_never_imports_sympy(tmp_path):
    modules = tmp_path / "grading" / "modules.json"  # run_grader's grading folder
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.format(modules=str(modules)))
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{probe}" "$@"\n')
    wrapper.chmod(0o755)
    lines, scores = run_grader(tmp_path, attack_handin(tmp_path / "honest", "", None),
                               python=str(wrapper))
    assert all(scores[c] == p for c, p in rubric.MYTORCH_RUBRIC.items()), lines[-30:]
    held = json.loads(modules.read_text())
    assert "autograder.judging.scoring.hidden_tests.mha_tests" in held, "the judge's own modules"
    assert "torch" in held and "sympy" not in held, [m for m in held if m.startswith("sympy")][:5]


def same_bits(actual: list[torch.Tensor], expected: list[torch.Tensor]) -> bool:
    """Whether two lists of tensors hold the same dtypes, shapes and bits (NaNs and zeros' signs
    included)."""
    return len(actual) == len(expected) and all(
        a.dtype == e.dtype and a.shape == e.shape
        and a.detach().numpy().tobytes() == e.detach().numpy().tobytes()
        for a, e in zip(actual, expected))


def attention_run(dtype: np.dtype, seed: int, masks: str, self_attention: bool, merged: bool):
    """[output, dquery, dkey, dvalue, each parameter's gradient] of torch's MultiheadAttention
    (N=3, L=4 or 5, S=5, E=6, H=2) under the hidden tests' masks (``masks``: which of "padding",
    "causal" are given), called with its two masks (``merged`` False) or through
    ``torch_attention``."""
    rng = np.random.default_rng(seed)
    N, E, H, S = 3, 6, 2, 5
    L = S if self_attention else 4
    weights = [rng.standard_normal((E, E) if i % 2 == 0 else E) / math.sqrt(E) for i in range(8)]
    reference = torch_multihead_attention(weights, H).to(getattr(torch, np.dtype(dtype).name))
    padding, causal = padding_and_causal_masks(rng, N, L, S)
    assert padding.any() and causal.any(), "each mask hides a key"
    padding = padding if "padding" in masks else None
    causal = causal if "causal" in masks else None
    leaves = [torch.tensor(rng.standard_normal((N, n, E)).astype(dtype), requires_grad=True)
              for n in ((L,) if self_attention else (L, S, S))]
    q, k, v = leaves * 3 if self_attention else leaves
    if merged:
        out = torch_attention(reference, q, k, v, padding, causal)
    else:
        out = reference(q, k, v, key_padding_mask=as_tensor(padding), attn_mask=as_tensor(causal),
                        need_weights=False)[0]
    out.backward(torch.from_numpy(rng.standard_normal((N, L, E)).astype(dtype)))
    return [out, *(t.grad for t in leaves), *(p.grad for p in reference.parameters())]


def test_torch_attention_gives_the_module_s_output_and_gradients_bit_for_bit():
    compared = 0
    for dtype in (np.float32, np.float64):
        for masks in ("padding causal", "padding", "causal", ""):
            for self_attention in (False, True):
                for seed in range(2):
                    case = (dtype, seed, masks, self_attention)
                    assert same_bits(attention_run(*case, merged=True),
                                     attention_run(*case, merged=False)), case
                    compared += 1
    assert compared == 2 * 4 * 2 * 2
