"""Which settings each decoding run of a training run uses.

``config["generation"]`` holds shared keys (``num_samples``, ``prompt_length``, ``seed``,
``max_length``) and one sub-dict per strategy (see ``Generation`` in hw4lib/config.py):
:func:`generation_configs` resolves them into one complete settings dict per strategy, what
``LMTrainer.evaluate`` runs after training. The greedy samples after each epoch use the shared
settings, cut down to what the validation split can give (:func:`epoch_sample_settings`).
"""
from __future__ import annotations

from typing import Any

from hw4lib.config import GENERATION_DEFAULTS

EPOCH_SAMPLES = 3            # greedy continuations of validation prompts after an epoch


def shared_generation_settings(config: dict[str, Any]) -> dict[str, Any]:
    """``GENERATION_DEFAULTS`` updated with the non-strategy keys of ``config["generation"]``."""
    section = config.get("generation") or {}
    return {**GENERATION_DEFAULTS, **{k: v for k, v in section.items() if not isinstance(v, dict)}}


def generation_configs(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The named generation settings of a config: ``{"greedy": {...}, "beam": {...}, ...}``.

    Each strategy's keys override the shared ones and its ``method`` defaults to the sub-dict's name.
    """
    section = config.get("generation") or {}
    shared = shared_generation_settings(config)
    return {name: {**shared, "method": name, **options}
            for name, options in section.items() if isinstance(options, dict)}


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


def epoch_sample_settings(config: dict[str, Any], dataset) -> dict[str, Any] | None:
    """Greedy settings for the per-epoch samples, cut down to what ``dataset`` can give.

    Says so in one line when it had to take fewer or shorter prompts; None when it can take none.
    """
    settings = {**shared_generation_settings(config), "method": "greedy", "num_samples": EPOCH_SAMPLES}
    asked = (settings["num_samples"], settings["prompt_length"])
    count, length = fit_prompt_request(dataset, *asked, seed=settings["seed"])
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
    return {**settings, "num_samples": count, "prompt_length": length}
