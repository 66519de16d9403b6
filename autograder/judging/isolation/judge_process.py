"""The judge's own process: its address space, capped so that no input makes it take the machine's
memory, and its math threads (and, through its environment, its children's)."""
from __future__ import annotations

import os

import torch

from autograder.judging.isolation import thread_policy

# The judge's own address space (soft limit; the worker and the model child set their own): no
# input can make it take the machine's memory. Above its honest peak with torch loaded, plus the
# stacks and buffers of torch's and OpenBLAS's threads, one of each per CPU.
MAX_JUDGE_ADDRESS_SPACE = 4 * 2**30
JUDGE_ADDRESS_SPACE_PER_CPU = 64 * 2**20


def judge_address_space() -> int:
    """MAX_JUDGE_ADDRESS_SPACE plus JUDGE_ADDRESS_SPACE_PER_CPU per CPU, or the machine's memory
    when that is smaller (bytes)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(MAX_JUDGE_ADDRESS_SPACE + JUDGE_ADDRESS_SPACE_PER_CPU * (os.cpu_count() or 1),
               physical)


def limit_address_space() -> None:
    """Cap this process's address space (soft limit) at :func:`judge_address_space`, so that no
    input makes the judge take the machine's memory; a MemoryError then ends the grading with its
    scores line like any failure of ours."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = judge_address_space()
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def use_threads(choice: thread_policy.ThreadChoice) -> dict:
    """Hold the judge's torch and, through this process's environment, its children's math
    libraries to ``choice``; print it in the feedback's header; return details.json's entry."""
    os.environ.update(thread_policy.environment(choice.threads))
    torch.set_num_threads(choice.threads)  # the hidden tests' truths: torch is loaded already
    print(f"hw4p1 autograder: {choice.summary()}")
    return thread_policy.report(choice)
