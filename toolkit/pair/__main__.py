"""python -m toolkit.pair prepare OUT [--recipe NAME] | train PREP OUT [--recipe NAME] | draft PREP TARGET OUT
| sample PREP OUT.jsonl [--n N]

prepare runs on any CPU (the corpus, the tokenizer, the prompts); train on a GPU for the `gpu` recipe (about
ten minutes on one H200: docs/pair.md) or on a CPU for the `test` recipe (seconds). train reads only PREP.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from toolkit.pair import PairError
from toolkit.pair.recipes import RECIPES, recipe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit.pair", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="corpus, tokenizer and prompts into OUT (CPU)")
    p.add_argument("out", type=Path)
    p.add_argument("--recipe", default="gpu", choices=sorted(RECIPES))
    p.add_argument("--code-root", type=Path, help="the Python sources of the code domain (default: this stdlib)")
    t = sub.add_parser("train", help="target, the target's answers, EAGLE-3 drafter, acceptance check")
    t.add_argument("prep", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--recipe", default=None, help="default: the recipe PREP was made with")
    t.add_argument("--device", default=None, help="default: cuda when there is one")
    d = sub.add_parser("draft", help="a new drafter (answers, EAGLE-3, acceptance) for a trained target folder")
    d.add_argument("prep", type=Path)
    d.add_argument("target", type=Path)
    d.add_argument("out", type=Path)
    d.add_argument("--recipe", default="gpu", choices=sorted(RECIPES))
    d.add_argument("--device", default=None)
    n = sub.add_parser("pin", help="the `weights:` lines of an Environment for these folders (absolute paths)")
    n.add_argument("folders", type=Path, nargs="+")
    sm = sub.add_parser("sample", help="the drafter's training prompts of PREP as a training-data file "
                        "(JSON lines) for representativeness: toolkit/pair/sample.py")
    sm.add_argument("prep", type=Path)
    sm.add_argument("out", type=Path)
    sm.add_argument("--n", type=int, default=None, help="the first N prompts of each domain (default: all)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "pin":
            from toolkit.fsutil import folder_digest

            print("weights:")
            for folder in args.folders:
                if not folder.exists():
                    raise OSError(f"{folder}: no such folder")
                print(f"  {folder.absolute()}: {folder_digest(folder)}")
        elif args.cmd == "sample":
            from toolkit.pair.sample import write_sample

            print(f"wrote {write_sample(args.prep, args.out, args.n)} prompts to {args.out}")
        elif args.cmd == "prepare":
            from toolkit.pair.prepare import prepare

            prepare(args.out, recipe(args.recipe), args.code_root)
        elif args.cmd == "draft":
            from toolkit.pair.train import retrain_drafter

            retrain_drafter(args.prep, args.target, args.out, recipe(args.recipe), device=args.device)
        else:
            from toolkit.pair.train import train

            from toolkit.pair.records import PrepManifest

            name = args.recipe or PrepManifest.read(args.prep).recipe["name"]
            train(args.prep, args.out, recipe(name), device=args.device)
    except (KeyError, OSError, PairError) as e:
        print(f"toolkit.pair: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
