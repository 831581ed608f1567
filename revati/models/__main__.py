"""`python -m revati.models NAME DIR`: materialise a catalog model under DIR, print its paths."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from revati.models.catalog import UnknownModelError, list_models
from revati.models.folder import materialise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m revati.models", description=__doc__)
    parser.add_argument("name", help=f"one of: {', '.join(list_models(aliases=True))}")
    parser.add_argument("root", type=Path, help="folder to write ROOT/<name>/ into")
    args = parser.parse_args(argv)
    try:
        folder = materialise(args.name, args.root)
    except UnknownModelError as exc:
        parser.error(str(exc))
    print(f"model={folder.model_dir} tokenizer={folder.tokenizer_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
