"""What summary.json records as the settings an engine ran with."""

from __future__ import annotations

from revati.engines import settings, sglang, vllm


def test_a_users_engine_variables_are_recorded_with_revatis() -> None:
    env = {"PATH": "/bin", "VLLM_USE_V2_MODEL_RUNNER": "0", "SGLANG_ENABLE_TORCH_COMPILE": "1",
           "HF_HUB_OFFLINE": "1", "REVATI_SHM": "/dev/shm/x"}
    assert settings(vllm, env) == {"HF_HUB_OFFLINE": "1", "VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert settings(sglang, env) == {"HF_HUB_OFFLINE": "1", "SGLANG_ENABLE_TORCH_COMPILE": "1"}
