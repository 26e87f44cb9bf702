"""Reproducers: a check's own function, written out as a script.

A reproducer is generated, never written by hand: `script()` takes the function a check ran
(the test function, or the case function a hypothesis search settled on), the arguments it
ran with as literals, and the target, and writes
- the function's source as it stands in the suite (decorators dropped);
- the module-level helpers, constants and imports it uses, found by name, each as written;
- a main block that runs it through `dlconform.kit.reproduce`, which exits 1 printing
  `REPRODUCED CLAUSE: what differed` at the check's first finding on the script's clause.

So the script runs the same code as the check: the two cannot disagree. Its first line says
how to run it (`# run: PYTHONPATH=... python3 repro.py`).

`standalone(text)` makes a script that needs no dlconform on the path: the dlconform and
suite modules its imports reach are embedded (generated from their files) and served by a
small import hook, and the native modules it needs (dlconform._ref, _probe) are taken from
beside the script. `standalone_problem(text)` says why a script cannot stand alone, or None.
"""
import ast
import functools
import inspect
import os
import shlex
import sys

from . import HARNESS_DIR, PACKAGE_DIR, SUITES_DIR
from .kit.check import EXIT_NOT_RUN, GRADED, NOT_RUN

#: the first words of a script's run line
RUN_PREFIX = "# run: "
#: our pure-Python module roots: (folder, the dotted prefix of its modules or "" for a folder
#: on the path)
_ROOTS = ((PACKAGE_DIR, "dlconform"), (SUITES_DIR, ""))
#: the line above a script's imports (and above the embedded modules of a standalone one)
IMPORTS_MARK = "# ---- what the check imports, and its module-level definitions that run as they are made"
#: native modules of dlconform: a standalone script loads them from beside itself
NATIVE = ("dlconform._probe", "dlconform._ref", "dlconform._nanobind")


class NotReproducible(Exception):
    """The check cannot be written out (a nested function, an argument with no literal)."""


#: what the run line's PYTHONPATH ends with: the caller's own, where it has one (a library found
#: through PYTHONPATH stays found when the line is run by hand)
CALLERS_PATH = "${PYTHONPATH:+:$PYTHONPATH}"


def run_header(python=None, standalone=False, env=None, name="repro.py"):
    """`# run: [NAME=value ...] PYTHONPATH=<harness>:<suites>[:caller's] <python> repro.py`: how
    to run a script saved as `name` (a plain file name) in the current folder."""
    python = shlex.quote(python or sys.executable)
    assignments = "".join("%s=%s " % (k, shlex.quote(str(v))) for k, v in sorted((env or {}).items()))
    if standalone:
        return "%s%s%s %s" % (RUN_PREFIX, assignments, python, shlex.quote(name))
    return '%s%sPYTHONPATH=%s"%s" %s %s' % (RUN_PREFIX, assignments,
                                           shlex.quote(os.pathsep.join((HARNESS_DIR, SUITES_DIR))),
                                           CALLERS_PATH, python, shlex.quote(name))


def script_name(argv):
    """The file a run line's command runs: its last word ending in .py, as a plain file name
    (repro.py when there is none)."""
    names = [os.path.basename(w) for w in argv if w.endswith(".py")]
    return names[-1] if names else "repro.py"


def run_line(text):
    """(the NAME=value assignments, the command's words) of a script's `# run:` line, or None
    where its first line is no run line. PYTHONPATH is given without the caller's part
    (CALLERS_PATH), which a shell would fill in."""
    first = text.split("\n", 1)[0]
    if not first.startswith(RUN_PREFIX):
        return None
    try:
        words = shlex.split(first[len(RUN_PREFIX):])
    except ValueError:
        return None
    env = {}
    while words:
        name, eq, value = words[0].partition("=")
        if not eq or not name.isidentifier():
            break
        env[name] = value[:-len(CALLERS_PATH)] if name == "PYTHONPATH" and value.endswith(CALLERS_PATH) else value
        words.pop(0)
    return env, words


def header_env(text):
    """The NAME=value assignments of a script's run line, other than PYTHONPATH."""
    parsed = run_line(text)
    return {} if parsed is None else {k: v for k, v in parsed[0].items() if k != "PYTHONPATH"}


#: what a crash's reproducer sets in its run line: Python's own allocator (pymalloc) hands
#: small blocks out of its arenas unchecked, so a double free or a write past a block there
#: kills the process only later, if ever (in the suite, at an allocation of the next test; in a
#: script, often never); on glibc's allocator its checks abort where the damage is done
CRASH_ENV = {"PYTHONMALLOC": "malloc"}


def with_env(text, env):
    """The script `text` with the NAME=value assignments of `env` in its run line (those it
    sets already stay as they are)."""
    first, nl, rest = text.partition("\n")
    if not first.startswith(RUN_PREFIX):
        return text
    have = header_env(text)
    extra = "".join("%s=%s " % (k, shlex.quote(str(v))) for k, v in sorted(env.items()) if k not in have)
    return RUN_PREFIX + extra + first[len(RUN_PREFIX):] + nl + rest


def bytes_literal(data):
    """A Python expression for `data` that stays short in a script."""
    data = bytes(data)
    return repr(data) if len(data) <= 16 else "bytes.fromhex(%r)" % data.hex()


def literal(value):
    """A Python expression that evaluates to `value` (None, bool, numbers, text, bytes, and
    tuples, lists, sets and dicts of them); NotReproducible for anything else."""
    if isinstance(value, (bytes, bytearray)):
        return bytes_literal(value)
    if type(value) is tuple:
        return "(%s%s)" % (", ".join(literal(v) for v in value), "," if len(value) == 1 else "")
    if type(value) is list:
        return "[%s]" % ", ".join(literal(v) for v in value)
    if type(value) is dict:
        return "{%s}" % ", ".join("%s: %s" % (literal(k), literal(v)) for k, v in value.items())
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        text = repr(value)
        if type(value) in (bool, int, str, type(None)) or ast.literal_eval(text) == value:
            return text
    raise NotReproducible("no literal for %s %r" % (type(value).__name__, value))


# ---------------------------------------------------------------------------- reading the suites
class _Module:
    """A module's top-level statements by the names they bind."""

    def __init__(self, module):
        self.module = module
        self.name = module.__name__
        self.lines = inspect.getsource(module).splitlines()
        tree = ast.parse("\n".join(self.lines))
        self.binders = {}  # name -> statement
        for stmt in tree.body:
            for name in _bound(stmt):
                self.binders.setdefault(name, stmt)

    def segment(self, stmt, decorators=True):
        """The statement's text, with the comment lines just above it."""
        first = stmt.lineno
        if decorators and getattr(stmt, "decorator_list", None):
            first = min(d.lineno for d in stmt.decorator_list)
        start = first - 1
        while start > 0 and self.lines[start - 1].lstrip().startswith("#"):
            start -= 1
        return "\n".join(self.lines[start:stmt.end_lineno])


def _bound(stmt):
    """The names a top-level statement binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, (ast.If, ast.Try, ast.With)):
        return [n for s in ast.walk(stmt) if s is not stmt and isinstance(s, ast.stmt) for n in _bound(s)]
    return []


def _used(node):
    """The names a statement reads (a superset: locals that shadow nothing are filtered later)."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in out:
            out.append(n.id)
    return out


@functools.lru_cache(maxsize=None)
def _module(name):
    return _Module(sys.modules[name])


def _import_text(mod, stmt, name):
    """The import statement of `stmt` cut to the one name it binds, relative imports made absolute."""
    if isinstance(stmt, ast.Import):
        alias = next(a for a in stmt.names if (a.asname or a.name).split(".")[0] == name)
        return "import %s%s" % (alias.name, " as %s" % alias.asname if alias.asname else "")
    alias = next(a for a in stmt.names if (a.asname or a.name) == name)
    base = stmt.module or ""
    if stmt.level:
        package = mod.module.__package__ or ""
        parts = package.split(".") if package else []
        base = ".".join(parts[:len(parts) - stmt.level + 1] + ([base] if base else []))
    return "from %s import %s%s" % (base, alias.name, " as %s" % alias.asname if alias.asname else "")


@functools.lru_cache(maxsize=None)
def _closure(fn):
    """(the function's text without decorators, [helper texts in module order], [import lines])."""
    if "<locals>" in fn.__qualname__:
        raise NotReproducible("%s is nested in another function: a reproducer calls module-level functions only"
                              % fn.__qualname__)
    mod = _module(fn.__module__)
    root = mod.binders.get(fn.__name__)
    if not isinstance(root, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise NotReproducible("%s is not a module-level function of %s" % (fn.__name__, mod.name))
    seen, helpers, imports = {root}, [], []
    todo = [n for n in _used(root.args) + [n for s in root.body for n in _used(s)] if n != fn.__name__]
    while todo:
        name = todo.pop(0)
        stmt = mod.binders.get(name)
        if stmt is None or stmt in seen and not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            line = _import_text(mod, stmt, name)
            if line not in imports:
                imports.append(line)
            continue
        seen.add(stmt)
        helpers.append(stmt)
        todo += [n for n in _used(stmt) if n not in todo]
    helpers.sort(key=lambda s: s.lineno)
    plain = tuple(mod.segment(s) for s in helpers if _late_bound(s))
    eager = tuple(mod.segment(s) for s in helpers if not _late_bound(s))
    return mod.segment(root, decorators=False), plain, tuple(imports), eager


def _late_bound(stmt):
    """True for a plain function: defining it runs none of its names, so it may stand before the
    imports; a class, an assignment or a decorated function runs names as it is defined."""
    return isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not stmt.decorator_list


# ---------------------------------------------------------------------------- the script
def target_lines(spec):
    """(import lines, expression) that give the target of `spec` in a script."""
    from .targets.loader import construction

    return construction(spec)


def script(fn, args, spec, focus=None, levels=None, feeds="valid", python=None, where=None, env=None, verdict=None):
    """The reproducer of fn(target, check, **args) against the target `spec`, about the clause
    `focus` (every clause when None) and its finding's `verdict` (a lesser finding of the
    clause does not reproduce it: kit.check.reproduce). `levels`: {clause: level} of the
    check's clauses; `where`: the test it comes from, for the header; `env`: variables its run
    line sets."""
    body, helpers, imports, eager = _closure(fn)
    target_imports, target_expr = target_lines(spec)
    call = ["reproduce(%s, target, %s," % (fn.__name__, literal(dict(args or {}))),
            "          focus=%s, levels=%s, feeds=%r%s)" % (literal(focus), literal(dict(levels or {})), feeds,
                                                     ", verdict=%r" % verdict if verdict in GRADED else "")]
    head = [run_header(python, env=env),
            "# dlconform reproducer%s: %s of the target %s, as the check %s runs it." % (
                "" if focus is None else " of %s" % focus, "the check's findings" if focus is None else focus,
                spec, where or "%s.%s" % (fn.__module__, fn.__name__)),
            "# It exits 1 printing 'REPRODUCED CLAUSE: what differed' while the finding is there, 0 once it is",
            "# fixed; a crash kills it. The check's code follows as the suite has it."]
    main = (["", "", "if __name__ == \"__main__\":"]
            + ["    " + line for line in list(target_imports)
               + ["from dlconform.kit import reproduce", "target = %s" % target_expr] + call])
    defined = "\n".join([IMPORTS_MARK] + list(imports)) + "".join("\n\n\n" + text for text in eager)
    return "\n\n\n".join(["\n".join(head), body] + list(helpers) + [defined]) + "\n" + "\n".join(main) + "\n"


# ---------------------------------------------------------------------------- standalone scripts
def _module_file(name):
    """(path, is_package) of one of our pure-Python modules, or None."""
    for folder, prefix in _ROOTS:
        if prefix and not (name == prefix or name.startswith(prefix + ".")):
            continue
        rel = name[len(prefix) + 1:] if prefix and name != prefix else ("" if prefix else name)
        base = os.path.join(folder, *rel.split(".")) if rel else folder
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), True
        if os.path.isfile(base + ".py"):
            return base + ".py", False
    return None


def _absolute(node, package):
    """The absolute module name of an ImportFrom's module (its level resolved against `package`)."""
    base = node.module or ""
    if node.level:
        parts = package.split(".") if package else []
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
    return base


class _Unit:
    """Code that runs as one piece: a module's top level, or a function's body (with the
    functions nested in it): the names it reads, the modules it imports (`from X import y` also
    as X.y: y may be a module), whether it imports a module named at run time, and the text
    literals in it."""

    def __init__(self):
        self.names, self.imports, self.dynamic, self.strings = set(), [], False, set()


def _units(source, name, is_package):
    """(the top-level _Unit, [(names that must be read for it to run, _Unit)]) of a module's
    source: each function defined at its top level needs its name read; each method of a class
    there, its class's name and its own (a dunder method, its class's only). A function defined
    inside a function belongs to that function's unit: it may run whenever that one does."""
    package = name if is_package else name.rpartition(".")[0]
    top, funcs = _Unit(), []

    def visit(node, unit, cls, nested):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and not nested:
                for part in child.decorator_list + child.args.defaults + child.args.kw_defaults:
                    if part is not None:
                        visit(ast.Expression(part), unit, cls, nested)
                body = _Unit()
                dunder = child.name.startswith("__") and child.name.endswith("__")
                funcs.append((frozenset(([] if cls is None else [cls]) + ([] if dunder and cls else [child.name])),
                              body))
                visit(child, body, None, True)
                continue
            if isinstance(child, ast.ClassDef) and not nested:
                visit(child, unit, child.name, nested)
                continue
            if isinstance(child, ast.Import):
                unit.imports.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child, package)
                unit.imports.extend([base] + [base + "." + a.name for a in child.names])
            elif isinstance(child, ast.Name):
                unit.names.add(child.id)
            elif isinstance(child, ast.Attribute):
                unit.names.add(child.attr)
            elif isinstance(child, ast.Call) and _called(child.func) == "getattr" and len(child.args) > 1:
                name_arg = child.args[1]
                if isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str):
                    unit.names.add(name_arg.value)
            elif isinstance(child, ast.Call) and _called(child.func) == "import_module":
                if child.args and isinstance(child.args[0], ast.Constant) and isinstance(child.args[0].value, str):
                    unit.imports.append(child.args[0].value)
                else:
                    unit.dynamic = True
            elif isinstance(child, ast.Constant) and isinstance(child.value, str):
                unit.strings.add(child.value)
            visit(child, unit, cls, nested)

    visit(ast.parse(source), top, None, False)
    return top, funcs


def _called(func):
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _imports_of(source, name, is_package):
    """[(absolute module name, eager)] of the import statements in a module's source, each
    `from X import y` also as X.y (y may be a module); eager: run when the module is imported
    (not inside a function)."""
    out = []
    package = name if is_package else name.rpartition(".")[0]

    def visit(node, eager):
        if isinstance(node, ast.Import):
            out.extend((a.name, eager) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            out.append((base, eager))
            out.extend((base + "." + a.name, eager) for a in node.names)
        lazy = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, eager and not lazy)

    visit(ast.parse(source), True)
    return [(m, eager) for m, eager in out if m]


_PARSED = {}


def _parsed(path, name, is_package):
    """(source, _imports_of(source), _units(source)) of one of our module files, parsed once per
    process and again only when the file changes (a report writes hundreds of scripts from the
    same modules)."""
    st = os.stat(path)
    key = (path, name, is_package)
    hit = _PARSED.get(key)
    if hit is None or hit[0] != (st.st_mtime_ns, st.st_size):
        with open(path, encoding="utf-8") as f:
            src = f.read()
        hit = _PARSED[key] = ((st.st_mtime_ns, st.st_size), src, _imports_of(src, name, is_package),
                              _units(src, name, is_package))
    return hit[1:]


#: the module whose text literals name every built-in target (its tables, its messages): what it
#: imports by name comes from the spec it is given, never from those
_LOADER = "dlconform.targets.loader"


@functools.lru_cache(maxsize=None)
def _named(text):
    """(our pure-Python modules, our native modules) that code importing a module by a name it
    is given at run time (loader.load, GenericTarget) imports when `text` is that name: the
    adapter of a built-in target spec ('numpy', 'ref:fault=X', 'pyref@cuda'; loader.BUILTIN,
    DEVICE_ONLY), or the module of dlconform's that another spec names ('MODULE',
    'MODULE@DEVICE', 'MODULE:ATTR'); empty for any other text."""
    from .targets.base import TargetError
    from .targets.loader import _registered, _split

    try:
        name, options = _split(text)
    except TargetError:  # a built-in name with a bad option or device: load() refuses it
        return (), ()
    if name is not None:
        return (_registered(name, options.get("device"))[0],), ()
    module = text.rpartition(":")[0] if ":" in text else text.partition("@")[0]
    if module in NATIVE:
        return (), (module,)
    if module.startswith("dlconform.") and all(p.isidentifier() for p in module.split(".")) and _module_file(module):
        return (module,), ()
    return (), ()


def _named_all(strings):
    """_named() of each of `strings`, merged: (pure-Python modules, native modules)."""
    pure, native = set(), set()
    for text in strings:
        p, n = _named(text)
        pure.update(p)
        native.update(n)
    return pure, native


def _literals(name, units):
    """The text literals of a module's _units() that may name a target spec to import by name:
    none of the loader's own (_LOADER)."""
    if name == _LOADER:
        return set()
    top, funcs = units
    return top.strings.union(*(unit.strings for _, unit in funcs))


def _bundle(text):
    """({module: (source, is_package)} of our modules the script reaches, {native modules} it
    may import as it runs (_native_needs) and {third-party modules} imported as the script starts
    (at module level, all the way down). The modules it reaches: those its code imports, and
    those a text literal of that code names as a target spec (_named): the loader imports the
    spec's adapter by name."""
    units = {"__main__": _units(text, "__main__", False)}
    sources, third = {}, set()
    todo = [(m, True) for m, _ in _imports_of(text, "__main__", False)]  # the main block runs
    todo += [(m, False) for m in _named_all(_literals("__main__", units["__main__"]))[0]]
    while todo:
        name, eager = todo.pop()
        if name in sources or name in NATIVE:
            continue
        found = _module_file(name)
        if found is None:
            top = name.split(".")[0]
            if top in ("dlconform", "support") or top in getattr(sys, "stdlib_module_names", ()):
                continue  # a name imported from a module, or the standard library
            if eager:
                third.add(top)
            continue
        path, is_package = found
        src, imports, units[name] = _parsed(path, name, is_package)
        sources[name] = (src, is_package)
        parts = name.split(".")
        todo += [(".".join(parts[:i]), eager) for i in range(1, len(parts))]  # parent packages
        todo += [(m, eager and lvl) for m, lvl in imports]
        todo += [(m, False) for m in _named_all(_literals(name, units[name]))[0]]
    return sources, _native_needs(units), third


def _native_needs(units):
    """The native modules of dlconform that the code a script may run imports, at module level
    or in a function (`from .. import _ref` where it is used). What may run: the script's top
    level, the top level of each module that code imports, and the functions of those modules
    whose names it reads anywhere (a method: its class's name too; _units): a function whose
    name no such code reads is never called, the one thing this shows statically.

    A module imported by a name given at run time (importlib.import_module(name): the loader's
    adapters, a generic target's library) is one that a text literal of code that may run names
    as a target spec (_named: the peer of an interop case, the target's own `load('M:A')`): once
    any such import may run, each module so named may run whole, and each native one is needed."""
    read, loaded, native, dynamic, strings = set(), set(), set(), set(), set()
    waiting, todo = {}, []
    by_name = False  # whether an import by a name given at run time may run

    def wait_or_run(mod, needs, unit):
        missing = set(needs) - read
        if missing:
            item = [mod, missing, unit]
            for n in missing:
                waiting.setdefault(n, []).append(item)
        else:
            todo.append((mod, unit))

    def load(name, dynamic=False):
        parts = name.split(".")
        for mod in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
            if mod in units and mod not in loaded:
                loaded.add(mod)
                top, funcs = units[mod]
                todo.append((mod, top))
                for needs, unit in funcs:
                    wait_or_run(mod, needs, unit)
        if dynamic and name in units:  # its classes are used by names read at run time: all of it may run
            todo.extend((name, unit) for _, unit in units[name][1])

    def by_names(texts):
        pure, nat = _named_all(texts)
        native.update(nat)
        for name in sorted(pure - dynamic):
            dynamic.add(name)
            load(name, dynamic=True)

    load("__main__")  # {module: _units()} holds the script as __main__
    while todo:
        mod, unit = todo.pop()
        for n in unit.names - read:
            read.add(n)
            for item in waiting.pop(n, ()):
                item[1].discard(n)
                if not item[1]:
                    todo.append((item[0], item[2]))
        for name in unit.imports:
            if name in NATIVE:
                native.add(name)
            else:
                load(name)
        fresh = set() if mod == _LOADER else unit.strings - strings
        strings.update(fresh)
        if unit.dynamic and not by_name:
            by_name, fresh = True, strings
        if by_name:
            by_names(fresh)
    return native


#: begins the docstring of a case judged by how its interpreter exits (suites/test_ownership.py)
AT_EXIT_MARK = "Judged at interpreter exit."


def standalone_problem(text, library=None, native_ok=None):
    """Why `text` cannot run without dlconform (a native module it needs, other than `native_ok`;
    a module other than the library under test that it imports; a case judged at interpreter exit,
    whose teardown the embedded modules change: the objects left for it are not torn down there),
    or None."""
    if AT_EXIT_MARK in text:
        return "it is judged at interpreter exit, which the standalone form's embedded modules change: run it linked"
    if IMPORTS_MARK not in text:  # a fuzz reproducer: one call into dlconform.fuzz, no check of its own
        return "it runs dlconform's fuzz oracles (dlconform.fuzz), not a check written out: run it with dlconform"
    _, native, third = _bundle(text)
    third.discard(library)
    native.discard(native_ok)
    if native:
        return "it needs dlconform's native module%s %s" % ("s" if len(native) > 1 else "", ", ".join(sorted(native)))
    if third:
        return "it imports %s" % ", ".join(sorted(third))
    return None


_HOOK = '''
# ---- dlconform's modules that this script uses, embedded from their files ----------------
import importlib.machinery as _machinery
import importlib.util as _util
import os as _os
import sys as _sys


class _Embedded:
    """Serves the embedded modules; dlconform's native modules come from beside the script.
    A finder and loader by its methods (importlib.abc's base classes would import
    importlib.resources, pathlib and tempfile: a third of a short script's time)."""

    def __init__(self, sources):
        self.sources = sources

    def find_spec(self, name, path=None, target=None):
        if name in self.sources:
            return _util.spec_from_loader(name, self, is_package=self.sources[name][1])
        if name in %(native)r:
            here = _os.path.dirname(_os.path.abspath(__file__))
            for suffix in _machinery.EXTENSION_SUFFIXES:
                where = _os.path.join(here, name.rpartition(".")[2] + suffix)
                if _os.path.exists(where):
                    return _util.spec_from_file_location(name, where)
            return _util.spec_from_loader(name, self)  # missing: exec_module says so
        if self.sources.get(name.partition(".")[0], (None, False))[1]:
            return _util.spec_from_loader(name, self)  # in an embedded package, but not embedded
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ not in self.sources:  # never read as the library's finding
            _sys.stderr.flush()
            print("%(not_run)s: %%s: dlconform's module %%s is not %%s (dlconform's problem, not the library's)"
                  %% (_os.path.basename(__file__), module.__name__,
                      "beside this script" if module.__name__ in %(native)r else "embedded in it"), flush=True)
            _os._exit(%(exit)d)
        source, package = self.sources[module.__name__]
        module.__file__ = "<embedded %%s>" %% module.__name__
        if package:
            module.__path__ = []
        exec(compile(source, module.__file__, "exec"), module.__dict__)


_sys.meta_path.insert(0, _Embedded({
%(sources)s
}))
'''


def _source_literal(src):
    if "'''" not in src and not src.endswith("\\"):
        return "r'''" + src.replace("\r", "") + "'''"
    return repr(src)


def standalone(text, python=None):
    """The script `text` with the modules it reaches embedded, so that it runs with only the
    library under test, Python and ctypes (and dlconform's native modules beside it, where
    standalone_problem() names them)."""
    sources, _, _ = _bundle(text)
    lines = text.splitlines()
    if lines and lines[0].startswith(RUN_PREFIX):
        lines[0] = run_header(python, standalone=True, env=header_env(text))
    main = lines.index(IMPORTS_MARK)
    entries = ",\n".join("    %r: (%s, %r)" % (name, _source_literal(src), pkg)
                         for name, (src, pkg) in sorted(sources.items()))
    hook = _HOOK % {"native": NATIVE, "sources": entries, "not_run": NOT_RUN, "exit": EXIT_NOT_RUN}
    return "\n".join(lines[:main]).rstrip("\n") + "\n\n" + hook + "\n\n" + "\n".join(lines[main:]) + "\n"


def run_command(target, clause, nodeid=None, python=None):
    """The generic reproducer: rerun the clause against the target, into a fresh folder (never
    over reports/out)."""
    line = "PYTHONPATH=%s %s -m dlconform run --target %s%s --out \"$(mktemp -d)\"" % (
        shlex.quote(HARNESS_DIR), shlex.quote(python or sys.executable), shlex.quote(target),
        "" if clause is None else " --clause " + shlex.quote(clause))
    if nodeid:
        line += "\n# pytest node: %s" % nodeid
    return line
