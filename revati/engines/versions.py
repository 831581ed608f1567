"""Engine releases as a choice (issue #29): `vllm` is the pinned release, `vllm==0.33.0`
another one. Each release is a lock file in requirements/ (`vllm.lock` the pinned one,
`vllm-0.33.0.lock` the others: a pip freeze of a venv made with `pip install vllm==0.33.0`)
and runs from a venv of its own under $REVATI_VENV_DIR (default ~/.cache/revati), named by
the engine and a hash of the lock and the Python version, so every checkout and fresh clone
reuses it while both are unchanged. scripts/install.sh makes the pinned vLLM's venv (linked
as .venv-vllm: the default sweep's engine); every other release's venv, the pinned SGLang's
included, is made the first time a command asks for it.

    python -m revati.engines.versions venv LOCK NAME   # make or reuse; print its folder

Standard library only (as are the engine modules it names): scripts/install.sh runs it
before any venv exists.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from revati.engines import ENGINES

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements"
MARK = ".revati-lock"  # in a finished venv: the hash it was made for


class EngineVersionError(ValueError):
    """An engine release that Revati has no lock file for."""


def venv_root() -> Path:
    return Path(os.environ.get("REVATI_VENV_DIR") or Path.home() / ".cache" / "revati")


def split(spec: str) -> tuple[str, str | None]:
    """'vllm==0.33.0' -> ('vllm', '0.33.0'); 'vllm' -> ('vllm', None): the pinned release."""
    name, sep, version = spec.partition("==")
    return name.strip(), (version.strip() or None) if sep else None


def lock_of(name: str, version: str | None) -> Path:
    """The lock file of a release; the pinned one when version is None or the pinned one's."""
    pinned = REQUIREMENTS / f"{name}.lock"
    if version is None or version == pinned_version(name):
        return pinned
    return REQUIREMENTS / f"{name}-{version}.lock"


def pinned_version(name: str) -> str | None:
    lock = REQUIREMENTS / f"{name}.lock"
    if not lock.is_file():
        return None
    found = re.search(rf"(?m)^{re.escape(name)}==(\S+)$", lock.read_text())
    return found.group(1) if found else None


def releases(name: str) -> list[str]:
    """Every release of the engine that has a lock file, the pinned one first."""
    others = sorted((p.name[len(name) + 1:-len(".lock")]
                     for p in REQUIREMENTS.glob(f"{name}-*.lock")),
                    key=lambda v: [int(x) if x.isdigit() else x for x in re.split(r"[.]", v)])
    pinned = pinned_version(name)
    return ([pinned] if pinned else []) + [v for v in others if v != pinned]


def check(spec: str) -> tuple[str, str | None]:
    """The engine and release of --engine NAME[==VERSION], or a one-line error."""
    name, version = split(spec)
    if name not in ENGINES:
        raise EngineVersionError(f"unknown engine {name!r} (known: {', '.join(ENGINES)})")
    if version is not None and not lock_of(name, version).is_file():
        raise EngineVersionError(
            f"no lock file for {name}=={version} (known releases: "
            f"{', '.join(releases(name))}; add requirements/{name}-{version}.lock, a pip "
            f"freeze of a venv made with `pip install {name}=={version}`)")
    return name, version


def venv_dir(lock: Path, name: str) -> Path:
    """Where the venv of a lock file lives: NAME-<hash of the lock and the Python version>."""
    digest = hashlib.sha256(lock.read_bytes() + (sys.version + "\n").encode()).hexdigest()
    return venv_root() / f"{name}-{digest[:16]}"


def is_made(venv: Path) -> bool:
    mark = venv / MARK
    return mark.is_file() and venv.name.endswith("-" + mark.read_text().strip())


def make_venv(lock: Path, name: str, log=print) -> Path:
    """The venv of `lock`, made first if it is not there (several GB of CUDA libraries:
    minutes), with a line before and after and pip's output in <venv>.log beside it; its
    folder. Raises subprocess.CalledProcessError when a step fails."""
    venv = venv_dir(lock, name)
    if is_made(venv):
        return venv
    packages = sum(1 for line in lock.read_text().splitlines() if "==" in line)
    log(f"[revati] making {venv} from {lock.name}: {packages} packages, several GB (minutes, "
        "once; reused after)")
    shutil.rmtree(venv, ignore_errors=True)  # a venv whose making stopped half-way
    venv.parent.mkdir(parents=True, exist_ok=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    steps = ([sys.executable, "-m", "venv", str(venv)], [*pip, "--upgrade", "pip"],
             [*pip, "--no-deps", "-r", str(lock)])
    with (venv.parent / f"{venv.name}.log").open("w") as out:  # pip's output, kept apart
        for step in steps:
            subprocess.run(step, check=True, stdout=out, stderr=subprocess.STDOUT)
    (venv / MARK).write_text(venv.name.rsplit("-", 1)[1] + "\n")
    log(f"[revati] made {venv}")
    return venv


def is_pinned(name: str, version: str | None) -> bool:
    return lock_of(name, version).name == f"{name}.lock"


def engine_python(name: str, version: str | None, log=print) -> Path:
    """The interpreter of a release (check()'s result), its venv made on first use."""
    return make_venv(lock_of(name, version), name, log) / "bin" / "python"


def summary() -> str:
    """Every release with a lock file, the pinned ones marked, and which have their venv
    (`revati doctor`)."""
    made, later = [], []
    for name in ENGINES:
        for version in releases(name):
            label = f"{name}=={version}" + (" (pinned)" if version == pinned_version(name) else "")
            (made if is_made(venv_dir(lock_of(name, version), name)) else later).append(label)
    return (f"installed: {', '.join(made) or 'none'}"
            + (f"; made on first use: {', '.join(later)}" if later else ""))


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "venv":
        print(__doc__, file=sys.stderr)
        return 2
    # progress to stderr: stdout carries the folder to the calling script
    print(make_venv(Path(argv[1]), argv[2], log=lambda m: print(m, file=sys.stderr)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
