"""Private helpers of test_exchange_api and test_threads: finding a target's exchange table,
calling its functions in a child process, and forged tables for consumer checks.

Nothing here decides a verdict.
"""
import os
import subprocess
import sys
import textwrap

from dlconform import HARNESS_DIR, _probe
from dlconform.verdicts import Unsupported
import _capsule_support as S

ATTR = "__dlpack_c_exchange_api__"
ATTR_V12 = "__c_dlpack_exchange_api__"
CAPSULE_NAME = "dlpack_exchange_api"
FUNCTIONS = ("managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
             "managed_tensor_to_py_object_no_sync", "dltensor_from_py_object_no_sync",
             "current_work_stream")


def sample(target, dtype=None, shape=(2, 3), seed=0):
    """(x, values, reproducer lines) of a small tensor the target makes."""
    dtype = dtype or S.pick_dtypes(target)[0]
    return S.make(target, dtype, shape, seed=seed)


class Table:
    """A usable table of type(x): `info` (from _probe.exchange_api), `ptr` (int), and the
    attribute value held for as long as this object lives (a table may be owned by it)."""

    def __init__(self, x):
        self.type = type(x)
        self.info = _probe.exchange_api(self.type)
        self.keep = getattr(self.type, self.info["attr"], None) if self.info else None
        if self.info and self.info["form"] == "capsule" and self.keep is not None:
            try:  # re-read the pointer from the capsule we hold (it may be a fresh table)
                self.info = _probe.exchange_api(self.type)
            except Exception:  # noqa: BLE001
                pass
        self.ptr = self.info["pointer"] if self.info else 0

    def usable(self):
        i = self.info
        return bool(i and i["on_type"] and i["form"] in ("capsule", "int") and i["pointer"]
                    and i["functions"] is not None)


def table(target, x=None):
    """The target's usable table, or Unsupported with the reason."""
    if x is None:
        x = sample(target)[0]
    t = Table(x)
    if t.info is None:
        raise Unsupported("%s has no C exchange API (%s on the type is absent)" % (target.name, ATTR))
    if not t.usable():
        raise Unsupported("%s has no usable exchange table on its type (attr %s, form %s, on_type %s, version %s)"
                          % (target.name, t.info["attr"], t.info["form"], t.info["on_type"], t.info["version"]))
    return x, t


def table_lines(target, var="api"):
    """Reproducer lines that find the table of type(x) as `var` (its address)."""
    return ["%s = _probe.exchange_api(type(x))['pointer']" % var]


def norm_strides(info):
    """Strides of an inspect() dict, row-major when NULL, ignoring dims of extent <= 1."""
    shape = tuple(info.get("shape") or ())
    strides = info.get("strides")
    if strides is None:
        strides = []
        acc = 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= max(n, 1)
    return tuple(s if n > 1 else None for n, s in zip(shape, strides))


def address(info):
    if info.get("data") is None:
        return None
    return info["data"] + (info.get("byte_offset") or 0)


def run_child(target, lines, timeout=60):
    """Runs the reproducer lines in a fresh interpreter: (returncode, stdout, stderr).
    A negative returncode is the signal that killed it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [HARNESS_DIR, env.get("PYTHONPATH")]))
    code = "\n".join(list(target.repro_setup()) + ["from dlconform import _probe, _ref"] + list(lines))
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "timed out after %ss" % timeout
    return p.returncode, p.stdout, p.stderr


def escaped_cxx(stderr):
    """True when stderr shows a C++ exception reaching std::terminate (XAPI-18)."""
    return "terminate called" in stderr or "std::terminate" in stderr


def describe_exit(rc, stderr):
    if rc is None:
        return stderr
    tail = textwrap.shorten(stderr.strip().splitlines()[-1] if stderr.strip() else "", 160)
    return "exit status %s%s" % (rc, (" (" + tail + ")") if tail else "")
