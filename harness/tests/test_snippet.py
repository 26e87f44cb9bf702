"""dlconform.snippet: what a reproducer asserts, run as a script (exit status and output)."""
import subprocess
import sys

from dlconform import HARNESS_DIR, snippet

HEAD = ("import sys; sys.path.insert(0, %r)\n"
        "from dlconform.snippet import attempt, elements, expect, expect_clean, expect_equal, expect_raises, "
        "expect_returns, finding\n" % HARNESS_DIR)


def run(body):
    p = subprocess.run([sys.executable, "-I", "-c", HEAD + body], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.strip().splitlines()[-1:] or [""]


def test_holding_expectations_exit_0():
    rc, _ = run("expect(1, 'A-01', 'x')\nexpect_equal(b'a', b'a', 'A-01', 'x')\n"
                "e = expect_raises(lambda: int('x'), 'A-01', 'int', ValueError)\n"
                "y = expect_returns(lambda: 3, 'A-01', 'three')\nexpect_clean(e, 'A-01', 'int')\n"
                "print(type(e).__name__, y, attempt(lambda: 1 / 0)[1].__traceback__)")
    assert rc == 0


def test_each_expectation_prints_the_clause_and_what_differed():
    cases = {
        "expect(0, 'CAP-01', 'the name')": "REPRODUCED CAP-01: the name",
        "expect_equal(b'ab', b'ac', 'LAY-03', 'elements')":
            "REPRODUCED LAY-03: elements: got bytes 6162 (2), expected bytes 6163 (2)",
        "expect_raises(lambda: 3, 'DEV-05', 'dl_device', BufferError)":
            "REPRODUCED DEV-05: dl_device returned 3; expected it to raise BufferError",
        "expect_raises(lambda: int('x'), 'DEV-05', 'dl_device', (TypeError, BufferError))":
            "REPRODUCED DEV-05: dl_device raised ValueError: invalid literal for int() with base 10: 'x'; "
            "expected TypeError or BufferError",
        "expect_raises(lambda: (_ for _ in ()).throw(SystemError('x')), 'ERR-01', 'export')":
            "REPRODUCED ERR-01: export raised SystemError (x) (an unclean refusal)",
        "expect_returns(lambda: 1 / 0, 'API-03', 'the import')":
            "REPRODUCED API-03: the import raised ZeroDivisionError: division by zero",
        "finding('STR-10', 'stream=1 accepted')": "REPRODUCED STR-10: stream=1 accepted",
        # a library's object is named, never repr()'d: its repr may read the malformed metadata
        # it was imported from (tvm_ffi's repr of an import with a NULL shape dies)
        "class T:\n    __repr__ = None\nexpect_raises(lambda: T(), 'LAY-09', 'import', BufferError)":
            "REPRODUCED LAY-09: import returned a T object; expected it to raise BufferError",
    }
    for body, line in cases.items():
        assert run(body + "\nprint('not reached')") == (snippet.EXIT_FINDING, [line]), body


def test_unclean_is_the_check_fixtures_rule():
    from dlconform.pytest_plugin import Check

    cases = {SystemError("x"): "SystemError (x)", BufferError("no"): None, None: None,
             RuntimeError("f returned NULL without setting an exception"):
                 "RuntimeError: f returned NULL without setting an exception",
             ValueError("<built-in> returned a result with an exception set"):
                 "ValueError: <built-in> returned a result with an exception set"}
    for exc, why in cases.items():
        assert snippet.unclean(exc) == Check.unclean(exc) == why


def test_elements_reads_strided_memory():
    import ctypes

    buf = (ctypes.c_uint8 * 12)(*range(12))
    d = {"ptr": ctypes.addressof(buf), "shape": (2, 3), "strides": (1, 2), "itemsize": 2}
    assert snippet.elements(d) == bytes([0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11])
    assert snippet.elements(dict(d, shape=(0, 3))) == b""
    assert snippet.elements(dict(d, shape=(), strides=())) == bytes([0, 1])


def test_detach_lets_go_of_what_an_attributeerror_holds():
    """A consumer refusing a bare capsule with getattr(obj, '__dlpack_device__') raises an
    AttributeError whose `obj` is the capsule: kept, it would keep the capsule alive, and its
    deleter would look never called (a false OWN-03 fail seen with numpy 2.x and mpi4py)."""
    import gc

    from dlconform import _ref, snippet

    f = _ref.Forge(shape=(2, 3))
    cap = f.capsule()
    try:
        getattr(cap, "__dlpack_device__")
    except AttributeError as e:
        err = snippet.detach(e)
    del cap
    gc.collect()
    assert err.obj is None and f.deleter_calls == 1
