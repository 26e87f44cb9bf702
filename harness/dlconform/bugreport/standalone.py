"""A reproducer snippet as a script that needs only the library under test, Python and ctypes.

The script is dlconform/snippet.py and kit.py, inlined as they are, then the snippet's body
without its dlconform imports. A body that uses something the kit does not have (a target
loaded through dlconform, `_probe.consume`, ...) has no standalone form: script() says why.
"""
import os
import re

from .. import snippet as _snippet
from . import kit as _kit

#: what the kit provides under the names a snippet uses
KIT_NAMES = {"_probe": {"inspect", "extent", "read_elements", "rename", "instrument", "consume"}, "_ref": {"Forge"}}
#: what the kit provides of dlconform.producers
KIT_PRODUCERS = {"RecordingProducer", "StreamDeviceProducer", "forges", "legacy_producer"}
#: the line that starts a crash reproducer's rerun comments (dlconform commands, never standalone)
RERUN = "# rerun the check:"
#: the reference library's own module, imported by its file name (the test puts it beside the
#: script, as it does pyref's folder)
REF_IMPORT = "import _ref as _library\n_ref = _with_library(_library)"


#: attempt() over the kit: a refusal whose exception a kit callback took (kit.LOST) gets it back
GLUE = """
_attempt = attempt


def attempt(call):
    del LOST[:]
    result, exc = _attempt(call)
    if exc is not None and LOST and "without setting an exception" in str(exc):
        exc = detach(LOST[-1])
    return result, exc
"""


def _source(module):
    with open(os.path.splitext(module.__file__)[0] + ".py", encoding="utf-8") as f:
        return f.read()


def library_of(target):
    """The module under test named by a target spec: 'ref' for ref and its faults."""
    return target.split(":", 1)[0]


def script(snippet, target):
    """(the standalone script, None), or (None, why there is none)."""
    if not snippet.startswith("# run: "):
        return None, "the reproducer is a rerun command, not a snippet"
    library = library_of(target)
    body, ref_imported = [], False
    lines = snippet.splitlines()[1:]
    lines = lines[:lines.index(RERUN)] if RERUN in lines else lines
    for line in lines:
        if line.startswith("from dlconform.snippet import "):
            continue
        if line.startswith("from dlconform.producers import "):
            names = {n.strip() for n in line.split(" import ", 1)[1].split(",")}
            if names - KIT_PRODUCERS:
                return None, "it uses dlconform's %s, which the standalone kit does not have" % ", ".join(
                    sorted(names - KIT_PRODUCERS))
            continue
        if line.startswith("from dlconform import "):
            names = {n.strip() for n in line[len("from dlconform import "):].split(",")}
            if library == "ref" and "_ref" in names and not ref_imported:
                body.append(REF_IMPORT)
                ref_imported = True
            if library == "pyref" and "pyref" in names:
                body.append("import pyref")  # pyref imports nothing from dlconform: its folder stands alone
                names.discard("pyref")
            if names - {"_ref", "_probe"}:
                return None, "the library under test is part of dlconform (%s)" % line
            continue
        body.append(line)
    text = "\n".join(body)
    # a word of its own: ref's `_dlconform_tensor` attribute is the library's
    uses = [line.strip() for line in body if re.search(r"\bdlconform\b", line)]
    if uses:
        return None, "it needs dlconform (%s)" % uses[0]
    used = set(re.findall(r"\b(_probe|_ref)\.([A-Za-z_]\w*)", text))
    missing = sorted("%s.%s" % u for u in used if u[1] not in KIT_NAMES[u[0]] and not (library == "ref" and u[0] == "_ref"))
    if missing:
        return None, "it uses dlconform's %s, which the standalone kit does not have" % ", ".join(missing)
    head = ("#!/usr/bin/env python3\n"
            "# Standalone reproducer: needs only %s, Python and ctypes. Run: python3 repro.py\n"
            "# Exit 0: the library behaves. Exit 1: 'REPRODUCED <clause>: ...' names what differed.\n"
            "# A crash (death by a signal) reproduces a crash finding.\n" % library)
    return "\n".join([head, "# ---- assertions (dlconform/snippet.py)", _source(_snippet),
                      "# ---- ctypes kit (dlconform/bugreport/kit.py)", _source(_kit), GLUE,
                      "# ---- the reproducer", text, ""]), None
