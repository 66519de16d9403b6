"""The settings of the greedy samples a training run draws after its epochs.

The config's ``generation`` section (``Generation`` in hw4lib/config.py) resolves each named
strategy for ``LMTrainer.evaluate`` (``Generation.strategies``); the greedy samples after each
epoch use its shared settings, cut down to what the validation split can give
(:func:`epoch_sample_settings`).
"""
from __future__ import annotations

from hw4lib.config import Generation, GenerationSettings

EPOCH_SAMPLES = 3            # greedy continuations of validation prompts after an epoch


def fit_prompt_request(dataset, num_samples: int, prompt_length: int, seed: int) -> tuple[int, int]:
    """The largest ``(num_samples, prompt_length)``, each at most the one asked, that ``dataset`` can give.

    More prompts come before longer ones; ``(0, 0)`` when no transcript is long enough for any
    prompt. The answer comes from ``dataset.sample_prompts`` itself (it raises ValueError when it
    cannot draw), so which transcripts can give a prompt is decided in one place only.
    """
    for count in range(num_samples, 0, -1):
        for length in range(prompt_length, 0, -1):
            try:
                dataset.sample_prompts(count, length, seed=seed)
            except ValueError:
                continue
            return count, length
    return 0, 0


def epoch_sample_settings(generation: Generation, dataset) -> GenerationSettings | None:
    """Greedy settings for the per-epoch samples, cut down to what ``dataset`` can give.

    Says so in one line when it had to take fewer or shorter prompts; None when it can take none.
    """
    asked = (EPOCH_SAMPLES, generation.prompt_length)
    count, length = fit_prompt_request(dataset, *asked, seed=generation.seed)
    split = getattr(dataset, "partition", "validation")
    if not count:
        print(f"note: no {split} transcript is long enough for a prompt; no samples during training",
              flush=True)
        return None
    if (count, length) != asked:
        fewer = f"{count} of the {asked[0]}" if count < asked[0] else f"{count}"
        shorter = f" (prompt length {length} instead of {asked[1]})" if length < asked[1] else ""
        print(f"note: the {split} split gives {fewer} prompts{shorter} for the samples after each "
              f"epoch; training goes on with those", flush=True)
    return generation.shared().model_copy(update={"num_samples": count, "prompt_length": length})
