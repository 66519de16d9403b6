"""H4Tokenizer: text <-> token ids, backed by a Hugging Face ``tokenizers`` JSON file.

Four tokenizers ship with the homework (built by ``make tokenizers``: datagen/build_tokenizers.py):

========== ============================== =====================================================
token_type file                           model
========== ============================== =====================================================
``char``   tokenizer_char.json            one id per character (A-Z, apostrophe, space, ...)
``1k``     tokenizer_1000.json            byte-level BPE, 1000 ids in total
``5k``     tokenizer_5000.json            byte-level BPE, 5000 ids in total
``10k``    tokenizer_10000.json           byte-level BPE, 10000 ids in total
========== ============================== =====================================================

All four give the special tokens the same ids: ``[PAD]=0 [UNK]=1 [MASK]=2 [SOS]=3 [EOS]=4
[BLANK]=5``. ``[MASK]`` and ``[BLANK]`` are unused in hw4p1; they keep the vocabulary shared with
hw4p2 (speech recognition), where ``[BLANK]`` is the CTC blank.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from tokenizers import Tokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[MASK]", "[SOS]", "[EOS]", "[BLANK]")
TOKENIZER_DIR = Path(__file__).resolve().parent / "tokenizer_jsons"
# token_type -> (file name, exact vocabulary size the builder must reach; None = set by the data).
TOKENIZER_FILES = {
    "char": ("tokenizer_char.json", None),
    "1k": ("tokenizer_1000.json", 1000),
    "5k": ("tokenizer_5000.json", 5000),
    "10k": ("tokenizer_10000.json", 10000),
}
DEFAULT_TOKEN_MAP = {kind: str(TOKENIZER_DIR / name) for kind, (name, _) in TOKENIZER_FILES.items()}
# The self-check text uses only characters every tokenizer represents (A-Z, apostrophe, space).
VALIDATION_TEXT = "HE SAID IT'S A QUICK BROWN FOX  JUMPING OVER THE LAZY DOG"
_REPO_ROOT = Path(__file__).resolve().parents[2]


def resolve_repo_path(path: str | Path) -> Path:
    """Return ``path`` as given if it exists, else relative to the repository root.

    Configs store paths like ``hw4lib/data/tokenizer_jsons/tokenizer_1000.json`` or
    ``hw4_data/hw4p1_data`` relative to the repository root; this lets them work from any working
    directory (a notebook in a subfolder, the autograder).
    """
    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    from_root = _REPO_ROOT / path
    return from_root if from_root.exists() else path


class H4Tokenizer:
    """Tokenize, encode and decode transcripts with one of the four homework tokenizers.

    Args:
        token_map: {token_type: path to a tokenizers JSON}, e.g.
            ``config.tokenization.token_map``.
        token_type: one of ``'char'``, ``'1k'``, ``'5k'``, ``'10k'``.
        validate: run a quick round-trip self-check (``decode(encode(text)) == text``) on load.

    Attributes:
        vocab_size: number of ids, special tokens included (the model's ``num_classes``).
        pad_id, unk_id, mask_id, sos_id, eos_id, blank_id: ids of the special tokens.
    """

    def __init__(self, token_map: dict, token_type: str, validate: bool = True):
        if token_type not in TOKENIZER_FILES:
            raise ValueError(
                f"Unknown token_type {token_type!r}; choose one of {list(TOKENIZER_FILES)}"
            )
        if token_type not in token_map:
            raise ValueError(
                f"token_map has no entry for token_type {token_type!r} (it has {list(token_map)}); "
                f"add '{token_type}: <path to {TOKENIZER_FILES[token_type][0]}>' to the config"
            )
        self.token_type = token_type
        self.path = resolve_repo_path(token_map[token_type])
        if not self.path.is_file():
            raise FileNotFoundError(
                f"Tokenizer file for token_type {token_type!r} not found: {self.path}. "
                "Run `make tokenizers` to rebuild the tokenizers from the training data."
            )
        try:
            self.tokenizer = Tokenizer.from_file(str(self.path))
        except Exception as error:  # the Rust library raises a bare Exception on bad JSON
            raise ValueError(
                f"{self.path} is not a valid tokenizers JSON ({error}); "
                "run `make tokenizers` to rebuild it"
            ) from error

        self.vocab_size = self.tokenizer.get_vocab_size()
        special_ids = {}
        for token in SPECIAL_TOKENS:
            token_id = self.tokenizer.token_to_id(token)
            if token_id is None:
                raise ValueError(
                    f"{self.path} lacks the special token {token}; rebuild it with `make tokenizers`"
                )
            special_ids[token] = token_id
        self.pad_id = special_ids["[PAD]"]
        self.unk_id = special_ids["[UNK]"]
        self.mask_id = special_ids["[MASK]"]
        self.sos_id = special_ids["[SOS]"]
        self.eos_id = special_ids["[EOS]"]
        self.blank_id = special_ids["[BLANK]"]
        self.special_ids = frozenset(special_ids.values())

        if validate:
            self._self_check()

    def tokenize(self, text: str) -> list[str]:
        """Split ``text`` into token strings.

        Byte-level BPE tokens show a space as ``Ġ`` (the byte-to-character map of GPT-2), e.g.
        ``"HI THERE"`` -> ``['HI', 'ĠTHERE']``.
        """
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no [SOS]/[EOS] are added (the dataset adds them)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``[encode(t) for t in texts]`` in one call of the Rust library (much faster)."""
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (a list, 1-d tensor or 1-d array of ints).

        Special tokens appear as ``[SOS]``, ``[EOS]``, ... unless ``skip_special_tokens``.
        """
        return self.tokenizer.decode(_as_int_list(ids), skip_special_tokens=skip_special_tokens)

    def get_avg_chars_per_token(self, ids: Iterable[int]) -> float:
        """Characters per token of ``ids``, special tokens left out of both counts.

        Raises ValueError when ``ids`` holds no ordinary token.
        """
        content = [i for i in _as_int_list(ids) if i not in self.special_ids]
        if not content:
            raise ValueError("get_avg_chars_per_token needs at least one non-special token id")
        return len(self.decode(content, skip_special_tokens=True)) / len(content)

    def _self_check(self) -> None:
        ids = self.encode(VALIDATION_TEXT)
        decoded = self.decode(ids)
        if decoded != VALIDATION_TEXT or self.unk_id in ids:
            raise ValueError(
                f"Tokenizer {self.path} failed its round-trip self-check: {VALIDATION_TEXT!r} "
                f"decoded to {decoded!r}; rebuild it with `make tokenizers`"
            )

    def __repr__(self) -> str:
        return (f"H4Tokenizer(token_type={self.token_type!r}, vocab_size={self.vocab_size}, "
                f"path='{self.path}')")


def _as_int_list(ids: Iterable[int]) -> list[int]:
    """Plain Python ints from a list, tuple, tensor or numpy array (what the Rust side accepts)."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    try:
        return [int(i) for i in ids]
    except TypeError as error:
        raise ValueError(
            f"expected a 1-d sequence of token ids, got a {type(ids).__name__} of nested values"
        ) from error
