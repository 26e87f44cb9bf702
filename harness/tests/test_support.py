"""Meta-tests of suites/support: the helpers every suite uses, checked against the reference
(and one of its built-in faults) so that a wrong helper cannot hide a wrong verdict."""
import json
import os
import subprocess
import sys

import pytest

from dlconform import HARNESS_DIR, SUITES_DIR
from dlconform.kit import Check

if SUITES_DIR not in sys.path:
    sys.path.insert(0, SUITES_DIR)

from fakes import have_ref
from support import attempts as tries
from support import dtypes as dty
from support import repros as rp
from support import strategies as hh


needs_ref = pytest.mark.skipif(not have_ref(), reason="dlconform._ref/_probe not built (make build)")


def new_check(levels=None):
    return Check(lambda clause: (levels or {}).get(clause, "MUST"))


@pytest.fixture
def ref_target():
    from dlconform.targets.loader import load

    return load("ref")


@pytest.fixture
def fault():
    """Sets a process-wide fault of _ref for one test; always resets it."""
    from dlconform import _ref

    yield _ref.set_fault
    _ref.set_fault(None)


class Raising:
    """A consumer whose from_dlpack raises `exc`."""

    def __init__(self, exc):
        self.exc = exc

    def from_dlpack(self, obj, **kw):
        raise self.exc


# ---------------------------------------------------------------------------- the refusal rule
def test_clean_refusal_records_pass_and_unclean_ones_fail():
    check = new_check({"ERR-01": "SHOULD"})
    assert check.refusal("LAY-09", BufferError("negative extent"), "shape (-1,)") is True
    assert check.refusal("LAY-09", SystemError("error return without exception set\nmore"), "shape (-2,)") is False
    assert check.refusal("LAY-09", TypeError("f returned NULL without setting an exception"), "ndim -1") is False
    assert check.refusal("ERR-01", SystemError("x"), "max_version='1.0'") is False
    assert check.refusal("ERR-01", SystemError("y"), "stream=0", verdict="fail") is False
    assert check.records == [
        ("LAY-09", "pass", ""),
        ("LAY-09", "fail", "shape (-2,) raised SystemError (error return without exception set)"),
        ("LAY-09", "fail", "ndim -1 raised TypeError: f returned NULL without setting an exception"),
        ("ERR-01", "warn", "max_version='1.0' raised SystemError (x)"),
        ("ERR-01", "fail", "stream=0 raised SystemError (y)"),
    ]


def test_unclean_reads_an_attempt_and_subclasses():
    class Sub(SystemError):
        pass

    att = tries.Attempt(Raising(Sub("boom")), object())
    assert att.refused and isinstance(att.exc, Sub)
    assert Check.unclean(att) == "SystemError (boom)"
    assert Check.unclean(ValueError("a result with an exception set")) == \
        "ValueError: a result with an exception set"
    assert Check.unclean(ValueError("plain")) is None
    assert Check.unclean(None) is None


# ---------------------------------------------------------------------------- Attempt
def test_attempt_keeps_the_exception_without_its_traceback():
    def consumer_frame():
        try:
            raise KeyError("inner")
        except KeyError:
            raise BufferError("outer")

    class Consumer:
        def from_dlpack(self, obj, **kw):
            consumer_frame()

    att = tries.Attempt(Consumer(), object())
    assert att.refused and isinstance(att.exc, BufferError)
    assert att.exc.__traceback__ is None and att.exc.__context__.__traceback__ is None
    assert att.refusal() == "BufferError: outer"
    assert Check.unclean(att) is None


@needs_ref
def test_attempt_on_a_clean_refusal_runs_the_deleter_once(ref_target):
    att = tries.forged(ref_target, dict(dtype=(99, 32, 1), shape=(4,)))
    assert att.refused and att.exc is not None and Check.unclean(att) is None
    assert att.forge_kwargs == {"dtype": (99, 32, 1), "shape": (4,), "strides": (1,)}
    assert att.settle() == 1


@needs_ref
def test_attempt_accounts_a_correct_import(ref_target):
    att = tries.forged(ref_target, dict(shape=(2, 3)))
    assert not att.refused and att.calls() == 0
    got, d = tries.result_elements(ref_target, att.result)
    assert got == att.forge.expected_elements() and tuple(d["shape"]) == (2, 3)
    check = new_check()
    assert tries.deleter_accounting(check, att, att.calls()) == 1
    assert [v for _, v, _ in check.records] == ["pass", "pass"]
    life = tries.Attempt(ref_target, _keeping(shape=(3,))).lifetime()
    assert life["renamed"] and (life["alive"], life["after"]) == (0, 1)
    assert life["names"] == ["used_dltensor_versioned"]


@needs_ref
def test_attempt_counts_a_double_delete(fault):
    from dlconform.targets.ref import RefTarget

    target = RefTarget(fault="consumer_double_delete")  # sets the fault through _ref
    att = tries.forged(target, dict(shape=(4,)))
    alive = att.calls()
    check = new_check()
    assert tries.deleter_accounting(check, att, alive, what="plain: ") == 2
    assert check.records[-1] == ("OWN-03", "fail", "plain: the deleter ran 2 time(s) in all after the result died "
                                                   "(expected exactly 1)")
    plain = {"names": ["used_dltensor"], "renamed": True, "alive": 0, "after": 2}
    assert tries.departures({"names": ["x"], "renamed": False, "alive": 0, "after": 2}, plain) == [
        ("CAP-03", "capsule renamed used_* after import: got ['x'], expected 'used_*' (a plain import: "
                   "['used_dltensor'])")]


def test_ownership_findings_land_on_their_own_clauses():
    """Whichever check counts a deleter or sees a capsule unrenamed, the finding is OWN-03's or
    CAP-03's (the check's own clause only where it asks for the call itself, VER-08)."""
    check = new_check()
    tries.ownership(check, {"names": ["dltensor"], "renamed": False, "alive": 1, "after": 2}, None, "path: ")
    assert [r[:2] for r in check.records] == [("CAP-03", "fail"), ("OWN-03", "fail"), ("OWN-03", "fail")]
    check = new_check()
    tries.ownership(check, {"names": ["x"], "renamed": False, "alive": 0, "after": 2}, None, feeds="invalid")
    assert [r[:2] for r in check.records] == [("CAP-03", "warn"), ("OWN-03", "warn")]
    check = new_check()
    assert not tries.deleter_once(check, 2, "version (2, 0)", calls_clause="VER-08")
    assert check.records == [("OWN-03", "fail", "version (2, 0): the deleter ran 2 time(s), expected 1"),
                             ("VER-08", "pass", "")]
    check = new_check()
    assert not tries.deleter_once(check, 0, "version (2, 0)", calls_clause="VER-08")
    assert [r[:2] for r in check.records] == [("OWN-03", "fail"), ("VER-08", "fail")]
    check = new_check()
    assert tries.deleter_once(check, 0, "no capsule made", expected=0, calls_clause="VER-08")
    assert check.records == [("OWN-03", "pass", ""), ("VER-08", "pass", "")]


@needs_ref
def test_expect_import_judges_values_and_leaves_a_refusal_alone(ref_target):
    from dlconform.kit import Forge

    check = new_check()
    att = tries.expect_import(check, ref_target, "VER-05", Forge(versioned=True, version=(1, 0), shape=(2, 3)), "1.0")
    assert att.exc is None and att.result is None and check.records == [("VER-05", "pass", "")]
    forge = Forge(versioned=True, version=(2, 0), shape=(2, 3))
    att = tries.expect_import(check, ref_target, "VER-08", forge, "2.0")
    assert att.exc is not None and len(check.records) == 1
    att.settle()
    assert forge.deleter_calls == 1


class _Consumer:
    """from_dlpack asks for a versioned capsule and, with `retry`, asks again with stream alone
    when the producer raises TypeError."""

    def __init__(self, retry):
        self.retry = retry

    def from_dlpack(self, p):
        try:
            return p.__dlpack__(stream=None, max_version=(1, 3))
        except TypeError:
            if not self.retry:
                raise
            return p.__dlpack__(stream=None)


@needs_ref
def test_skipped_retry_reads_the_producers_calls():
    from dlconform.kit import RecordingProducer, forges

    for retry in (False, True):
        att = tries.Attempt(_Consumer(retry), RecordingProducer(forges(shape=(2,)), legacy_only=True))
        assert tries.new_keywords_first(att.producer.calls)
        assert tries.skipped_retry(att) is not retry


@needs_ref
def test_must_refuse_records_the_refusal_and_the_count(ref_target):
    check = new_check()
    tries.must_refuse(check, ref_target, dict(shape=(-1,), buffer_size=64), "LAY-09", "shape (-1,)")
    assert check.records == [("LAY-09", "pass", ""), ("OWN-03", "pass", "")]


def _keeping(**forge_kwargs):
    from dlconform.kit import RecordingProducer, forges

    return RecordingProducer(forges(**forge_kwargs), keep=True)


@needs_ref
def test_recording_producer_keeps_each_capsule_once():
    from dlconform import _probe
    from dlconform.kit import CapsuleProducer, RecordingProducer, forges

    p = RecordingProducer(forges(shape=(2,)), keep=True)
    caps = [p.__dlpack__(), p.__dlpack__(max_version=(1, 3))]
    assert [c is k for c, k in zip(caps, p.capsules)] == [True, True]
    assert [_probe.inspect(c)["kind"] for c in p.capsules] == ["legacy", "versioned"]
    p._hand_out(caps[0])
    assert len(p.capsules) == 2
    plain = RecordingProducer(forges(shape=(2,)))
    plain.__dlpack__()
    assert plain.capsules == []
    fixed = CapsuleProducer(caps[0])
    assert fixed.__dlpack__(stream=None, bogus=1) is caps[0]
    assert fixed.calls == [{"stream": None, "bogus": 1}] and fixed.events == ["__dlpack__"]


# ---------------------------------------------------------------------------- a case in a child
def child_case(target, check, signal_name=None):
    """A case that records a finding, or dies by a signal."""
    import os
    import signal

    if signal_name:
        os.kill(os.getpid(), getattr(signal, signal_name))
    check.record("LAY-09", "warn", "from the child")


def test_run_case_runs_the_cases_reproducer_in_a_child():
    from dlconform.targets.pyref_target import PyrefTarget

    t, check = PyrefTarget(), new_check()
    t.spec = "pyref"
    run = rp.run_case(check, t, child_case)
    assert (run.rc, run.findings, run.died) == (1, [("LAY-09", "from the child")], False)
    assert check.case == (child_case, {}, {})
    run = rp.run_case(check, t, child_case, {"signal_name": "SIGABRT"}, env={"X_CASE": "1"})
    assert run.died and run.rc == -6 and check.case == (child_case, {"signal_name": "SIGABRT"}, {"X_CASE": "1"})
    assert run.describe().startswith("exit status -6")


# ---------------------------------------------------------------------------- hypothesis glue
def explored(target, check, n):
    """A case: odd n warns; n >= 10 fails."""
    if n % 2:
        check.record("LAY-11", "warn", "odd")
    if n >= 10:
        check.record("LAY-09", "fail", "n=%d" % n)


def test_explore_shrinks_and_records_a_finding():
    from hypothesis import strategies as st

    check = new_check()
    hh.explore(check, explored, None, st.fixed_dictionaries({"n": st.integers(0, 1000)}), max_examples=20, seed=0)
    assert ("LAY-09", "fail", "n=10") in check.records
    assert check.case == (explored, {"n": 10}, {})


SEEN = []


def counted(target, check, shape, strides, byte_offset, buffer_size, itemsize):
    """A case that records the view it was given and finds nothing."""
    SEEN.append((shape, strides, byte_offset))


def _drawn(max_examples=16, seed=0x1234):
    SEEN.clear()
    views = hh.views(itemsize=4, min_ndim=0, max_ndim=3, allow_negative=True).map(lambda v: v._asdict())
    hh.explore(new_check(), counted, None, views, max_examples=max_examples, seed=seed)
    return list(SEEN)


def test_the_run_depth_reaches_every_exploration(monkeypatch):
    """`dlconform run --examples N --seed S` (DLCONFORM_EXAMPLES, DLCONFORM_SEED in the checks'
    environment): an exploration draws N examples instead of its own bound, and S draws others;
    without them it draws its own bound, the same ones every run."""
    monkeypatch.delenv(hh.EXAMPLES_ENV, raising=False)
    monkeypatch.delenv(hh.SEED_ENV, raising=False)
    default = _drawn()
    assert 0 < len(default) <= 16 and _drawn() == default
    monkeypatch.setenv(hh.EXAMPLES_ENV, "80")
    deeper = _drawn()
    assert len(deeper) > 40 and len(set(deeper)) > len(set(default))
    monkeypatch.setenv(hh.EXAMPLES_ENV, "16")
    monkeypatch.setenv(hh.SEED_ENV, "7")
    elsewhere = _drawn()
    assert elsewhere != default and _drawn() == elsewhere
    monkeypatch.setenv(hh.EXAMPLES_ENV, "0")
    with pytest.raises(ValueError, match="at least 1"):
        _drawn()


# ---------------------------------------------------------------------------- the dtype table
@needs_ref
def test_dtype_table_agrees_with_the_reference():
    from dlconform import _ref
    from dlconform.targets.ref import ref_dtypes

    for name in ref_dtypes(_ref):
        t = _ref.Tensor(name, (3,))
        assert tuple(t.dtype) == dty.DTYPES[name], name
        assert t.itemsize == dty.itemsize(name), name
    assert dty.row_major_strides((2, 0, 3)) == (3, 3, 1) and dty.numel((2, 0, 3)) == 0


def test_element_values():
    assert dty.safe_values("float32", (2,), seed=1) == bytes(((i + 1) * 37 + 11) & 0x3F for i in range(8))
    assert dty.distinct_values("bool", (4,)) == b"\x00\x01\x00\x00"
    assert max(dty.safe_values("float64", (8,))) < 0x40 and len(dty.distinct_values("int16", (3,), 2)) == 6


# ---------------------------------------------------------------------------- process-wide state
_PYTHONAPI_PROBE = r"""
import ctypes, glob, importlib, json, os, sys
sys.path.insert(0, %(suites)r)
names = ["PyCapsule_GetName", "PyCapsule_GetPointer", "Py_IncRef", "PyObject_GetBuffer", "PyBuffer_Release"]
before = {n: (getattr(ctypes.pythonapi, n).restype, getattr(ctypes.pythonapi, n).argtypes) for n in names}
import support
for m in ("attempts", "capsules", "dtypes", "exchange", "readings", "repros", "strategies", "tensors"):
    importlib.import_module("support." + m)
for path in sorted(glob.glob(os.path.join(%(suites)r, "test_*.py"))):
    importlib.import_module(os.path.basename(path)[:-3])
from dlconform.targets import generic
generic.buffer_info(bytearray(4))
from support import capsules
capsules.name_pointer(__import__("dlconform._ref", fromlist=["_ref"]).Forge().capsule())
changed = [n for n in names
           if (getattr(ctypes.pythonapi, n).restype, getattr(ctypes.pythonapi, n).argtypes) != before[n]]
odd = [n for n, f in vars(ctypes.pythonapi).items() if isinstance(f, ctypes._CFuncPtr)
       and (f.restype is not ctypes.c_int or f.argtypes is not None)]
print(json.dumps({"changed": changed, "odd": odd}))
"""


@needs_ref
def test_support_and_suites_leave_ctypes_pythonapi_alone():
    """ctypes.pythonapi's function objects are shared by the process: importing the helpers and
    every suite, and using the helpers that call the C API, sets no prototype on them."""
    proc = subprocess.run([sys.executable, "-c", _PYTHONAPI_PROBE % {"suites": SUITES_DIR}], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=HARNESS_DIR))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {"changed": [], "odd": []}


def test_static_name_verdict_reads_lifetime():
    """CAP-09 (the catalogue's reading): names in a shared object pass; one never-freed string
    shared by every capsule (a pure-Python library's bytes constant) passes; a string made per
    capsule fails."""
    import ctypes

    from support import readings as rd

    in_file = ctypes.cast(ctypes.pythonapi.PyCapsule_New, ctypes.c_void_p).value  # libpython's text
    shared = ctypes.cast(ctypes.c_char_p(b"dltensor"), ctypes.c_void_p).value
    assert rd.static_name_verdict([in_file, in_file])[0] == "pass"
    verdict, message = rd.static_name_verdict([shared, shared])
    assert verdict == "pass" and "one shared name string" in message
    per_capsule = [ctypes.cast(ctypes.create_string_buffer(b"dltensor"), ctypes.c_void_p).value for _ in range(2)]
    assert rd.static_name_verdict(per_capsule)[0] == "fail"


# ---- routes: every way a forged tensor reaches a consumer ---------------------------------
@needs_ref
@pytest.mark.parametrize("route", ["dlpack", "unasked", "capsule", "xapi"])
def test_routes_import_once_through_ref(ref_target, route):
    """Each route imports a plain tensor into ref, and the deleter runs once after."""
    from support import routes as rt

    att = rt.attempt(ref_target, route, {"shape": (2, 3)})
    assert att.exc is None, att.refusal()
    assert rt.offered(ref_target, route) == (True, "")
    assert (route == "xapi") == rt.table_used(att)
    life = att.lifetime()
    assert life["names"] == ["used_dltensor" if route == "unasked" else "used_dltensor_versioned"]
    assert life["after"] == 1


@needs_ref
def test_routes_capsule_route_hands_in_the_capsule_itself(ref_target):
    from support import routes as rt

    att = rt.attempt(ref_target, "capsule", {"shape": (3,)}, versioned=False)
    assert att.producer.calls == [{}]
    assert att.lifetime()["names"] == ["used_dltensor"]


@needs_ref
def test_routes_offered_says_why_not():
    from support import routes as rt

    class NoCapsules:
        name = "no-capsules"

        def from_dlpack(self, obj, **kw):
            if not hasattr(obj, "__dlpack__"):
                raise TypeError("not a producer")
            return obj.__dlpack__()

        def describe(self, y):
            return {}

    ok, why = rt.offered(NoCapsules(), "capsule")
    assert not ok and "TypeError: not a producer" in why


# ---- seeds: the fuzzer's shared inputs, by the suite's rules ------------------------------
@needs_ref
def test_seeds_judge_ref_clean_and_a_fault(ref_target, fault):
    """ref breaks no rule on any shared seed; consumer_no_rename breaks CAP-03 on a plain one."""
    from support import seeds as sd

    found = {name: sd.judge(ref_target, data) for name, data in sd.seeds()
             if not sd.offers_table_checks(sd.R.apply_offer(sd.R.decode(data)))}
    assert len(found) >= 15 and not any(found.values()), found
    fault("consumer_no_rename")
    plain = dict(sd.seeds())["legacy-float32-2x3"]
    assert [c for c, v, _ in sd.judge(ref_target, plain) if v != "pass"] == ["CAP-03"]


def test_a_result_dlconform_cannot_read_is_no_finding_of_the_consumer(ref_target, monkeypatch):
    """When the adapter cannot read a consumer's result (kit.Unsupported from describe: the
    generic target over a library whose own export is broken), the seed's record is
    unsupported: dlconform's limit, never a LAY-11 warn against the consumer."""
    from dlconform import kit
    from support import seeds as sd

    def unreadable(y):
        raise kit.Unsupported("cannot read this library's results")

    monkeypatch.setattr(ref_target, "describe", unreadable)
    plain = dict(sd.seeds())["legacy-float32-2x3"]
    verdicts = {(c, v) for c, v, _ in sd.judge(ref_target, plain)}
    assert ("LAY-11", "unsupported") in verdicts and not [v for _, v in verdicts if v in ("warn", "fail")], verdicts


def test_a_result_on_a_device_the_host_cannot_read_is_never_read():
    """A consumer that moved a CPU import to its GPU (API-05's finding): its result's address is
    device memory, and reading it from the host would be dlconform's segfault, charged to the
    library as a crash. result_elements and kit.elements say Unsupported instead (the address
    here is 16, which the host cannot read either: reaching gather would kill this test)."""
    from dlconform import kit

    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)

    class Target:
        def describe(self, y):
            return {"ptr": 16, "shape": (2,), "strides": (1,), "itemsize": 4}

    with pytest.raises(kit.Unsupported, match=r"device \(2, 0\), which the host cannot read"):
        tries.result_elements(Target(), OnGpu())
    with pytest.raises(kit.Unsupported):
        kit.elements({"ptr": 16, "shape": (2,), "strides": (1,), "itemsize": 4, "device": (2, 0)})
    assert kit.elements({"ptr": 16, "shape": (0,), "strides": (1,), "itemsize": 4, "device": (1, 0)}) == b""


# ---- helpers that record one rule for several suites ------------------------------------
@needs_ref
def test_zero_copy_passes_a_view_and_grades_a_copy(ref_target):
    check = new_check()
    tries.zero_copy(check, ref_target, 0x1000, 0x1000, "a view")
    tries.zero_copy(check, ref_target, 0x2000, 0x1000, "a copy")  # ref's plain import views: fail
    assert [v for _, v, _ in check.records] == ["pass", "fail"]
    assert check.records[1][2].startswith("a copy: the result is at 0x2000, the producer's memory at 0x1000")


def test_require_keywords_names_the_missing_ones():
    from dlconform.kit import Unsupported

    class Consumer:
        def consumer_keywords(self):
            return ("copy",)

    tries.require_keywords(Consumer(), "copy")
    with pytest.raises(Unsupported, match="no device keyword"):
        tries.require_keywords(Consumer(), "copy", "device")


@needs_ref
def test_used_capsule_refused_counts_the_owners_release(ref_target):
    from dlconform.targets.ref import RefTarget

    check = new_check()
    tries.used_capsule_refused(check, ref_target, True, "versioned", "OWN-03", shape=(2, 3))
    assert check.records == [("CAP-04", "pass", ""), ("OWN-03", "pass", ""), ("OWN-03", "pass", "")]
    check = new_check()
    tries.used_capsule_refused(check, RefTarget(fault="consumer_accepts_used"), False, "legacy", "CAP-04",
                               shape=(2, 3))
    assert [(c, v) for c, v, _ in check.records] == [("CAP-04", "fail")]


@needs_ref
def test_record_layout_records_each_finding_of_its_clauses(ref_target):
    from dlconform import kit
    from support import tensors as tns

    x, _ = tns.make(ref_target, "float32", (2, 3))
    info = dict(kit.inspect(x.__dlpack__()))
    check = new_check()
    assert tns.record_layout(check, ref_target, x, info, 4) is False and check.records == []
    info["strides"] = (12, 4)  # strides in bytes
    assert tns.record_layout(check, ref_target, x, info, 4, ("LAY-03",)) is False and check.records == []
    assert tns.record_layout(check, ref_target, x, info, 4) is True
    assert [(c, v) for c, v, _ in check.records] == [("LAY-05", "fail")]


def test_unknown_value_verdict_reads_the_result_device():
    from support import readings as rd

    class Result:
        def __init__(self, device):
            self.device = device

        def __dlpack_device__(self):
            return self.device

    class Att:
        def __init__(self, device):
            self.result = Result(device)

    assert rd.unknown_value_verdict(None, Att((99, 0)), "device 99", device=(99, 0))[0] == "warn"
    verdict, message = rd.unknown_value_verdict(None, Att((1, 0)), "device 99", device=(99, 0))
    assert verdict == "fail" and message.startswith("device 99: ")


@needs_ref
def test_views_leaves_out_the_ops_a_target_lacks(ref_target):
    from support import tensors as tns

    class NoFlip:
        """ref, whose flip raises."""

        def __getattr__(self, name):
            return getattr(ref_target, name)

        def flip(self, x, dim):
            raise NotImplementedError("no negative strides")

    x, _ = tns.make(ref_target, "float32", (2, 3))
    ops = (("x.T", ("transpose", (1, 0))), ("flip(x, 0)", ("flip", 0)))
    assert [label for label, _ in tns.views(ref_target, x, ops)] == ["x.T", "flip(x, 0)"]
    assert [label for label, _ in tns.views(NoFlip(), x, ops)] == ["x.T"]


def test_seed_refusal_class_is_not_judged_for_a_device_this_machine_has(monkeypatch):
    """A seed naming CUDA over host memory, refused with a CUDA error (torch on a GPU machine
    copying from "device" memory): CPY-08's BufferError rule holds where no CUDA device exists,
    and is not applied where one does (dlconform.fuzz.devices, as the fuzz oracles do)."""
    from dlconform.fuzz import devices
    from support import seedrules

    facts = {"kwargs": {"device": "cpu"}, "device": (2, 0), "clause": "DEV-07", "old_producer": False,
             "versioned": False, "device_alone": True, "control": None, "reasons": []}
    calls = [{"stream": None, "dl_device": (1, 0)}]
    exc = RuntimeError("CUDA error: invalid argument")
    monkeypatch.setattr(devices, "_found", frozenset())
    assert [r[:2] for r in seedrules.refusal_rules(facts, exc, calls, None)] == [("CPY-08", "fail")]
    monkeypatch.setattr(devices, "_found", frozenset({devices.CUDA}))
    assert not [r for r in seedrules.refusal_rules(facts, exc, calls, None) if r[0] in ("CPY-08", "DEV-07")]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")  # the plugin registers them in the suites
def test_marks_are_the_plugins_clause_role_and_feeds():
    """@producer/@consumer set pytest's own marks, read back as the plugin reads them."""
    from dlconform.pytest_plugin import item_clauses, item_feeds, item_role
    from support.marks import consumer, producer

    class Item:
        def __init__(self, fn):
            self.marks, self.nodeid = list(reversed(fn.pytestmark)), fn.__name__

        def iter_markers(self, name):
            return [m for m in self.marks if m.name == name]

        def get_closest_marker(self, name):
            return next(iter(self.iter_markers(name)), None)

    @producer("CAP-01", "CAP-02")
    def a():
        pass

    @consumer("LAY-10", feeds="invalid")
    def b():
        pass

    assert (item_clauses(Item(a)), item_role(Item(a)), item_feeds(Item(a))) == (["CAP-01", "CAP-02"], "producer",
                                                                               "valid")
    assert (item_clauses(Item(b)), item_role(Item(b)), item_feeds(Item(b))) == (["LAY-10"], "consumer", "invalid")


def test_described_readonly_is_none_for_an_import_the_target_cannot_describe():
    """FLG-02's import way on a device target whose imports have no describe() (cupy, jax): left
    out (None), not an unexpected NotImplementedError charged to the producer."""
    class DeviceOnly:
        def describe(self, y):
            raise NotImplementedError("no describe() for device arrays")

    class Host:
        def describe(self, y):
            return {"readonly": 1}

    assert tries.described_readonly(DeviceOnly(), object()) is None
    assert tries.described_readonly(Host(), object()) is True


def test_copy_values_leave_a_shared_layout_bug_to_the_layout_checks():
    """The values of a copy (CPY-01, FLG-04): a copy that reads wrong where the plain export reads
    right fails; one that reads as wrong as the plain export (a layout both describe alike, such
    as strides in bytes: LAY-05's) or cannot be read at all is unsupported, not the copy's fail."""
    from dlconform import kit
    from support import readings as rd

    right, wrong = bytes(range(8)), bytes(range(8, 16))

    def cap(fill):
        return kit.Forge(dtype=(1, 8, 1), shape=(8,), fill=fill).capsule()

    check = new_check()
    rd.copy_values(check, "CPY-01", cap(wrong), right, "copy", plain=lambda: cap(right))
    rd.copy_values(check, "CPY-01", cap(wrong), right, "copy", plain=lambda: cap(wrong))
    rd.copy_values(check, "CPY-01", cap(right), right, "copy", plain=lambda: cap(wrong))
    rd.copy_values(check, "CPY-01", kit.Forge(dtype=(1, 8, 1), shape=(8,), data="null").capsule(), right, "copy")
    assert [v for _, v, _ in check.records] == ["fail", "unsupported", "pass", "unsupported"], check.records
