"""STR: the stream keyword on devices without streams (producer side, CPU)."""
import os
import subprocess

import pytest

from dlconform import REPO_DIR, kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import imports as imp
from support import readings as rd
from support import tensors as tns
from support.marks import consumer, producer

CUDA_PROBE = os.path.join(REPO_DIR, "build", "cuda", "stream_probe")


def _no_stream_device_reason():
    """Why the producer-side stream checks cannot run for a target without a stream device:
    the answer of probes/cuda's stream_probe when `make cuda` built it, else that it is absent."""
    if os.access(CUDA_PROBE, os.X_OK):
        try:
            p = subprocess.run([CUDA_PROBE], capture_output=True, text=True, timeout=60)
            said = (p.stdout.strip().splitlines() or ["exit status %d" % p.returncode])[-1]
        except (OSError, subprocess.TimeoutExpired) as e:
            said = "the probe did not run (%s)" % e
    else:
        said = "probes/cuda not built (make cuda needs nvcc)"
    return ("needs a GPU or another device with streams; the target offers none here (%s)" % said)


def _stream_calls(p):
    """[(stream value or None when absent, dl_device as a tuple or None)] of a recording
    producer's calls."""
    return [(c.get("stream"), None if c.get("dl_device") is None else tuple(int(v) for v in c.get("dl_device")))
            for c in p.calls]


def _streams_passed(target, devices):
    """(device type, label, where, stream, dl_device) of each __dlpack__ call the consumer makes
    on a StreamDeviceProducer of each (device type, label) of `devices`, which records the calls,
    then refuses; from_dlpack is called plain and, where it takes the keyword, with device='cpu'."""
    variants = [{}] + ([{"device": imp.host(target)}] if "device" in target.consumer_keywords() else [])
    for dev_type, label in devices:
        for kw in variants:
            p = kit.StreamDeviceProducer((dev_type, 0))
            tries.Attempt(target, p, **kw)
            where = "%s producer, from_dlpack(%s)" % (label, ", ".join("%s=%r" % i for i in kw.items()))
            for stream, device_tuple in _stream_calls(p):
                yield dev_type, label, where, stream, device_tuple


def _cpu_tensor(target, check):
    """A float32 (4,) tensor of the target, or None when the target's tensors are not on the
    CPU (STR-10 is then recorded skip)."""
    x, _ = tns.make(target, "float32", (4,))
    if tuple(int(v) for v in x.__dlpack_device__())[0] != 1:
        check.record("STR-10", "skip", "the target's tensors are not on the CPU")
        return None
    return x


@producer("STR-10")
def test_cpu_producer_accepts_stream_none(target, check):
    """On the CPU, stream=None is the one valid stream: the export must succeed."""
    x = _cpu_tensor(target, check)
    if x is None:
        return
    cap, err = kit.attempt(lambda: x.__dlpack__(stream=None))
    check.that(err is None, "STR-10", "stream=None was rejected: %s" % (tries.describe_exc(err) if err else ""))
    del cap


@producer("STR-10", feeds="argument")
def test_cpu_producer_refuses_int_streams(target, check):
    """On the CPU only stream=None is valid: STR-10's words say the producer refuses an int stream,
    so accepting 1 or 2 is STR-10's breach; -1 asks for no synchronisation on any device, and the
    spec does not say which of its two sentences wins there: accepting it is a warn."""
    x = _cpu_tensor(target, check)
    if x is None:
        return
    for stream in (1, 2, -1):
        cap, err = kit.attempt(lambda: x.__dlpack__(stream=stream))
        if cap is not None:
            if stream == -1:
                check.accepted("STR-10", "a CPU tensor exported with stream=-1; only None is valid on the CPU, but -1 "
                               "asks for no synchronisation, which the spec defines for every device")
            else:
                check.must_refuse("STR-10", "a CPU tensor exported with stream=%d" % stream,
                                  rd.REFUSAL_RULES["STR-10"])
            return
        check.refusal("STR-10", err, "stream=%d" % stream)


@producer("STR-02", feeds="argument")
def test_stream_of_wrong_type_is_rejected(target, check):
    """A stream that is not an int (or None): STR-02's words make it an error, so a clean refusal
    passes and accepting it is STR-02's breach."""
    x, _ = tns.make(target, "float32", (4,))
    for stream in ("1", 1.5, object()):
        cap, err = kit.attempt(lambda: x.__dlpack__(stream=stream))
        if cap is not None:
            check.must_refuse("STR-02", "stream=%r (%s) was accepted" % (stream, type(stream).__name__),
                              rd.REFUSAL_RULES["STR-02"])
            kit.inspect(cap)
        elif err is not None:
            check.refusal("STR-02", err, "stream=%r" % (stream,))


# ---------------------------------------------------------------------------- producer, stream device
# The producer side of STR-01..12 needs a device with streams. `target.stream_device()` gives
# one (ref: a virtual device on kDLExtDev with software streams, probes/ref/vstream.c) or None.
# Its log shows what the producer ordered: ("wait", consumer stream, producer stream),
# ("sync", producer stream), ("copy", stream or 0 for the host), ("destroy", stream).
def _on_stream_device(target, new_stream=False):
    """(the target's stream device, a stream handle made for the check or None, a float32 (2, 3)
    tensor on the device), made in that order; the check is skipped when the target has no
    stream device."""
    dev = target.stream_device()
    if dev is None:
        pytest.skip(_no_stream_device_reason())
    if getattr(dev, "kind", None) == "cuda":
        pytest.skip("the target's stream device is CUDA, observed by test_cuda_stream.py; these checks read a "
                    "device's log of ordering decisions")
    handle = dev.new_stream() if new_stream else None
    return dev, handle, dev.make("float32", (2, 3), dty.safe_values("float32", (2, 3)))


@producer("STR-01", "STR-04", "STR-05", "STR-06", "STR-07")
def test_export_waits_on_the_consumer_stream(target, check):
    """Every stream other than -1 makes the consumer's stream wait on the producer's work
    before __dlpack__ returns: None and 1 the legacy default stream, 2 the per-thread default
    stream, a handle > 2 that very stream."""
    dev, handle, x = _on_stream_device(target, new_stream=True)
    own = dev.producer_stream(x)
    dev.events()
    cases = ((None, dev.LEGACY, "STR-04"), (1, dev.LEGACY, "STR-05"), (2, dev.PER_THREAD, "STR-06"),
             (handle, handle, "STR-07"))
    try:
        for stream, waits_on, clause in cases:
            cap = x.__dlpack__(stream=stream, max_version=pycap.SUITE_VERSION)
            events = dev.events()
            waits = [e for e in events if e[0] == "wait"]
            check.that(any(e[1] == waits_on for e in waits), "STR-01",
                       "stream=%r: no wait of the consumer's stream %d before __dlpack__ returned (log %r)"
                       % (stream, waits_on, events))
            check.that(waits and all(e[1:] == (waits_on, own) for e in waits), clause,
                       "stream=%r: expected one wait of stream %d on the producer's stream %d, log %r"
                       % (stream, waits_on, own, events))
            check.equal(tuple(pycap.fields(cap)["device"]), dev.device, "STR-01", "device of the export")
    finally:
        dev.destroy_stream(handle)


@producer("STR-03")
def test_stream_minus_one_does_not_synchronise(target, check):
    """stream=-1: the producer must neither wait nor synchronise."""
    dev, _, x = _on_stream_device(target)
    dev.events()
    cap = x.__dlpack__(stream=-1, max_version=pycap.SUITE_VERSION)
    check.equal(dev.events(), [], "STR-03", "ordering events after stream=-1")
    del cap


@producer("STR-08", feeds="argument")
def test_stream_zero_rejected_by_stream_producer(target, check):
    """stream=0 is ambiguous: consumers must not pass it and producers should reject it."""
    dev, _, x = _on_stream_device(target)
    cap, e = kit.attempt(lambda: x.__dlpack__(stream=0, max_version=pycap.SUITE_VERSION))
    if e is not None:  # any clean refusal is what the clause asks
        check.refusal("STR-08", e, "stream=0", verdict="fail")
        return
    del cap
    dev.events()
    check.accepted("STR-08", "stream=0 was accepted; the array API says producers should reject it")


@producer("STR-11")
def test_consumer_stream_stays_the_consumers(target, check):
    """The stream stays owned by the consumer: the producer never destroys it, neither in
    __dlpack__ nor when the capsule or the tensor dies."""
    dev, handle, x = _on_stream_device(target, new_stream=True)
    cap = x.__dlpack__(stream=handle, max_version=pycap.SUITE_VERSION)
    check.that(dev.alive(handle), "STR-11", "the consumer's stream died in __dlpack__ (log %r)" % dev.events())
    del cap, x
    tries.settle()
    if check.that(dev.alive(handle), "STR-11", "the consumer's stream died with the capsule or the tensor"):
        dev.destroy_stream(handle)
    dev.events()


@producer("STR-12", "CPY-05")
def test_dl_device_cpu_synchronises_and_copies(target, check):
    """dl_device=(kDLCPU, 0) from a stream device: the producer synchronises before the host
    copy (STR-12), the copy carries IS_COPIED, and copy=False must be BufferError (CPY-05)."""
    dev, _, x = _on_stream_device(target)
    own = dev.producer_stream(x)
    dev.events()
    cap = x.__dlpack__(max_version=pycap.SUITE_VERSION, dl_device=(1, 0))
    events = dev.events()
    info = pycap.fields(cap)
    check.equal(tuple(info["device"]), (1, 0), "STR-12", "device of the dl_device=(1, 0) export")
    syncs = [i for i, e in enumerate(events) if e == ("sync", own)]
    copies = [i for i, e in enumerate(events) if e[0] == "copy"]
    check.that(syncs and (not copies or syncs[0] < copies[0]), "STR-12",
               "no synchronisation of the producer's stream %d before the host copy (log %r)" % (own, events))
    check.equal(kit.read_elements(cap), dty.safe_values("float32", (2, 3)), "STR-12", "values of the host copy")
    check.that((info.get("flags") or 0) & pycap.FLAG_IS_COPIED, "STR-12", "the host copy lacks IS_COPIED (FLG-04)")
    try:
        cap2 = x.__dlpack__(max_version=pycap.SUITE_VERSION, dl_device=(1, 0), copy=False)
    except BufferError:
        check.record("CPY-05", "pass")
    except Exception as e:  # noqa: BLE001
        check.record("CPY-05", "fail", "dl_device=(1, 0), copy=False raised %s, not BufferError"
                     % tries.describe_exc(e))
    else:
        check.record("CPY-05", "fail", "dl_device=(1, 0) with copy=False was exported (device %r, flags %r)"
                     % (kit.inspect(cap2)["device"], kit.inspect(cap2).get("flags")))
    dev.events()


@producer("CPY-04")
def test_copy_runs_on_the_consumer_stream(target, check):
    """copy=True with a consumer stream: the copy runs on that stream."""
    dev, handle, x = _on_stream_device(target, new_stream=True)
    dev.events()
    try:
        cap = x.__dlpack__(stream=handle, max_version=pycap.SUITE_VERSION, copy=True)
        events = dev.events()
        copies = [e for e in events if e[0] == "copy"]
        check.that(copies and all(e[1] == handle for e in copies), "CPY-04",
                   "the copy did not run on the consumer's stream %d (log %r)" % (handle, events))
        check.that((pycap.fields(cap).get("flags") or 0) & pycap.FLAG_IS_COPIED, "CPY-04", "the copy lacks IS_COPIED")
    finally:
        dev.destroy_stream(handle)


# ---------------------------------------------------------------------------- consumer
@consumer("STR-10")
def test_consumer_passes_stream_none_to_cpu(target, check):
    """A CPU producer gets stream=None (or no stream keyword) from the consumer."""
    p = kit.RecordingProducer(kit.forges(shape=(2, 3)), keep=True)
    att = tries.Attempt(target, p)
    att.drop_capsules()
    if not p.calls:
        raise kit.Unsupported("the consumer never called __dlpack__ (%s)"
                          % (tries.describe_exc(att.exc) if att.exc else "no call"))
    for stream, _ in _stream_calls(p):
        check.that(stream is None, "STR-10", "the consumer passed stream=%r to a CPU producer" % (stream,))
    att.result = None


@consumer("STR-08", "STR-09", "STR-12", "STR-14")
def test_consumer_stream_keywords_for_stream_devices(target, check):
    """A producer claiming CUDA, ROCm or oneAPI memory records what the consumer passes, then
    refuses with BufferError: no 0 for CUDA (STR-08), no 1 or 2 for ROCm (STR-09), None with
    dl_device=(1, 0) (STR-12), and preferably 1 (CUDA) / 0 (ROCm) over None (STR-14)."""
    for dev_type, label, where, stream, device_tuple in _streams_passed(target, ((2, "CUDA"), (10, "ROCm"),
                                                                                 (14, "oneAPI"))):
        if dev_type == 2:
            check.that(stream != 0, "STR-08", "%s: the consumer passed stream=0" % where)
        if dev_type == 10:
            check.that(stream not in (1, 2), "STR-09", "%s: the consumer passed stream=%r, which ROCm "
                       "does not support" % (where, stream))
        if device_tuple == (1, 0):
            check.that(stream is None, "STR-12", "%s: dl_device=(1, 0) with stream=%r; for kDLCPU "
                       "the stream must be None" % (where, stream))
        elif dev_type in (2, 10):
            want = 1 if dev_type == 2 else 0
            if stream is None:
                check.warn("STR-14", "%s: the consumer passed stream=None; STR-14 (SHOULD) recommends "
                           "%d for the legacy default stream (a consumer that cannot use %s memory "
                           "should refuse it after __dlpack_device__ instead, API-04)" % (where, want, label))
            else:
                check.record("STR-14", "pass")
    for clause in ("STR-08", "STR-09", "STR-12", "STR-14"):
        if not any(c == clause for c, _, _ in check.records):
            # the consumer never asked such a producer for this case: nothing it passed breaks
            # the clause (a consumer may refuse foreign devices after __dlpack_device__)
            check.record(clause, "pass")


#: device types with streams or queues beyond CUDA and ROCm, and host memory of stream APIs:
#: CUDAHost, OpenCL, Vulkan, Metal, VPI, ROCMHost, ExtDev, CUDAManaged, oneAPI, WebGPU,
#: Hexagon, MAIA, Trn
OTHER_STREAM_DEVICES = ((3, "CUDAHost"), (4, "OpenCL"), (7, "Vulkan"), (8, "Metal"), (9, "VPI"), (11, "ROCMHost"),
                        (12, "ExtDev"), (13, "CUDAManaged"), (14, "oneAPI"), (15, "WebGPU"), (16, "Hexagon"),
                        (17, "MAIA"), (18, "Trn"))


@consumer("STR-15", "STR-12", feeds="valid")
def test_consumer_stream_for_other_stream_devices(target, check):
    """A producer on each device beyond CUDA and ROCm records what the consumer passes, then
    refuses. With dl_device=(1, 0) the stream must be None (STR-12); otherwise any value but
    None has a type the spec leaves to agreement between the libraries (STR-15: warn, naming
    it). Every stream the consumer passes is reported in the STR-15 record."""
    passed = []
    for dev_type, label, where, stream, device_tuple in _streams_passed(target, OTHER_STREAM_DEVICES):
        passed.append("%s: stream=%r%s" % (where, stream, "" if device_tuple is None
                                           else " with dl_device=%r" % (device_tuple,)))
        if device_tuple == (1, 0):
            check.that(stream is None, "STR-12", "%s: dl_device=(1, 0) with stream=%r; for kDLCPU the "
                       "stream must be None" % (where, stream))
        elif stream is not None:
            check.warn("STR-15", "%s: the consumer passed stream=%r; the spec leaves the type of the stream "
                       "argument for %s to agreement between the libraries" % (where, stream, label))
    check.record("STR-15", "pass", "streams passed: %s" % ("; ".join(passed) if passed else
                                                            "none (the consumer asked no such producer)"))
    check.record("STR-12", "pass", "")
