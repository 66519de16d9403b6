"""The training metrics the trainer logs, read by value against an independent evaluation.

With a learning rate of 0 the weights never move, so the training pass's summed loss must equal
the evaluation of the same model on the training loader, whatever the accumulation window.
"""
import contextlib
import io

import pytest
import torch

from hw4lib.trainers.metrics import evaluate_language_model
from tests.library.small_trainer import TRAIN_TEXTS, small_trainer


@pytest.mark.parametrize("accumulation", [1, 2, 3])
def test_training_metrics_equal_an_evaluation_of_the_unchanged_model(tmp_path, accumulation):
    trainer, (train_loader, _) = small_trainer(tmp_path, TRAIN_TEXTS,
                                          gradient_accumulation_steps=accumulation)
    trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.0)
    truth = evaluate_language_model(trainer.model, train_loader, "cpu")
    metrics, _ = trainer._train_epoch(train_loader)
    for key in ("ce_loss_token", "ce_loss_char"):
        assert metrics[key] == pytest.approx(truth[key], rel=1e-5), (
            f"with gradient_accumulation_steps={accumulation} the training {key} is {metrics[key]:.5f}, "
            f"but the unchanged model scores {truth[key]:.5f} on the same batches: the logged loss "
            "must be each batch's own loss, not the loss scaled for the backward")
    assert (metrics["num_tokens"], metrics["num_chars"]) == (truth["num_tokens"], truth["num_chars"])


def test_a_nan_training_loss_is_stopped_by_the_training_pass_itself(tmp_path):
    """The training pass names its own batches; validation (which would also see NaN weights) is
    never reached."""
    from hw4lib.trainers._checks import NonFiniteLossError

    trainer, loaders = small_trainer(tmp_path, TRAIN_TEXTS)
    criterion = trainer.criterion
    trainer.criterion = lambda logits, golden: criterion(logits, golden) * float("nan")
    validated = []
    trainer._validate_epoch = lambda loader: validated.append(loader) or {"ce_loss_char": 1.0}
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(NonFiniteLossError) as raised:
        trainer.train(*loaders, epochs=1)
    assert "training batches" in str(raised.value), str(raised.value)
    assert not validated, "validation ran although the training pass's loss was NaN"
