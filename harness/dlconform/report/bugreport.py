"""`dlconform report`: one Markdown bug report per finding of a results.json, ready to file upstream.

A finding is the non-pass records (fail, warn, crash, timeout) of one test on one clause of
one target. Its report has a title; the versions (library, Python, OS, dlpack header); the
clause with its requirement and where the spec writes it (suites/clauses.json); expected and
actual behaviour; and the finding's reproducer made to stand alone (dlconform.repro.standalone:
the check's own code, with the dlconform modules it uses embedded), which needs only the
library, Python and ctypes; where it cannot stand alone, dlconform's reproducer and why.

nanobind is a C++ binding library: what is under test is an extension built with it, here the
glue dlconform builds (probes/nanobind/module.cpp, one page of C++ that only passes values to
nanobind). Its report carries the glue's source and the lines that build it beside the script,
which loads it from there.
"""
import argparse
import fnmatch
import json
import os
import re
import sys

from .. import REPO_DIR
from .. import catalogue as _catalogue
from .. import repro as _repro

#: the verdicts a report is written for
FINDINGS = ("fail", "warn", "crash", "timeout")
_WHAT = {"fail": "a breach of a MUST", "warn": "a departure from a SHOULD, or unspecified behaviour",
         "crash": "the process died", "timeout": "the check did not finish in time"}


class Finding:
    """The records of one (target, clause, test) whose verdict is a finding."""

    def __init__(self, records):
        first = records[0]
        self.target, self.clause, self.test = first["target"], first["clause"], first["test"]
        self.records = records
        self.verdict = max((r["verdict"] for r in records), key=FINDINGS.index)
        self.repro = next((r["repro"] for r in records if r.get("repro")), "")

    @property
    def name(self):
        return re.sub(r"[^A-Za-z0-9._-]+", "_", "%s-%s-%s" % (self.target, self.clause,
                                                              self.test.split("::")[-1]))[:150]


def findings(results, target=None, clause=None):
    """The findings of results.json's records, in file order; `target` and `clause` select
    (a clause may be a glob, e.g. 'LAY-*')."""
    groups = {}
    for r in results["results"]:
        if r["verdict"] not in FINDINGS:
            continue
        if target is not None and r["target"] != target:
            continue
        if clause is not None and not fnmatch.fnmatchcase(r["clause"], clause):
            continue
        groups.setdefault((r["target"], r["clause"], r["test"]), []).append(r)
    return [Finding(recs) for recs in groups.values()]


class BadResults(Exception):
    """A results file that cannot be read, or is not a results.json of dlconform run: one line."""


def read_findings(path, target=None, clause=None):
    """(results.json's document, its findings as findings() selects them), or BadResults
    saying why not (a file that cannot be read, not JSON, records missing a field)."""
    try:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
    except OSError as e:
        raise BadResults("cannot read findings from %s: %s" % (path, e.strerror or e)) from None
    except ValueError as e:  # not JSON, or not UTF-8
        raise BadResults("cannot read findings from %s: not JSON (%s)" % (path, e)) from None
    try:
        return results, findings(results, target, clause)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        why = "a record has no %s" % e if isinstance(e, KeyError) else str(e)
        raise BadResults("cannot read findings from %s: %s (not a results.json of dlconform run?)"
                         % (path, why)) from None


def selection_problem(results, path, target=None, clause=None):
    """Why --target and --clause name nothing (one line: a usage error), or None: a target the
    results have no record of; a clause glob that matches no clause of the catalogue nor of the
    records (as `dlconform run --clause` refuses one)."""
    records = results["results"]
    if target is not None and not any(r.get("target") == target for r in records):
        known = sorted({str(r.get("target")) for r in records})
        return "%s has no target %r (its targets: %s)" % (path, target, ", ".join(known) or "none")
    if clause is not None and _catalogue.load().unmatched([clause]) and not any(
            fnmatch.fnmatchcase(str(r.get("clause")), clause) for r in records):
        return ("--clause %r matches no clause of the catalogue (ids look like CAP-01; suites/clauses.md "
                "lists them)" % clause)
    return None


def _versions(results, target):
    env = results.get("environment", {})
    info = results.get("targets", {}).get(target, {})
    libs = info.get("versions") or {}
    py = env.get("python", {})
    header = env.get("dlpack_header")
    rows = [("library", ", ".join("%s %s" % kv for kv in sorted(libs.items())) or "%s (version unknown)" % target),
            ("Python", "%s %s (%s)" % (py.get("implementation", ""), py.get("version", "?"), py.get("executable", ""))),
            ("OS", "%s, %s" % (env.get("platform", "?"), env.get("machine", "?"))),
            ("dlpack.h", "%d.%d" % tuple(header) if header else "?")]
    return ["| | |", "|---|---|"] + ["| %s | %s |" % row for row in rows]


def _fence(text):
    ticks = max([3] + [len(m) + 1 for m in re.findall(r"`{3,}", text)])
    return "`" * ticks


def render(finding, results, cat=None):
    """The Markdown text of one finding."""
    cat = cat or _catalogue.load()
    c = cat.get(finding.clause)
    library = library_of(finding.target)
    messages = [r["message"] for r in finding.records if r.get("message")]
    summary = (messages[0] if messages else finding.verdict).splitlines()[0]
    if len(summary) > 100:
        summary = summary[:97] + "..."
    out = ["# %s: %s %s" % (library, finding.clause, summary), "",
           "Found by dlconform (DLPack conformance), check `%s`: **%s** (%s)." % (
               finding.test, finding.verdict, _WHAT[finding.verdict]), "", "## Versions", ""]
    out += _versions(results, finding.target)
    out += ["", "## The requirement", ""]
    if c is None:
        out.append("%s (not in the clause catalogue)." % finding.clause)
    else:
        out += ["%s (%s; binds: %s): %s" % (c.id, c.level, c.get("binds", "?"), c.text), "",
                "Where it is written: %s." % c.get("source", "?")]
        if c.get("reading"):
            out += ["", "How dlconform reads it: %s" % c.get("reading")]
    out += ["", "## Expected behaviour", "",
            "The library does what %s requires%s. The reproducer's assertions state it for this case." % (
                finding.clause, ", and does not crash" if finding.verdict == "crash" else ""),
            "", "## Actual behaviour", ""]
    out += ["- %s" % m.replace("\n", " ") for m in messages] or ["- %s" % finding.verdict]
    script, why = standalone_script_of(finding, library)
    out += ["", "## Reproducer", ""]
    if script is not None and library == "nanobind":
        source, build = glue()
        out += ["The library under test is nanobind, through an extension built with it: `_nanobind`, whose "
                "every DLPack behaviour is nanobind's (its type caster for an `nb::ndarray<>` argument, its "
                "`nb::ndarray<nb::array_api>` export); the extension only passes addresses, shapes and dtypes "
                "through. Save it as `module.cpp` beside `repro.py` and build it there:", "",
                _fence(source) + "cpp", source.rstrip("\n"), _fence(source), "", "```sh", build, "```", ""]
    if script is not None:
        fence = _fence(script)
        needs = {"nanobind": "the extension built above", "ref": "dlconform's `_ref` extension beside it"}
        out += ["Save as `repro.py` and run `python3 repro.py`. It needs only %s, Python and ctypes: it is the "
                "check's own code, with the parts of dlconform it uses embedded at its end. It exits 1 and "
                "prints `REPRODUCED %s: ...` while the bug is there, 0 once it is fixed%s. What the same check "
                "found on other clauses prints as `ALSO ...` and does not stop it." % (
                    needs.get(library, library), finding.clause,
                    "; a crash dies by its signal" if finding.verdict == "crash" else ""),
                "", fence + "python", script.rstrip("\n"), fence]
    else:
        out += ["No standalone reproducer: %s. dlconform's reproducer (needs a dlconform checkout):" % why, ""]
        if finding.repro:
            fence = _fence(finding.repro)
            out += [fence + "python", finding.repro.rstrip("\n"), fence]
    return "\n".join(out) + "\n"


def standalone_script(markdown_text):
    """The standalone reproducer a report carries, or None."""
    m = re.search(r"^(`{3,})python\n(# run: (?!PYTHONPATH=)\S*python\S* repro\.py\n.*?)\n\1$", markdown_text,
                  re.S | re.M)
    return m.group(2) + "\n" if m else None


def glue_files(markdown_text):
    """(module.cpp, the build lines) a nanobind report carries, or None."""
    src = re.search(r"^(`{3,})cpp\n(.*?)\n\1$", markdown_text, re.S | re.M)
    build = re.search(r"^```sh\n(.*?)\n```$", markdown_text, re.S | re.M)
    return (src.group(2) + "\n", build.group(1) + "\n") if src and build else None


def write(results, out_dir, target=None, clause=None):
    """Writes one report per selected finding into out_dir; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    cat = _catalogue.load()
    paths = []
    for f in findings(results, target, clause):
        path = os.path.join(out_dir, f.name + ".md")
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            fh.write(render(f, results, cat))
        os.replace(path + ".tmp", path)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------- standalone scripts
#: the glue a nanobind finding's script imports, and how it is built beside the script: the
#: flags of probes/nanobind/nanobind.mk, against nanobind's own sources (Debian's nanobind-dev;
#: a pip install of nanobind has them in the folder `python3 -m nanobind --cmake_dir` names
#: the parent of, with robin_map under ext/)
GLUE_SOURCE = os.path.join(REPO_DIR, "probes", "nanobind", "module.cpp")
GLUE_BUILD = """NB=/usr/share/nanobind   # nanobind's sources (include/, src/nb_combined.cpp)
PY=python3
INC=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
EXT=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
FLAGS="-std=c++17 -O2 -g -fPIC -fvisibility=hidden -DNDEBUG -I$NB/include -I$NB/ext/robin_map/include -I$INC"
g++ $FLAGS -c -o nb_combined.o "$NB/src/nb_combined.cpp"
g++ $FLAGS -c -o module.o module.cpp
g++ -shared -o "_nanobind$EXT" module.o nb_combined.o"""
#: the native module each library under test brings beside its script, where it is ours
NATIVE_LIBRARY = {"ref": "dlconform._ref", "nanobind": "dlconform._nanobind"}


def glue():
    """(module.cpp's text, the build lines) of the nanobind glue, or None outside a checkout."""
    try:
        with open(GLUE_SOURCE, encoding="utf-8") as f:
            return f.read(), GLUE_BUILD
    except OSError:
        return None


def library_of(target):
    """The module under test named by a target spec: 'ref' for ref and its faults."""
    return target.split(":", 1)[0]


def standalone_script_of(finding, library):
    """(the finding's reproducer made standalone, None), or (None, why it has none)."""
    return standalone_form(finding, library)[:2]


def standalone_form(finding, library):
    """(the finding's reproducer made standalone, None, False), or (None, why it has none,
    whether it has none by design): a check whose script needs a native module of dlconform's, a
    module other than the library, dlconform's fuzz oracles or its interpreter's exit
    (repro.standalone_problem) has no standalone form, whatever dlconform's state; a rerun
    command or a missing glue source is this dlconform's lack."""
    text = finding.repro
    if not text.startswith(_repro.RUN_PREFIX):
        return None, "the reproducer is a rerun command, not a script", False
    problem = _repro.standalone_problem(text, library=library, native_ok=NATIVE_LIBRARY.get(library))
    if problem is not None:
        return None, problem, True
    if library == "nanobind" and glue() is None:
        return None, "the nanobind glue's source (probes/nanobind/module.cpp) is not in this installation", False
    return _repro.standalone(text, python="python3"), None, False


# ---------------------------------------------------------------------------- the command
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
    try:
        results, _ = read_findings(args.results, args.target, args.clause)
        problem = selection_problem(results, args.results, args.target, args.clause)
    except BadResults as e:
        problem = str(e)
    if problem is None and not args.all_findings and not (args.target and args.clause):
        missing = " and ".join(flag for flag, given in (("--target T", args.target), ("--clause C", args.clause))
                               if not given)
        problem = "name a finding with %s%s, or give --all-findings" % (
            missing, " too" if args.target or args.clause else "")
    if problem is not None:
        print("dlconform report: %s" % problem, file=sys.stderr)
        return 2
    paths = write(results, args.out_dir, args.target, args.clause)
    if not args.quiet:
        for path in paths:
            print(path)
    print("dlconform report: %d report(s) in %s" % (len(paths), args.out_dir), file=sys.stderr)
    return 0 if paths else 1
