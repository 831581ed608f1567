"""`revati predictor`: train duration models from a hardware profile and report their accuracy.

    revati predictor train --profile DIR [--out DIR]   one LightGBM model per kernel family
    revati predictor report --hardware h200            per family: samples, held-out MAPE,
                                                       p90 abs % error, share of GPU time
    revati predictor e2e --hardware h200_sxm           the profile's e2e forwards on an
                                                       emulated GPU against the measured ones
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from revati.device.spec import UnknownHardwareError, gpu_family


def _train(args: argparse.Namespace) -> int:
    from revati.predict import registry, report, train

    out = args.out or registry.MODELS / Path(args.profile).resolve().name
    result = train.train(args.profile, out, folds=args.folds, seed=args.seed,
                         repeats=args.repeats)
    print(report.render(result))
    print(f"\nmodels -> {out}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from revati.predict import registry, report

    models = args.models or registry.models_dir(gpu_family(args.hardware))
    print(report.render(report.load(Path(models))))
    return 0


def _e2e(args: argparse.Namespace) -> int:
    import json

    from revati.predict import emulated_e2e, registry
    from revati.profile.e2e import ARCHS

    profile = args.profile or registry.profile_dir(gpu_family(args.hardware))
    result = emulated_e2e.compare(profile, emulated_e2e.run_emulated(args.hardware,
                                                                     args.arch or list(ARCHS)))
    print(emulated_e2e.render(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


def _one_line_errors(command):
    """The command, ending with one line for a hardware name or data folder that is not
    there (no traceback for input errors)."""
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except (UnknownHardwareError, FileNotFoundError) as e:
            print(f"revati predictor: {e}", file=sys.stderr)
            return 1
    return run


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
    train.add_argument("--repeats", type=int, default=3,
                       help="fold draws the held-out errors are averaged over")
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(func=_train)
    rep = sub.add_parser("report", help="print the accuracy of a hardware's models")
    rep.add_argument("--hardware", default="h200")
    rep.add_argument("--models", type=Path, default=None, help="a models folder instead")
    rep.set_defaults(func=_one_line_errors(_report))
    e2e = sub.add_parser("e2e", help="the profile's e2e forwards, emulated vs measured")
    e2e.add_argument("--hardware", default="h200_sxm", help="the emulated GPU")
    e2e.add_argument("--profile", type=Path, default=None,
                     help="profile holding the measured e2e_<arch>.json (default: the "
                          "package's for this GPU)")
    e2e.add_argument("--arch", nargs="+", default=None, help="architectures (default: all)")
    e2e.add_argument("--out", type=Path, default=None, help="also write the result as JSON")
    e2e.set_defaults(func=_one_line_errors(_e2e))
