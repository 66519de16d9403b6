"""Devices compared by meaning (hw4lib/utils/devices.py), and the student tests' device check
(``testing_framework.check_built_on_input_device``) that uses it, on a simulated GPU.

No GPU is needed: ``torch.cuda.current_device`` and ``torch.cuda.is_available`` are monkeypatched,
and the "CUDA" result is an object whose ``device`` is what a tensor on the GPU reports
(``cuda:0``, never the bare ``cuda`` the test asked for). On a GPU the old check
(``result.device == device``) failed the reference solution's masks this way.
"""
from types import SimpleNamespace

import pytest
import torch

from hw4lib.utils.devices import resolved_device, same_device
from tests.testing_framework import check_built_on_input_device


@pytest.fixture
def current_gpu(monkeypatch):
    """Set which GPU is current (as ``torch.cuda.set_device`` would) without a GPU."""
    def set_current(index: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: index)
    return set_current


def test_cuda_without_an_index_is_the_current_gpu(current_gpu):
    current_gpu(0)
    assert resolved_device("cuda") == torch.device("cuda", 0)
    assert same_device("cuda", torch.device("cuda:0")) and same_device("cuda:0", "cuda")
    assert not same_device("cuda", "cuda:1")
    current_gpu(1)
    assert same_device("cuda", "cuda:1") and not same_device("cuda", "cuda:0")


def test_other_places_differ(current_gpu):
    current_gpu(0)
    assert same_device("cpu", torch.device("cpu")) and same_device("meta", "meta")
    for a, b in (("cpu", "cuda"), ("cpu", "meta"), ("cuda:0", "cuda:1"), ("cpu", "cuda:0")):
        assert not same_device(a, b) and not same_device(b, a), (a, b)


def _simulated_gpu_build(result_index: int):
    """A ``build(device)`` for the device check: a real tensor on the CPU run, and on the CUDA run
    something on ``cuda:<result_index>`` (what a GPU tensor's ``.device`` reports)."""
    def build(device: torch.device):
        if device.type == "cuda":
            return SimpleNamespace(device=torch.device("cuda", result_index))
        return torch.zeros(2, device=device)
    return build


def test_the_device_check_accepts_cuda_0_for_cuda(current_gpu):
    current_gpu(0)
    check_built_on_input_device(_simulated_gpu_build(0), "CausalMask")


def test_the_device_check_still_rejects_another_gpu_and_the_cpu(current_gpu):
    current_gpu(0)
    with pytest.raises(AssertionError, match="on the cuda device: the mask was built on cuda:1"):
        check_built_on_input_device(_simulated_gpu_build(1), "CausalMask", "the mask")
    with pytest.raises(AssertionError, match="on the cuda device: the mask was built on cpu"):
        check_built_on_input_device(lambda device: torch.zeros(2), "CausalMask", "the mask")


def test_the_trainers_device_is_resolved(current_gpu):
    from hw4lib.trainers.base_trainer import resolve_device

    current_gpu(1)
    assert resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("auto") == torch.device("cuda", 1)
    assert resolve_device("cpu") == torch.device("cpu")


def test_without_a_gpu_auto_is_the_cpu_and_cuda_keeps_no_index():
    from unittest import mock

    from hw4lib.trainers.base_trainer import resolve_device
    from hw4lib.utils.devices import resolved_device

    with mock.patch("torch.cuda.is_available", return_value=False):
        assert resolve_device("auto") == torch.device("cpu")
        assert resolve_device(None) == torch.device("cpu")
        assert resolved_device("cuda") == torch.device("cuda"), "no GPU: 'cuda' has no current index"
        assert resolved_device("meta") == torch.device("meta")


def test_this_machines_own_answer_decides_the_device_unpatched():
    """Nothing patched: on a machine without a GPU (this CPU one) ``auto`` is the CPU and ``cuda``
    keeps no index; on a GPU machine ``auto`` and ``cuda`` are the current GPU."""
    from hw4lib.trainers.base_trainer import resolve_device

    if torch.cuda.is_available():
        current = torch.device("cuda", torch.cuda.current_device())
        assert resolve_device("auto") == resolved_device("cuda") == current
        assert same_device("cuda", torch.zeros(1, device="cuda").device)
    else:
        assert resolve_device("auto") == resolve_device(None) == torch.device("cpu")
        assert resolved_device("cuda") == torch.device("cuda") and resolved_device("cuda").index is None
        assert not same_device("cuda", "cuda:0"), "without a GPU no index is current"
    assert resolve_device("cpu") == torch.device("cpu") and same_device("cpu", torch.zeros(1).device)
