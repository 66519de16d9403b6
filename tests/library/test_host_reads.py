# hw4p1: instructor-only
"""The cached generator's decoding steps do not wait for the device (issue 48).

On a GPU each host read of a device tensor (``bool(t)``, ``.item()``, ``.tolist()``, ``int(t)``,
``torch.equal``, ``nonzero``, indexing by a boolean mask, ``.cpu()``) waits for every queued
kernel; a cached decoding step that reads its bookkeeping back loses more to those waits than the
cache saves. No GPU is needed to count them: a torch dispatch mode and a torch function mode see
every such call on CPU tensors, and ``cached_generator.host_reads_are_free`` is made to answer as
on a GPU, so the generator takes its GPU path on the CPU.

Budget per decoding step: none inside the score function, and one in the search itself (its
"has every sequence finished?" test, the loop's stop condition), plus one per search (the
scorer's deferred check, read once at the end). The same path gives the plain generator's tokens.

Run: ``.venv/bin/python -m pytest -q tests/library/test_host_reads.py``.
"""
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from hw4lib.decoding import cached_generator, generator_for_model
from hw4lib.model.kv_cache import CachedScorer
from tests.library.test_kv_cache import compare_searches, ends_mid_way, prompts, random_model, tokenizer

# The aten ops that hand a value to the host; index/index_put_ only with a boolean mask.
READ_OPS = {"aten._local_scalar_dense", "aten.equal", "aten.nonzero", "aten.masked_select",
            "aten.is_nonzero"}
MASK_OPS = {"aten.index", "aten.index_put_", "aten.index_put"}
# Tensor methods that copy to the host without an aten op of their own on a CPU tensor.
READ_METHODS = {"tolist", "cpu", "numpy"}


class HostReads(TorchDispatchMode):
    """Count the calls that read a tensor back to the host, by name."""

    def __init__(self):
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket._qualified_op_name.replace("::", ".")
        masks = [a for a in args if isinstance(a, (list, tuple))
                 for a in a if isinstance(a, torch.Tensor) and a.dtype == torch.bool]
        if name in READ_OPS or (name in MASK_OPS and masks):
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


class MethodReads(TorchFunctionMode):
    def __init__(self, reads: list[str]):
        super().__init__()
        self.reads = reads

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in READ_METHODS:
            self.reads.append(func.__name__)
        return func(*args, **(kwargs or {}))


def count_reads(monkeypatch, search) -> tuple[int, list[str], list[str]]:
    """Run ``search(generator)`` on the GPU path of a cached generator; (decoding steps, the host
    reads inside the score function, the host reads of the whole search)."""
    monkeypatch.setattr(cached_generator, "host_reads_are_free", lambda device: False,
                        raising=False)  # (the code before it read the device freely)
    inside: list[str] = []
    steps = 0
    call = CachedScorer.__call__

    def counted_call(self, x):
        nonlocal steps
        steps += 1
        before = len(counter.reads)
        try:
            return call(self, x)
        finally:
            inside.extend(counter.reads[before:])

    monkeypatch.setattr(CachedScorer, "__call__", counted_call)
    model = random_model(0, eos_bias=4.6)
    generator = generator_for_model(model, tokenizer(40), 24, "cpu")
    counter = HostReads()
    with torch.no_grad(), counter, MethodReads(counter.reads):
        search(generator)
    return steps, inside, counter.reads


SEARCHES = {
    "greedy": lambda g: g.generate_greedy(prompts(1, 6, 1, 40)),
    "beam(width 3)": lambda g: g.generate_beam(prompts(1, 6, 1, 40), 3),
    "sample(top_k 5, top_p 0.8)": lambda g: g.generate_sample(
        prompts(1, 6, 1, 40), 1.0, 5, 0.8, generator=torch.Generator().manual_seed(7)),
}


@pytest.mark.parametrize("name", SEARCHES)
def test_a_cached_decoding_step_reads_the_device_at_most_once(monkeypatch, name):
    steps, inside, total = count_reads(monkeypatch, SEARCHES[name])
    assert steps >= 10, f"{name}: only {steps} steps, the count would say little"
    assert inside == [], (
        f"{name}: the score function read the device {len(inside)} times in {steps} steps "
        f"({sorted(set(inside))}); its bookkeeping must stay on the device")
    assert len(total) <= steps + 2, (
        f"{name}: {len(total)} host reads in {steps} decoding steps ({sorted(set(total))}); the "
        f"budget is one per step (the loop's stop test) and two per search")


def test_the_counter_sees_each_kind_of_read():
    """The counter is the truth of the test above: every listed read must register."""
    t, mask = torch.arange(4), torch.tensor([True, False, True, False])
    reads = [lambda: bool(mask.any()), lambda: t[0].item(), lambda: t.tolist(), lambda: int(t[1]),
             lambda: torch.equal(t, t), lambda: mask.nonzero(), lambda: t[mask], lambda: t.cpu(),
             lambda: t.masked_select(mask), lambda: t.clone().__setitem__(mask, 0)]
    for index, read in enumerate(reads):
        counter = HostReads()
        with counter, MethodReads(counter.reads):
            read()
        assert len(counter.reads) >= 1, f"read {index} was not counted"
    counter = HostReads()
    with counter, MethodReads(counter.reads):
        t[torch.tensor([0, 2])] + mask.long()[:2]  # a gather by indices is no read
    assert counter.reads == [], counter.reads


def test_the_gpu_path_gives_the_plain_generators_tokens(monkeypatch):
    monkeypatch.setattr(cached_generator, "host_reads_are_free", lambda device: False)
    model = random_model(2, eos_bias=9.0)
    x = prompts(1, 6, 1, 40)
    searches = [("greedy", lambda g: g.generate_greedy(x)),
                ("greedy(repeat_penalty 1.5)", lambda g: g.generate_greedy(x, repeat_penalty=1.5)),
                ("beam(width 3)", lambda g: g.generate_beam(x, 3)),
                ("beam(width 4, temperature 0.5)", lambda g: g.generate_beam(x, 4, temperature=0.5)),
                ("sample(top_k 5, top_p 0.8)", lambda g: g.generate_sample(
                    x, 1.0, 5, 0.8, generator=torch.Generator().manual_seed(7)))]
    outputs = compare_searches(model, 40, 24, searches)
    assert ends_mid_way(outputs[0], 1)[0], "no sequence ended mid-way: finished rows untested"


def test_a_stale_cache_on_the_gpu_path_is_an_error(monkeypatch):
    """The deferred check is read: a scorer whose rows stop matching fails the search."""
    monkeypatch.setattr(cached_generator, "host_reads_are_free", lambda device: False)
    model = random_model(0)
    generator = generator_for_model(model, tokenizer(40), 12, "cpu")
    call = CachedScorer.__call__

    def forgets_a_token(self, x):
        if self.tokens is not None and x.size(1) == 4:
            self.tokens = self.tokens.flip(0)  # the cache now believes the rows came reversed
        return call(self, x)

    monkeypatch.setattr(CachedScorer, "__call__", forgets_a_token)
    with torch.no_grad(), pytest.raises(RuntimeError, match="^generate_greedy: a decoding step's rows did not continue"):
        generator.generate_greedy(prompts(1, 3, 1, 40))
