"""Materialised model folders: config files and the synthetic tokenizer."""

import json

import pytest
from tokenizers import Tokenizer

from revati.models.__main__ import main
from revati.models.catalog import load_model
from revati.models.folder import materialise
from revati.models.tokenizer import prompt_of_length


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    return materialise("llama8b", tmp_path_factory.mktemp("models"))


def test_config_files_carry_the_catalog_fields(llama8b):
    config = json.loads((llama8b.model_dir / "config.json").read_text())
    assert config == load_model("llama3_8b").config
    assert config["model_type"] == "llama" and config["vocab_size"] == 128256
    generation = json.loads((llama8b.model_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [128001, 128008, 128009]
    assert llama8b.model_dir.name == "llama3_8b"


def test_tokenizer_folder_has_no_model_config(llama8b):
    # transformers would pick a tokenizer class from a config.json's model_type.
    assert not (llama8b.tokenizer_dir / "config.json").exists()
    tok_cfg = json.loads((llama8b.tokenizer_dir / "tokenizer_config.json").read_text())
    assert tok_cfg["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_tokenizer_vocabulary_is_exact(llama8b):
    tok = Tokenizer.from_file(str(llama8b.tokenizer_dir / "tokenizer.json"))
    assert tok.get_vocab_size(with_added_tokens=False) == 128256
    assert tok.encode("t5 t77").ids == [5, 77]
    assert tok.encode("t128255").ids == [128255]
    assert tok.decode([5, 77]) == "t5 t77"
    # Special tokens come right after the regular vocabulary.
    assert tok.token_to_id("<|bos|>") == 128256 and tok.token_to_id("<|eos|>") == 128257


def test_prompt_of_exact_token_count(llama8b):
    tok = Tokenizer.from_file(str(llama8b.tokenizer_dir / "tokenizer.json"))
    for n in (1, 17, 1000):
        ids = tok.encode(prompt_of_length(n, 128256, seed=n)).ids
        assert len(ids) == n and max(ids) < 128256


def test_words_outside_the_vocabulary_fail_to_encode(llama8b):
    tok = Tokenizer.from_file(str(llama8b.tokenizer_dir / "tokenizer.json"))
    with pytest.raises(Exception, match="UNK"):
        tok.encode("hello")


def test_rematerialising_keeps_the_folder(llama8b):
    before = (llama8b.tokenizer_dir / "tokenizer.json").stat().st_mtime_ns
    again = materialise("llama3_8b", llama8b.model_dir.parent)
    assert again == llama8b
    assert (llama8b.tokenizer_dir / "tokenizer.json").stat().st_mtime_ns == before


def test_cli_materialises_and_rejects_unknown(tmp_path, capsys):
    assert main(["qwen7b", str(tmp_path)]) == 0
    assert (tmp_path / "qwen2_5_7b" / "tokenizer" / "tokenizer.json").is_file()
    with pytest.raises(SystemExit):
        main(["nosuchmodel", str(tmp_path)])
    assert "unknown model 'nosuchmodel'" in capsys.readouterr().err


def test_transformers_loads_the_folder_as_engines_do(llama8b):
    # vLLM and SGLang load configs and tokenizers through transformers; skipped where it
    # is not installed (it is not a revati dependency).
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.from_pretrained(llama8b.model_dir)
    tok = transformers.AutoTokenizer.from_pretrained(llama8b.tokenizer_dir)
    assert config.vocab_size == tok.vocab_size == 128256
    assert tok.all_special_ids == [128256, 128257]
    # vLLM's random dataset decodes sampled ids and re-encodes the text.
    ids = [3, 128255, 0, 77]
    assert tok(tok.decode(ids)).input_ids == ids
