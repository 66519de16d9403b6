# hw4p1: instructor-only
"""The library reads the validated config by attribute (``config.training.epochs``), never by
string key, so each setting is checked once, in hw4lib/config.py, and a misspelt name fails where
it is written; and every generation setting ``LMTrainer.generate`` reads is given its own value by
the trainer's tests, so a search that gets one key for another, or a default, fails there. Read
from the source; the library is not run."""
import ast
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
CONFIG_NAMES = ("config", "settings", "section", "training", "generation")
# Plain dicts by contract: the grader's check of a handed-in config (validate_untrusted) and what
# reads it, and LMDataset's mapping (the interface contract's LMDataset(partition, config, tokenizer)).
PLAIN_DICTS = {"hw4lib/config.py", "hw4lib/handin.py", "hw4lib/handin_format.py",
               "hw4lib/model/state_dict_contract.py", "hw4lib/data/lm_dataset.py",
               "hw4lib/data/_checks.py"}


def _base_name(node: ast.expr) -> str:
    """The name a lookup is made on: ``config`` for ``config[...]``, ``generation`` for
    ``self.config.generation[...]``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def string_key_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) of each ``name["key"]`` or ``name.get("key")`` on a config-like name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            name = _base_name(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
            name = _base_name(node.func.value)
        else:
            continue
        if any(word in name for word in CONFIG_NAMES):
            found.append((node.lineno, name))
    return found


def test_the_detector_finds_string_key_reads():
    planted = ('epochs = config["training"]["epochs"]\nseed = self.config.generation.get("seed")\n'
               'top_k = settings["top_k"]\nrows = batch["input"]\nlr = config.optimizer.lr\n')
    assert sorted(string_key_reads(planted)) == [(1, "config"), (1, "config"), (2, "generation"),
                                                 (3, "settings")], string_key_reads(planted)


def test_the_library_reads_the_config_by_attribute():
    offenders = []
    for path in sorted((REPO / "hw4lib").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative not in PLAIN_DICTS:
            offenders += [f"{relative}:{line} reads {name}[...] by string key"
                          for line, name in string_key_reads(path.read_text(encoding="utf-8"))]
    assert not offenders, ("read the validated Config by attribute (config.training.epochs), so "
                           "hw4lib/config.py stays the one place a setting is checked:\n  "
                           + "\n  ".join(offenders))


def attribute_reads(source: str, owner: str) -> set[str]:
    """Names X read as ``owner.X`` (``settings.top_k``; ``self.config.training.X`` for owner
    ``training``)."""
    return {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and _base_name(node.value) == owner}


def test_the_trainer_tests_give_each_generation_setting_its_own_value():
    from hw4lib.config import Generation, GenerationSettings
    from tests.test_lm_trainer import GENERATION

    source = (REPO / "hw4lib" / "trainers" / "lm_trainer.py").read_text(encoding="utf-8")
    read = attribute_reads(source, "settings") & set(GenerationSettings.model_fields)
    assert {"method", "temperature", "beam_width", "top_p"} <= read, f"the detector found only {read}"
    generation = Generation.model_validate(GENERATION)
    strategies = generation.strategies()
    assert any(settings.method != name for name, settings in strategies.items()), (
        "name a strategy apart from its method in test_lm_trainer's GENERATION, so results keyed "
        "by method fail")
    for key in sorted(read - {"method"}):
        default = GenerationSettings.model_fields[key].default
        assert any(getattr(settings, key) != default for settings in strategies.values()), (
            f"LMTrainer.generate reads settings.{key}, but test_lm_trainer's GENERATION leaves it "
            f"at its default {default!r} in every strategy: give it a value of its own")
    for name, settings in strategies.items():
        stated = set(settings.model_fields_set) | set(generation.model_fields_set)
        values = {key: getattr(settings, key) for key in stated & read - {"method"}}
        same = {key: value for key, value in values.items()
                if list(values.values()).count(value) > 1}
        assert not same, (f"strategy {name!r} of test_lm_trainer's GENERATION gives several keys "
                          f"one value, so one read for another passes: {same}")
