"""One Markdown bug report per finding of a results.json, ready to file upstream.

A finding is the non-pass records (fail, warn, crash, timeout) of one test on one clause of
one target. Its report has a title; the versions (library, Python, OS, dlpack header); the
clause with its requirement and where the spec writes it (suites/clauses.json); expected and
actual behaviour; and a reproducer that needs only the library, Python and ctypes
(standalone.script), or, where it has no standalone form, dlconform's reproducer and why.
"""
import fnmatch
import os
import re

from .. import catalogue as _catalogue
from . import standalone

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
    library = standalone.library_of(finding.target)
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
    script, why = (standalone.script(finding.repro, finding.target, finding.clause) if finding.repro
                   else (None, "no reproducer"))
    out += ["", "## Reproducer", ""]
    glue = standalone.glue() if script is not None and library == "nanobind" else None
    if script is not None and library == "nanobind" and glue is None:
        script, why = None, "the nanobind glue's source (probes/nanobind/module.cpp) is not in this installation"
    if glue is not None:
        source, build = glue
        out += ["The library under test is nanobind, through an extension built with it: `_nanobind`, whose "
                "every DLPack behaviour is nanobind's (its type caster for an `nb::ndarray<>` argument, its "
                "`nb::ndarray<nb::array_api>` export); the extension only passes addresses, shapes and dtypes "
                "through. Save it as `module.cpp` beside `repro.py` and build it there:", "",
                _fence(source) + "cpp", source.rstrip("\n"), _fence(source), "", "```sh", build, "```", ""]
    if script is not None:
        fence = _fence(script)
        also = (" What the same check found on other clauses prints as `ALSO ...` and does not stop it."
                if "\nFOCUS = " in script else "")
        out += ["Save as `repro.py` and run `python3 repro.py`. It needs only %s, Python and ctypes. It exits "
                "1 and prints `REPRODUCED %s: ...` while the bug is there, 0 once it is fixed%s.%s" % (
                    "the extension built above" if library == "nanobind" else library, finding.clause,
                    "; a crash dies by its signal" if finding.verdict == "crash" else "", also),
                "", fence + "python", script.rstrip("\n"), fence]
    else:
        out += ["No standalone reproducer: %s. dlconform's reproducer (needs a dlconform checkout):" % why, ""]
        if finding.repro:
            fence = _fence(finding.repro)
            out += [fence + "python", finding.repro.rstrip("\n"), fence]
    return "\n".join(out) + "\n"


def standalone_script(markdown_text):
    """The standalone reproducer a report carries, or None."""
    m = re.search(r"^(`{3,})python\n(#!/usr/bin/env python3\n.*?)\n\1$", markdown_text, re.S | re.M)
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
