"""`dlconform report`: one Markdown bug report per finding of a results.json."""
import argparse
import json
import os
import sys

from .. import REPO_DIR
from . import markdown

DEFAULT_RESULTS = os.path.join(REPO_DIR, "reports", "out", "results.json")


def build_parser():
    p = argparse.ArgumentParser(prog="dlconform report", description=(
        "Write one Markdown bug report per finding (fail, warn, crash, timeout) of a results.json into "
        "OUT_DIR: versions, the clause and its source, expected and actual behaviour, and a reproducer that "
        "needs only the library, Python and ctypes."))
    p.add_argument("out_dir", metavar="OUT_DIR", help="folder the reports go to")
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="FILE",
                   help="results.json of a run (default: reports/out/results.json)")
    p.add_argument("--target", metavar="T", help="the findings of this target (as in results.json)")
    p.add_argument("--clause", metavar="C", help="the findings on this clause (a glob: 'LAY-*')")
    p.add_argument("--all-findings", action="store_true", help="every finding (of --target, if given)")
    p.add_argument("-q", "--quiet", action="store_true", help="no list of the files written")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.all_findings and not (args.target and args.clause):
        parser.error("name a finding with --target T --clause C, or give --all-findings")
    try:
        with open(args.results, encoding="utf-8") as f:
            results = json.load(f)
    except (OSError, ValueError) as e:
        print("dlconform report: cannot read %s: %s" % (args.results, e), file=sys.stderr)
        return 2
    paths = markdown.write(results, args.out_dir, args.target, args.clause)
    if not args.quiet:
        for path in paths:
            print(path)
    print("dlconform report: %d report(s) in %s" % (len(paths), args.out_dir), file=sys.stderr)
    return 0 if paths else 1
