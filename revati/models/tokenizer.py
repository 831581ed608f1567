"""Synthetic word-level tokenizer: token i is the word "t{i}", for i < the model's vocab size.

Text made of such words encodes to exactly the ids it names, so a prompt of N tokens is N
words and an engine's random-token benchmark round-trips through decode and encode
unchanged. Special tokens come after the regular vocabulary: vLLM's random dataset samples
ids below `tokenizer.vocab_size` and skips special ids, so they never reach the model.
There is no unknown-word token: text that is not made of "t{i}" words fails to encode,
which makes a prompt the synthetic vocabulary cannot express an error, not a silent guess.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

BOS, EOS = "<|bos|>", "<|eos|>"


def build_tokenizer(vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab_size)}))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # transformers' convert_tokens_to_string (used by engines' detokenisers) needs a
    # decoder; WordPiece without cleanup joins tokens with single spaces, nothing else.
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    # Added special tokens take the ids after the regular vocabulary: vocab_size, +1.
    tok.add_special_tokens([BOS, EOS])
    return tok


CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"


def write_tokenizer(directory: Path, vocab_size: int) -> Path:
    """Write a folder that transformers' AutoTokenizer (and so vLLM/SGLang) loads."""
    directory.mkdir(parents=True, exist_ok=True)
    build_tokenizer(vocab_size).save(str(directory / "tokenizer.json"))
    specials = {"bos_token": BOS, "eos_token": EOS}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1 << 30,
        "clean_up_tokenization_spaces": False,
        # Chat endpoints need a template; the synthetic vocabulary has no roles, so a chat
        # is its messages' words, and a prompt of N words stays N tokens.
        "chat_template": CHAT_TEMPLATE,
        **specials,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (directory / "special_tokens_map.json").write_text(json.dumps(specials, indent=2) + "\n")
    return directory


def prompt_of_length(num_tokens: int, vocab_size: int, seed: int = 0) -> str:
    """A prompt that encodes to exactly num_tokens regular (non-special) tokens."""
    rng = random.Random(seed)
    return " ".join(f"t{rng.randrange(vocab_size)}" for _ in range(num_tokens))
