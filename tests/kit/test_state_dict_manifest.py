# hw4p1: instructor-only
"""The state-dict manifest students and the grader check against is the reference model's own."""
import json

from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.state_dict_contract import (MANIFEST_FILE, count_elements, expected_entries,
                                              problems)
from tools import state_dict_manifest


def test_committed_manifest_is_the_derivation_of_the_reference_model():
    assert not state_dict_manifest.stale(), (
        f"{MANIFEST_FILE} differs from the reference model: run python -m tools.state_dict_manifest")


def test_manifest_gives_the_reference_state_dict_at_configs_it_was_not_derived_from():
    for config in ({"num_layers": 1, "d_model": 8, "num_heads": 1, "d_ff": 8, "max_len": 3},
                   {"num_layers": 4, "d_model": 6, "num_heads": 3, "d_ff": 18, "max_len": 6,
                    "weight_tying": True}):
        model = DecoderOnlyTransformer(**config, dropout=0.0, num_classes=6)
        shapes = {key: value.shape for key, value in model.state_dict().items()}
        assert problems(shapes, expected_entries(config, 6)) == [], config


def test_parameter_count_of_the_manifest_matches_the_built_model():
    """The grader's size check counts from the manifest; a tied weight counts once."""
    config = {"num_layers": 2, "d_model": 16, "num_heads": 2, "d_ff": 32, "max_len": 20}
    for tied in (False, True):
        model = DecoderOnlyTransformer(**config, dropout=0.0, num_classes=37, weight_tying=tied)
        expected = (sum(p.numel() for p in model.parameters()),
                    sum(b.numel() for b in model.buffers()))
        got = count_elements({**config, "weight_tying": tied}, 37)
        assert got == expected, f"tied={tied}: expected {expected}, got {got}"


def test_a_changed_model_makes_the_manifest_stale(tmp_path, monkeypatch):
    manifest = json.loads(MANIFEST_FILE.read_text())
    manifest["entries"] = [e for e in manifest["entries"] if e["key"] != "final_linear.bias"]
    edited = tmp_path / "manifest.json"
    edited.write_text(json.dumps(manifest))
    monkeypatch.setattr(state_dict_manifest, "MANIFEST_FILE", edited)
    assert state_dict_manifest.stale(), "a manifest without final_linear.bias must read as stale"
