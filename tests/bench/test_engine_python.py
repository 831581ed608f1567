"""Which interpreter runs an engine release (revati.bench.server.find_python): scripts/install.sh
makes only the pinned vLLM's venv (.venv-vllm); the pinned SGLang and every other release run
from a venv made from their lock on first use, which a fresh clone finds by the lock's hash."""

import sys
from pathlib import Path

import pytest

from revati.bench import server
from revati.bench.errors import BenchError
from revati.engines import ENGINES, versions


def made_venv(name: str, version: str | None) -> Path:
    """A venv as versions.make_venv leaves it (its interpreter, the mark of its lock)."""
    venv = versions.venv_dir(versions.lock_of(name, version), name)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / versions.MARK).write_text(venv.name.rsplit("-", 1)[1] + "\n")
    return venv


def test_a_clone_without_an_sglang_link_runs_the_venv_of_sglangs_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("REVATI_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.delenv("REVATI_SGLANG_PYTHON", raising=False)
    monkeypatch.setattr(server, "REPO", tmp_path / "clone")  # install.sh linked no .venv-sglang
    # the interpreter stands in for one that has SGLang: what is checked here is the choice
    monkeypatch.setattr(ENGINES["sglang"], "has_engine", lambda python: True)
    venv = made_venv("sglang", None)
    assert server.find_python("sglang") == venv / "bin" / "python"
    # a checkout's link, then an interpreter given on the command line, come first
    link = tmp_path / "clone" / ".venv-sglang" / "bin"
    link.mkdir(parents=True)
    (link / "python").symlink_to(sys.executable)
    assert server.find_python("sglang") == link / "python"
    assert server.find_python("sglang", Path(sys.executable)) == Path(sys.executable)
    with pytest.raises(BenchError, match="no such file"):
        server.find_python("sglang", tmp_path / "nowhere" / "python")


def test_another_release_never_runs_the_pinned_link(tmp_path, monkeypatch):
    newest = versions.releases("sglang")[-1]
    if versions.is_pinned("sglang", newest):
        pytest.skip("no SGLang release beside the pinned one has a lock file")
    monkeypatch.setenv("REVATI_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setenv("REVATI_SGLANG_PYTHON", sys.executable)  # the pinned one's
    monkeypatch.setattr(ENGINES["sglang"], "has_engine", lambda python: True)
    venv = made_venv("sglang", newest)
    assert server.find_python(f"sglang=={newest}") == venv / "bin" / "python"
