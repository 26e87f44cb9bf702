"""Helpers for testing the harness itself: a pure-Python fake target and a fake-suite writer.

`FAKE` (FakeTarget, both roles) and `PRODUCER_ONLY` are target specs (this file's path and the
name); they need neither `_ref` nor any framework.
"""
import importlib
import json
import os
import textwrap

from dlconform.targets.base import Target
from dlconform.targets.dtypes import itemsize, row_major_strides

HERE = os.path.abspath(__file__)
FAKE = HERE + ":FakeTarget"
PRODUCER_ONLY = HERE + ":ProducerOnly"
WATCHER = HERE + ":StateWatcher"


def have_ref():
    """Whether the C extensions (_probe, ref's _ref) are built and import."""
    try:
        importlib.import_module("dlconform._probe")
        importlib.import_module("dlconform._ref")
    except Exception:
        return False
    return True


class FakeTensor:
    def __init__(self, dtype, shape, data):
        self.dtype = dtype
        self.shape = tuple(shape)
        self.data = bytes(data)


class FakeTarget(Target):
    name = "fake"
    library = "fake"
    roles = frozenset({"producer", "consumer"})

    def versions(self):
        return {"fake": "1.0"}

    def dtypes(self):
        return ["uint8", "int32", "float32"]

    def make(self, dtype, shape, values):
        if dtype not in self.dtypes():
            raise ValueError("fake makes no %s tensors" % dtype)
        return FakeTensor(dtype, shape, values)

    def flip(self, x, dim):
        if not 0 <= dim < len(x.shape):
            raise IndexError("fake has no dimension %d to flip" % dim)
        return None

    def expected(self, x):
        return x.data

    def from_dlpack(self, obj, **kw):
        return obj

    def consumer_keywords(self):
        return frozenset({"device", "copy"})

    def describe(self, y):
        return {"ptr": 0, "shape": y.shape, "strides": row_major_strides(y.shape),
                "itemsize": itemsize(y.dtype), "readonly": False}


class ProducerOnly(FakeTarget):
    name = "fake-producer"
    roles = frozenset({"producer"})


def write_catalogue(folder, clauses):
    """clauses: {id: level} or a list of catalogue entries."""
    if isinstance(clauses, dict):
        entries = [{"id": cid, "group": cid.split("-")[0], "level": level, "binds": "both", "since": "test",
                    "source": "test", "needs": "cpu", "partial": False, "text": "clause %s" % cid}
                   for cid, level in clauses.items()]
    else:
        entries = list(clauses)
    path = os.path.join(folder, "clauses.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"schema": "dlconform-clauses/1", "clauses": entries}, f)
    return path


def write_suite(folder, files, clauses=None):
    """Writes test files {name: source} (dedented) and an optional catalogue into folder."""
    os.makedirs(folder, exist_ok=True)
    for name, source in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(source).lstrip("\n"))
    if clauses is not None:
        write_catalogue(folder, clauses)
    return folder


# ---------------------------------------------------------------------------- process state
def process_state():
    """What a library in this process could observe of process-wide settings that a test
    harness might change: Python-level signal handlers, the warnings filters, the hooks for
    uncaught and unraisable exceptions, the garbage collector's settings, the recursion limit,
    the environment (but PYTHONPATH, which must name the harness), stdout and stderr, and the
    prototypes of the ctypes.pythonapi functions a ctypes library sets itself. JSON-ready."""
    import ctypes
    import gc
    import signal
    import sys
    import warnings

    handlers = {}
    for sig in sorted(signal.valid_signals()):
        try:
            h = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
        handlers[int(sig)] = h if isinstance(h, int) else "%s.%s" % (getattr(h, "__module__", "?"),
                                                                     getattr(h, "__qualname__", repr(h)))
    protos = {}
    for name in ("PyCapsule_New", "PyCapsule_GetPointer", "PyCapsule_GetName", "PyCapsule_SetName",
                 "PyCapsule_IsValid", "PyObject_GetBuffer", "PyBuffer_Release", "Py_IncRef", "Py_DecRef"):
        fn = getattr(ctypes.pythonapi, name)
        protos[name] = [repr(fn.restype), repr(fn.argtypes)]
    return {
        "signals": handlers,
        "warnings": [repr(f) for f in warnings.filters],
        "hooks": [repr(sys.excepthook), repr(sys.unraisablehook), repr(getattr(sys, "breakpointhook", None))],
        "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_debug()],
        "recursionlimit": sys.getrecursionlimit(),
        "environ": {k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "streams": [type(sys.stdout).__name__, type(sys.stderr).__name__, sys.stdout.isatty()],
        "ctypes": protos,
    }


#: libraries the suites may import besides the target (interop peers)
PEER_LIBRARIES = ("numpy", "torch", "tvm_ffi", "pyarrow", "mpi4py", "onnxruntime")


def _state_watcher():
    """The StateWatcher class, made on first use: it is a RefTarget, and importing the ref
    adapter needs _ref, which FakeTarget's users do not."""
    from dlconform.targets.ref import RefTarget

    class Watcher(RefTarget):
        __doc__ = StateWatcher.__doc__

        def __init__(self, name=None):
            super().__init__()
            self.name = name or WATCHER
            self._plain = {}  # the libraries imported -> the state of a plain interpreter with them
            self._log = os.environ.get("DLCONFORM_STATE_LOG")

        def plain(self):
            """process_state() of a plain interpreter that imported what this process has of the
            libraries the suites use (ref; numpy and the others that interop checks import as
            peers, whose own imports may set warnings filters)."""
            import subprocess
            import sys

            libs = tuple(m for m in PEER_LIBRARIES if m in sys.modules)
            if libs not in self._plain:
                code = ("import json, sys, dlconform._ref\n%ssys.path.insert(0, %r)\nfrom fakes import process_state\n"
                        "print(json.dumps(process_state()))" % ("".join("import %s\n" % m for m in libs),
                                                                 os.path.dirname(HERE)))
                out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
                self._plain[libs] = json.loads(out.stdout)
            return self._plain[libs]

        def _compare(self, where):
            now = json.loads(json.dumps(process_state()))
            plain = self.plain()
            diff = {k: [plain.get(k), v] for k, v in now.items() if plain.get(k) != v}
            if diff and self._log:
                import sys

                frame, test = sys._getframe(1), "?"
                while frame is not None:
                    if frame.f_code.co_name.startswith("test_"):
                        test = "%s::%s" % (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name)
                        break
                    frame = frame.f_back
                with open(self._log, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"test": test, "where": where, "diff": diff}) + "\n")

        def make(self, dtype, shape, values):
            self._compare("make")
            return super().make(dtype, shape, values)

        def from_dlpack(self, obj, **kw):
            self._compare("from_dlpack")
            return super().from_dlpack(obj, **kw)

    return Watcher


def StateWatcher(name=None):
    """StateWatcher (WATCHER): ref, whose every make and from_dlpack compares
    process_state() with that of a plain interpreter that imported the same library, and
    appends each difference to $DLCONFORM_STATE_LOG as a JSON line (the harness meta-test:
    the suite must leave a library's process as any Python process)."""
    return _state_watcher()(name)
