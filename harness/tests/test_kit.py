"""The kit (dlconform.kit) gives what the C probe and the C reference give.

Checks read capsules and forge them through the kit, in the suite and in their reproducers
alike; the C probe (dlconform._probe) and the C forge (dlconform._ref.Forge) are the reference
here. Each test forges the same metadata in both and compares every answer: the fields of
inspect(), extent(), read_elements() and its errors, consume() and instrument() deleter
accounting, and the forges' own expected_elements() and deleter counts.
"""
import ctypes
import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlconform import _probe, _ref, kit
from dlconform.kit import abi

LAYOUTS = st.fixed_dictionaries({
    "dtype": st.sampled_from([(2, 32, 1), (0, 8, 1), (1, 16, 1), (5, 64, 1), (6, 8, 1), (0, 4, 1), (2, 16, 2),
                              (2, 0, 1), (17, 4, 1)]),
    "shape": st.lists(st.integers(-1, 4), max_size=4).map(tuple),
    "strides": st.none() | st.lists(st.integers(-6, 6), min_size=4, max_size=4).map(tuple),
    "byte_offset": st.sampled_from([0, 4, 8, 3]),
    "versioned": st.booleans(),
    "version": st.sampled_from([(1, 3), (1, 0), (2, 0), (0, 9)]),
    "flags": st.sampled_from([0, 1, 2, 6]),
    "device": st.sampled_from([(1, 0), (2, 0), (13, 1), (12, 0)]),
    "ndim": st.none() | st.integers(-2, 6),
    "shape_null": st.booleans(),
    "data": st.sampled_from(["alloc", "null"]),
})


def _forge_kwargs(layout):
    kw = dict(layout)
    if kw["strides"] is not None:
        kw["strides"] = kw["strides"][:len(kw["shape"])]
    if kw["strides"] is not None and len(kw["strides"]) != len(kw["shape"]):
        kw["strides"] = None
    if not kw["versioned"]:
        kw.pop("version")
        kw.pop("flags")
    if kw["ndim"] is None:
        del kw["ndim"]
    return kw


def _answer(fn, *args):
    """fn(*args), or the exception's class and message."""
    try:
        return fn(*args)
    except Exception as e:  # the answer compared is the exception
        return (type(e).__name__, str(e))


def _without_addresses(info):
    """inspect() without what differs between two forges of the same metadata: addresses."""
    return {k: v for k, v in info.items() if k not in ("pointer", "destructor", "deleter", "manager_ctx", "data")}


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(LAYOUTS)
def test_inspect_extent_and_elements_match_the_probe(layout):
    kw = _forge_kwargs(layout)
    ours, theirs = _answer(lambda: kit.Forge(**kw)), _answer(lambda: _ref.Forge(**kw))
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple), (kw, theirs)
        return
    assert not isinstance(ours, tuple), (kw, ours)
    fill = bytes(range(256)) * 8
    ours, theirs = (kit.Forge(**dict(kw, fill=fill[:ours.buffer_size])),
                    _ref.Forge(**dict(kw, fill=fill[:theirs.buffer_size])))
    assert ours.buffer_size == theirs.buffer_size, kw
    a, b = ours.capsule(), theirs.capsule()
    for probe in (kit, _probe):  # each reader on each forge's capsule
        ia, ib = probe.inspect(a), probe.inspect(b)
        assert _without_addresses(ia) == _without_addresses(ib), (kw, ia, ib)
        assert bool(ia.get("data")) == bool(ib.get("data"))
        assert _answer(probe.extent, a) == _answer(probe.extent, b), kw
        ea, eb = _answer(probe.read_elements, a), _answer(probe.read_elements, b)
        assert ea == eb, (kw, ea, eb)
    assert _without_addresses(kit.inspect(a)) == _without_addresses(_probe.inspect(a))
    assert _answer(kit.extent, a) == _answer(_probe.extent, a), kw
    assert _answer(kit.read_elements, a) == _answer(_probe.read_elements, a), kw
    assert _answer(ours.expected_elements) == _answer(theirs.expected_elements), kw


def test_reading_a_used_or_foreign_capsule_is_refused_alike():
    f = kit.Forge(shape=(2,))
    cap = f.capsule()
    kit.rename(cap, "used_dltensor_versioned")
    assert kit.inspect(cap)["kind"] == _probe.inspect(cap)["kind"] == "used"
    assert _answer(kit.read_elements, cap) == _answer(_probe.read_elements, cap)
    assert _answer(kit.inspect, 3) == _answer(_probe.inspect, 3)
    other = kit.Forge(shape=(2,), capsule_name="something").capsule()
    assert _without_addresses(kit.inspect(other)) == _without_addresses(_probe.inspect(other))
    assert _answer(kit.read_elements, other) == _answer(_probe.read_elements, other)


@pytest.mark.parametrize("forge", [kit.Forge, _ref.Forge])
def test_destructor_and_consume_call_the_deleter_once(forge):
    for versioned in (False, True):
        f = forge(shape=(3,), versioned=versioned)
        cap = f.capsule()
        del cap
        gc.collect()
        assert f.deleter_calls == 1  # CAP-05: an unconsumed capsule's destructor
        cap = f.capsule()
        h = kit.consume(cap)
        assert kit.inspect(cap)["name"].startswith("used_")
        del cap
        gc.collect()
        assert f.deleter_calls == 1  # CAP-06: a used_* capsule's destructor does nothing
        assert h.read_elements() == f.expected_elements()
        assert h.release() is True and h.release() is False
        assert f.deleter_calls == 2
        null = forge(shape=(3,), versioned=versioned, null_deleter=True).capsule()
        assert kit.consume(null).release() is False  # OWN-01: a NULL deleter is skipped


@pytest.mark.parametrize("forge", [kit.Forge, _ref.Forge])
def test_instrument_counts_without_forwarding_a_second_call(forge):
    """OWN-03: a consumer that calls the deleter twice is counted twice; the second call is not
    forwarded, as the C probe's tracker does."""
    for instrument in (kit.instrument, _probe.instrument):
        f = forge(shape=(2,))
        cap = f.capsule()
        t = instrument(cap)
        m = abi.DLManagedTensorVersioned.from_address(kit.inspect(cap)["pointer"])
        address = kit.inspect(cap)["pointer"]
        kit.rename(cap, "used_dltensor_versioned")
        call = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(abi.address(m.deleter))
        call(address)
        call(address)
        assert (t.calls, f.deleter_calls) == (2, 1), instrument
        assert t.original_null is False


def test_forge_memory_outlives_the_forge_while_a_tensor_is_out():
    """The buffer and struct live until the consumer gives the tensor back (probes/ref/forge.c)."""
    f = kit.Forge(shape=(64,), dtype=(1, 8, 1))
    h = kit.consume(f.capsule())
    want = f.expected_elements()
    del f
    gc.collect()
    for _ in range(20):
        kit.Forge(shape=(64,), dtype=(1, 8, 1), fill=b"\xff" * 64)
    assert h.read_elements() == want
    assert h.release() is True


def test_gather_and_elements_match_the_probe():
    buf = (ctypes.c_uint8 * 64)(*range(64))
    at = ctypes.addressof(buf)
    for shape, strides, item in [((2, 3), (3, 1), 2), ((2, 3), (1, 2), 4), ((3,), (-2,), 1), ((0, 2), None, 4),
                                 ((), (), 8)]:
        base = at + 32 if strides and min(strides) < 0 else at
        assert _answer(kit.gather, base, shape, strides, item) == _answer(_probe.gather, base, shape, strides, item)
    assert kit.elements({"ptr": at, "shape": (2, 2), "strides": (1, 2), "itemsize": 1}) == bytes([0, 2, 1, 3])


def test_the_kit_leaves_ctypes_pythonapi_alone():
    """The process under test keeps its own ctypes.pythonapi prototypes (in a fresh interpreter:
    pyref, a library under test, sets them as a user's library would)."""
    import subprocess
    import sys

    code = ("import ctypes\nfrom dlconform import kit\nf = kit.Forge(shape=(2,))\nh = kit.consume(f.capsule())\n"
            "print(kit.inspect(kit.Forge().capsule())['kind'], h.release())\n"
            "for n in ('PyCapsule_New', 'PyCapsule_GetName', 'PyCapsule_GetPointer', 'PyCapsule_SetName'):\n"
            "    fn = getattr(ctypes.pythonapi, n)\n"
            "    assert fn.argtypes is None and fn.restype in (ctypes.c_int, None), n\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, "versioned True\n"), p.stderr


def test_reproduce_passes_the_parameters_a_check_names():
    """kit.reproduce gives a check `target` and `check` when it names them, positional or
    keyword-only, through a wrapper too, and its arguments; nothing else."""
    import functools

    from dlconform.kit.check import _parameters

    def plain(target, check, dtype):
        pass

    def kw_only(check, *, dtype, target=None):
        pass

    @functools.wraps(plain)
    def wrapped(*a, **kw):
        return plain(*a, **kw)

    def local_names(target):
        x = 1
        return x

    assert _parameters(plain) == ["target", "check", "dtype"]
    assert _parameters(kw_only) == ["check", "dtype", "target"]
    assert _parameters(wrapped) == ["target", "check", "dtype"]
    assert _parameters(local_names) == ["target"]
    assert _parameters(functools.partial(plain, 1)) == ["check", "dtype"]
