"""Training, evaluation and generation for the decoder-only language model.

The metric every run reports is defined in metrics.py (:func:`evaluate_language_model`); the
settings of each decoding run come from generation_settings.py; the checks and the run folder's
bookkeeping (checkpoints, plots, logging) live in _checks.py and base_trainer.py.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from hw4lib.config import Config, GenerationSettings, decoding_settings
from hw4lib.decoding import SequenceGenerator, generator_for_model
from hw4lib.file_io import write_json
from hw4lib.handin_format import GENERATIONS_FILE, METRICS_FILE

from ._checks import check_ready_to_train
from .base_trainer import BEST_CHECKPOINT_NAME, LAST_CHECKPOINT_NAME, BaseTrainer
from .generation_settings import epoch_sample_settings
from .metrics import evaluate_language_model, language_model_metrics, safe_exp

# Training batches between reads of the summed loss (its finite check and the progress bar).
READ_LOSS_EVERY = 16


class LMTrainer(BaseTrainer):
    """Trains a ``DecoderOnlyTransformer`` to predict the next token, and evaluates it.

    The config's ``training`` section drives it (each key's meaning and default: ``Training`` in
    hw4lib/config.py; the precision: precision.py).

    Usage (what ``hw4lib.train`` and the notebook do)::

        trainer = LMTrainer(model, tokenizer, config, run_name, config_file)
        trainer.optimizer = create_optimizer(model, config.optimizer)
        trainer.scheduler = create_scheduler(trainer.optimizer, config.scheduler, train_loader, accum)
        trainer.train(train_loader, val_loader, epochs=config.training.epochs)
        test_metrics, generations = trainer.evaluate(test_loader)
    """

    def __init__(self, model: nn.Module, tokenizer, config: Config | dict[str, Any], run_name: str,
                 config_file=None, device=None):
        super().__init__(model, tokenizer, config, run_name, config_file, device)
        self.accumulation_steps = self.config.training.gradient_accumulation_steps
        self.grad_clip_norm = self.config.training.grad_clip_norm
        label_smoothing = self.config.training.label_smoothing
        # TODO: self.criterion = cross-entropy over (N*T, K) logits that ignores targets equal to
        #       the tokenizer's pad id and applies label_smoothing
        # BEGIN SOLUTION
        self.criterion = nn.CrossEntropyLoss(ignore_index=self.tokenizer.pad_id,
                                             label_smoothing=label_smoothing)
        # END SOLUTION

    # ------------------------------------------------------------------ one epoch

    def _train_epoch(self, dataloader) -> tuple[dict[str, float], torch.Tensor]:
        """One pass over ``dataloader``, updating the weights every ``accumulation_steps`` batches.

        Returns:
            metrics: ``ce_loss_token`` ... ``perplexity_char`` of the training loss (which
                includes label smoothing when it is on) averaged over the epoch's targets.
            attn: (T, T) head-averaged attention of the last layer for the first sequence of the
                epoch's last batch, cropped to its length (for plotting).

        Each batch is one :meth:`_train_step`. The losses add up on the device and are read back
        (checked finite, shown in the progress bar) every ``READ_LOSS_EVERY`` batches and at the
        end: on a GPU each read waits for the queued steps (hw4lib/trainers/throughput.py measures
        the pass against its bare steps).
        """
        self.model.train()
        nll_sum = torch.zeros((), dtype=torch.float64, device=self.device)  # summed over targets
        total_nll = 0.0  # pragma: no mutate (equivalent: the last batch always reads it)
        total_tokens, checked_from, attn = 0, 0, None
        self.optimizer.zero_grad(set_to_none=True)  # pragma: no mutate (equivalent: same next grads)
        progress = tqdm(dataloader, desc=f"[epoch {self.current_epoch + 1}] train", leave=False,
                        disable=not self.config.training.progress_bar,
                        dynamic_ncols=True)  # pragma: no mutate (equivalent: a terminal's width only)
        for batch_index, (padded_shifted, padded_golden, lengths) in enumerate(progress):
            batch_tokens = int(lengths.sum())  # before the copy: no read back from the device
            lengths = lengths.to(self.device)
            loss, attention = self._train_step(padded_shifted.to(self.device),
                                               padded_golden.to(self.device), lengths,
                                               batch_index, len(dataloader))
            nll_sum += loss.detach().double() * batch_tokens  # as float(loss) * tokens
            total_tokens += batch_tokens
            if (batch_index + 1) % READ_LOSS_EVERY == 0 or batch_index + 1 == len(dataloader):
                total_nll = nll_sum.item()
                self._check_finite(torch.tensor(total_nll),
                                   f"training batches {checked_from}-{batch_index}")
                checked_from = batch_index + 1
                running = total_nll / total_tokens
                progress.set_postfix(loss=f"{running:.3f}", ppl_tok=f"{safe_exp(running):.2f}",
                                     lr=f"{self.optimizer.param_groups[0]['lr']:.2e}",
                                     refresh=False)  # pragma: no mutate (equivalent: when it redraws, not what)
            if batch_index + 1 == len(dataloader) and attention:
                last_layer = list(attention.values())[-1]  # keys are in layer order
                attn = last_layer[0, : lengths[0], : lengths[0]].detach().float().cpu()
        progress.close()
        metrics = language_model_metrics(total_nll, total_tokens, dataloader.dataset.total_chars)
        return metrics, attn

    def _train_step(self, padded_shifted: torch.Tensor, padded_golden: torch.Tensor,
                    lengths: torch.Tensor, batch_index: int, batches: int
                    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Forward and backward of batch ``batch_index`` of ``batches``, on the device: inputs and
        targets (N, T) int64, lengths (N,).

        Forward under autocast (a no-op at fp32), loss = criterion over the flattened logits
        (N*T, K) and targets (N*T,), backward of ``loss / accumulation_steps`` through
        ``self.scaler`` (so accumulated gradients average over the window), then
        ``self._optimizer_step()`` at the end of each window and after the last batch.

        Returns:
            loss: () the batch's mean loss over its targets, still attached to the graph.
            attention: the model's attention dict, {} but for the last batch (only it is
                plotted; the others take the fused attention path).
        """
        last = batch_index + 1 == batches
        with self._autocast(), self._attention_weights(needed=last):
            # TODO: logits (N, T, K) and attention dict from the model; loss = self.criterion on
            #       logits flattened to (N*T, K) and padded_golden flattened to (N*T,)
            # BEGIN SOLUTION
            logits, attention = self.model(padded_shifted, lengths)
            loss = self.criterion(logits.reshape(-1, logits.size(-1)), padded_golden.reshape(-1))
            # END SOLUTION
        # TODO: backpropagate loss / self.accumulation_steps through self.scaler.scale(...)
        # BEGIN SOLUTION
        self.scaler.scale(loss / self.accumulation_steps).backward()
        # END SOLUTION
        if (batch_index + 1) % self.accumulation_steps == 0 or last:
            self._optimizer_step()
        return loss, attention

    def _optimizer_step(self) -> None:
        """Unscale, clip, step the optimizer (and a per-step scheduler), and zero the gradients."""
        if self.grad_clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        if self.scheduler is not None and self._scheduler_interval() == "step":
            self.scheduler.step()

    def _validate_epoch(self, dataloader) -> dict[str, float]:
        """Metrics of the current model on ``dataloader`` (see :func:`evaluate_language_model`)."""
        # TODO: return evaluate_language_model(...) of self.model on dataloader and self.device
        # BEGIN SOLUTION
        return evaluate_language_model(self.model, dataloader, self.device)
        # END SOLUTION

    # ------------------------------------------------------------------ the loop

    def train(self, train_loader, val_loader, epochs: int) -> None:
        """Train until ``epochs`` epochs are done in total; after ``load_checkpoint`` it continues.

        After each epoch: validation, a per-epoch scheduler step (``reduce_lr`` gets the
        validation ``ce_loss_char``), metrics JSON and curves, an attention map, greedy samples
        every ``samples_every`` epochs, then the checkpoints: ``best`` when the validation
        ``perplexity_char`` improved, ``last`` always. The checkpoints are written last, so the
        RNG state they hold is exactly the one the next epoch starts from. The curves, the map and
        the samples are extras that never end a run (see base_trainer.py).

        The run folder's test results are removed first (they would describe other weights).

        Raises:
            NonFiniteLossError: a loss became NaN/inf; the checkpoints of the last good epoch stay.
            TrainingInterrupted: Ctrl-C; the message names the checkpoint of the last complete
                epoch and how to resume from it.
        """
        check_ready_to_train(self.optimizer)
        samples_every = self.config.training.samples_every
        sample_settings = None
        if samples_every:
            sample_settings = self._run_extra(
                "choosing the validation prompts",
                lambda: epoch_sample_settings(self.config.generation, val_loader.dataset))
        self._forget_test_results()
        with self.interruptible("training"):
            for epoch in range(self.current_epoch + 1, epochs + 1):
                start = time.perf_counter()
                # TODO: train_metrics, train_attn = one training epoch on train_loader; then
                #       val_metrics = one validation epoch on val_loader
                # BEGIN SOLUTION
                train_metrics, train_attn = self._train_epoch(train_loader)
                val_metrics = self._validate_epoch(val_loader)
                # END SOLUTION
                self._check_finite(torch.tensor(val_metrics["ce_loss_char"]), "validation")
                self._epoch_scheduler_step(val_metrics["ce_loss_char"])
                self.current_epoch = epoch
                elapsed = time.perf_counter() - start
                self._log_metrics({"train": train_metrics, "val": val_metrics,
                                   "lr": self.optimizer.param_groups[0]["lr"],
                                   "epoch_seconds": elapsed}, epoch)
                if train_attn is not None:
                    self._run_extra(f"the attention map of epoch {epoch}",
                                    lambda: self._save_attention_plot(train_attn, epoch,
                                                                      "train_last_layer"))
                if sample_settings and epoch % samples_every == 0:
                    self._run_extra(f"the validation samples of epoch {epoch}",
                                    lambda: self._save_generated_text(
                                        self.generate(val_loader, sample_settings),
                                        f"val_greedy_epoch{epoch:03d}"))
                if val_metrics["perplexity_char"] < self.best_metric:
                    self.best_metric = val_metrics["perplexity_char"]
                    self.save_checkpoint(BEST_CHECKPOINT_NAME)
                self.save_checkpoint(LAST_CHECKPOINT_NAME)
                print(f"epoch {epoch}/{epochs} ({elapsed:.0f}s): "
                      f"train ce/char {train_metrics['ce_loss_char']:.4f}  "
                      f"val ppl/char {val_metrics['perplexity_char']:.4f}  "
                      f"val ppl/token {val_metrics['perplexity_token']:.2f}  "
                      f"lr {self.optimizer.param_groups[0]['lr']:.2e}",
                      flush=True)  # pragma: no mutate (equivalent: when the line is written, not what)

    # ------------------------------------------------------------------ evaluation and generation

    def evaluate(self, test_loader) -> tuple[dict[str, float], dict[str, list[dict]]]:
        """Test metrics and generations for every strategy of the config's ``generation`` section.

        Also writes ``test_metrics.json`` and ``test_generated_results.json`` into the run folder.

        Returns:
            test_metrics: as :func:`evaluate_language_model`.
            generation_results: ``{strategy name: list of samples}`` (see :meth:`generate`).
        """
        # TODO: the test metrics of test_loader with the library's metric function (imported
        #       above), and the generations of test_loader for each named strategy of the config's
        #       generation section, with that strategy's resolved settings (hw4lib/config.py's
        #       Generation resolves them), keyed by strategy name
        # BEGIN SOLUTION
        test_metrics = evaluate_language_model(self.model, test_loader, self.device)
        generation_results = {name: self.generate(test_loader, settings)
                              for name, settings in self.config.generation.strategies().items()}
        # END SOLUTION
        write_json(self.expt_root / METRICS_FILE, test_metrics)
        write_json(self.expt_root / GENERATIONS_FILE, generation_results)
        return test_metrics, generation_results

    def generate(self, loader, generation_config: GenerationSettings | dict[str, Any] | None = None
                 ) -> list[dict]:
        """Continue prompts cut from ``loader.dataset`` with one decoding strategy.

        Args:
            loader: its dataset provides ``sample_prompts(num_samples, prompt_length, seed)``.
            generation_config: ``GenerationSettings`` or a mapping of its keys (the rest take their
                defaults; a bad value raises ConfigError); ``method`` is ``greedy``, ``beam``
                (the best of ``beam_width`` beams is kept) or ``sample`` (drawn with a generator
                seeded by ``seed``, so the global RNG is untouched and the result repeatable).

        Returns:
            One dict per prompt: ``prompt``, ``original`` (the full transcript), ``generated`` (the
            continuation after the prompt, cut after the first [EOS]), ``score`` (summed
            log-probability of the generated tokens).
        """
        settings = decoding_settings(generation_config)
        prompts, originals = loader.dataset.sample_prompts(
            settings.num_samples, settings.prompt_length, seed=settings.seed)
        max_length = min(settings.max_length, self.model.max_len)
        generator = generator_for_model(self.model, self.tokenizer, max_length, self.device)
        self.model.eval()
        with torch.no_grad():
            # TODO: seqs (N, T') and scores (N,) from generator.generate_greedy / generate_beam
            #       (keep beam 0, the best) / generate_sample with the settings; then cut each
            #       sequence after its first EOS with SequenceGenerator.post_process_sequence
            # BEGIN SOLUTION
            if settings.method == "greedy":
                seqs, scores = generator.generate_greedy(
                    prompts, temperature=settings.temperature, repeat_penalty=settings.repeat_penalty)
            elif settings.method == "beam":
                seqs, scores = generator.generate_beam(
                    prompts, beam_width=settings.beam_width, temperature=settings.temperature,
                    repeat_penalty=settings.repeat_penalty)
                seqs, scores = seqs[:, 0], scores[:, 0]
            else:
                draws = torch.Generator(device=self.device).manual_seed(settings.seed)
                seqs, scores = generator.generate_sample(
                    prompts, temperature=settings.temperature, top_k=settings.top_k,
                    top_p=settings.top_p, generator=draws)
            sequences = SequenceGenerator.post_process_sequence(seqs, self.tokenizer)
            # END SOLUTION
        prompt_length = prompts.size(1)
        return [{"prompt": self.tokenizer.decode(prompt.tolist(), skip_special_tokens=True),
                 "original": self.tokenizer.decode(original.tolist(), skip_special_tokens=True),
                 "generated": self.tokenizer.decode(sequence[prompt_length:].tolist(),
                                                    skip_special_tokens=True),
                 "score": float(score)}
                for prompt, original, sequence, score in zip(prompts, originals, sequences, scores)]
