"""A reproducer snippet as a script that needs only the library under test, Python and ctypes.

The script is dlconform/snippet.py and kit.py, inlined as they are (and dlconform/producers.py
where the snippet imports from it), then the snippet's body without its
dlconform imports. A body that uses something the kit does not have (a target
loaded through dlconform, `_probe.consume`, ...) has no standalone form: script() says why.

nanobind is a C++ binding library: what is under test is an extension built with it, here the
glue dlconform builds (probes/nanobind/module.cpp, one page of C++ that only passes values to
nanobind). Its script imports that extension as the top-level module `_nanobind`; the report
carries the glue's source and the lines that build it beside the script (glue()).
"""
import ast
import io
import os
import re
import tokenize

from .. import REPO_DIR
from .. import producers as _producers
from .. import snippet as _snippet
from . import kit as _kit

#: what the kit provides under the names a snippet uses
KIT_NAMES = {"_probe": {"inspect", "extent", "read_elements", "rename", "instrument", "consume", "exchange_api",
                        "xapi_managed_from", "xapi_dltensor_from", "xapi_alloc", "xapi_to_py"}, "_ref": {"Forge"}}
#: dlconform modules that import nothing from dlconform: a body that imports names of one gets
#: the module inlined (after the kit), under its own names
INLINED = {"dlconform.producers": _producers}
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


#: a script about one clause (snippet.FOCUS): an exception that escapes after another clause's
#: finding (ALSO) means the script could not reach the reported clause: it says so and exits 3
FOCUS_GLUE = """
FOCUS = %r


def _undetermined(kind, value, tb, _hook=sys.excepthook):
    _hook(kind, value, tb)
    if ALSO:
        print("UNDETERMINED %%s: the script stopped before it reached %%s, after the finding of %%s"
              %% (FOCUS, FOCUS, ", ".join(ALSO)), flush=True)
        os._exit(3)


sys.excepthook = _undetermined
"""


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


def glue():
    """(module.cpp's text, the build lines) of the nanobind glue, or None outside a checkout."""
    try:
        with open(GLUE_SOURCE, encoding="utf-8") as f:
            return f.read(), GLUE_BUILD
    except OSError:
        return None


def _source(module):
    with open(os.path.splitext(module.__file__)[0] + ".py", encoding="utf-8") as f:
        return f.read()


#: scopes of their own: what they bind is not the module's
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


def _globals(source, imports=True):
    """The names a module's top level binds (assignments, loops, functions, classes, and with
    `imports` its imports)."""
    out, todo = set(), list(ast.parse(source).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and imports:
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        if not isinstance(node, _SCOPES):
            todo += ast.iter_child_nodes(node)
    return out


def unshadow(body, taken):
    """`body` with every name it binds that is also one of `taken` (the inlined code's globals)
    renamed NAME_r: in one script a reproducer's own `_names` would replace the helper that the
    inlined snippet.py calls by that name. References to such a name are renamed with it;
    attributes (`x._names`) and strings are left as they are."""
    clash = _globals(body, imports=False) & set(taken)  # `import ctypes` binds the same module
    if not clash:
        return body
    lines = body.splitlines(keepends=True)
    edits, prev = [], None
    for tok in tokenize.generate_tokens(io.StringIO(body).readline):
        if tok.type == tokenize.NAME and tok.string in clash and not (prev is not None and prev.string == "."):
            edits.append(tok.end)
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = tok
    for row, col in reversed(edits):
        lines[row - 1] = lines[row - 1][:col] + "_r" + lines[row - 1][col:]
    return "".join(lines)


def library_of(target):
    """The module under test named by a target spec: 'ref' for ref and its faults."""
    return target.split(":", 1)[0]


def script(snippet, target, clause=None):
    """(the standalone script, None), or (None, why there is none). With `clause` (the finding's),
    the script is about that clause alone (snippet.FOCUS) when the snippet asserts it."""
    if not snippet.startswith("# run: "):
        return None, "the reproducer is a rerun command, not a snippet"
    library = library_of(target)
    body, ref_imported = [], False
    lines = snippet.splitlines()[1:]
    lines = lines[:lines.index(RERUN)] if RERUN in lines else lines
    inlined = []
    for line in lines:
        if line.startswith("from dlconform.snippet import "):
            continue
        module = line[len("from "):].split(" import ", 1)[0] if line.startswith("from dlconform.") else None
        if module in INLINED:
            if " as " in line:
                return None, "it imports a name of %s under another name (%s)" % (module, line)
            inlined += [] if module in inlined else [module]
            continue
        if line.startswith("from dlconform import "):
            names = {n.strip() for n in line[len("from dlconform import "):].split(",")}
            if library == "ref" and "_ref" in names and not ref_imported:
                body.append(REF_IMPORT)
                ref_imported = True
            if library == "pyref" and "pyref" in names:
                body.append("import pyref")  # pyref imports nothing from dlconform: its folder stands alone
                names.discard("pyref")
            if library == "nanobind" and "_nanobind" in names:
                if glue() is None:
                    return None, "the glue's source (%s) is not here to go with the script" % GLUE_SOURCE
                body.append("import _nanobind  # the glue built from module.cpp beside this script")
                names.discard("_nanobind")
            if names - {"_ref", "_probe"}:
                return None, "the library under test is part of dlconform (%s)" % line
            continue
        body.append(line)
    inlined = [m for m in INLINED if m in inlined]  # in INLINED's order
    sources = [_source(_snippet), _source(_kit), GLUE] + [_source(INLINED[m]) for m in inlined]
    # REF_IMPORT binds the kit's _ref to ref's names on purpose
    text = unshadow("\n".join(body), set().union(*map(_globals, sources)) - {"_ref"})
    # a word of its own: ref's `_dlconform_tensor` attribute is the library's
    uses = [line.strip() for line in body if re.search(r"\bdlconform\b", line)]
    if uses:
        return None, "it needs dlconform (%s)" % uses[0]
    used = set(re.findall(r"\b(_probe|_ref)\.([A-Za-z_]\w*)", text))
    missing = sorted("%s.%s" % u for u in used if u[1] not in KIT_NAMES[u[0]] and not (library == "ref" and u[0] == "_ref"))
    if missing:
        return None, "it uses dlconform's %s, which the standalone kit does not have" % ", ".join(missing)
    focus = clause if clause and re.search(r"""['"]%s['"]""" % re.escape(clause), text) else None
    needs = library if library != "nanobind" else "the nanobind extension _nanobind (module.cpp, built beside it)"
    head = ("#!/usr/bin/env python3\n"
            "# Standalone reproducer: needs only %s, Python and ctypes. Run: python3 repro.py\n"
            "# Exit 0: the library behaves. Exit 1: 'REPRODUCED <clause>: ...' names what differed.\n"
            "# A crash (death by a signal) reproduces a crash finding.\n" % needs)
    if focus:
        head += ("# It is about %s: another clause's finding is printed as ALSO and the script goes on\n"
                 "# (exit 3, UNDETERMINED, when it cannot).\n" % focus)
    return "\n".join([head, "# ---- assertions (dlconform/snippet.py)", _source(_snippet),
                      "# ---- ctypes kit (dlconform/bugreport/kit.py)", _source(_kit), GLUE]
                     + ([FOCUS_GLUE % focus] if focus else [])
                     + sum((["# ---- %s (dlconform/%s.py)" % (m, m.split(".")[-1]), _source(INLINED[m])]
                            for m in inlined), [])
                     + ["# ---- the reproducer", text, ""]), None
