"""`revati predictor`: train duration models from a hardware profile and report their accuracy.

    revati predictor train --profile DIR [--out DIR]   one LightGBM model per kernel family
    revati predictor report --hardware h200            per family: samples, held-out MAPE,
                                                       p90 abs % error, share of GPU time
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _train(args: argparse.Namespace) -> int:
    from revati.predict import registry, report, train

    out = args.out or registry.MODELS / Path(args.profile).resolve().name
    result = train.train(args.profile, out, folds=args.folds, seed=args.seed)
    print(report.render(result))
    print(f"\nmodels -> {out}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from revati.predict import registry, report

    models = args.models or registry.models_dir(args.hardware)
    print(report.render(report.load(Path(models))))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("predictor", help="train and report duration models",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="predictor_command", required=True)
    train = sub.add_parser("train", help="fit one model per kernel family")
    train.add_argument("--profile", required=True, type=Path, help="hardware profile folder")
    train.add_argument("--out", type=Path, default=None,
                       help="models folder (default: the package's, named like the profile)")
    train.add_argument("--folds", type=int, default=5, help="grouped cross-validation folds")
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(func=_train)
    rep = sub.add_parser("report", help="print the accuracy of a hardware's models")
    rep.add_argument("--hardware", default="h200")
    rep.add_argument("--models", type=Path, default=None, help="a models folder instead")
    rep.set_defaults(func=_report)
