"""DEV: the device a producer reports and exports, and how it answers `dl_device` (producer side)."""

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import imports as imp
from support import tensors as tns
from support.marks import consumer, producer

KNOWN_DEVICE_TYPES = {1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
HOST_DEVICES_WITH_ID_ZERO = {1, 3, 13}  # kDLCPU, kDLCUDAHost, kDLCUDAManaged (DEV-02)
KDL_HEXAGON = 16  # a device no CPU library can export to


@producer("DEV-01", "DEV-02", "DEV-03")
def test_reported_device_matches_exported_device(target, check):
    """__dlpack_device__() is a known (type, id) pair, and the capsule's DLTensor.device agrees
    with it when dl_device is None."""
    x, _ = tns.make(target, "float32", (2, 3))
    reported = tuple(int(v) for v in x.__dlpack_device__())
    exported = tuple(pycap.fields(x.__dlpack__())["device"])
    for label, device in (("__dlpack_device__", reported), ("capsule device", exported)):
        check.that(device[0] in KNOWN_DEVICE_TYPES, "DEV-01", "%s type %r is no DLDeviceType" % (label, device[0]))
    for label, (dev_type, dev_id) in (("__dlpack_device__", reported), ("capsule", exported)):
        if dev_type in HOST_DEVICES_WITH_ID_ZERO:
            check.equal(dev_id, 0, "DEV-02", "%s device_id of host memory (type %d)" % (label, dev_type))
    check.equal(exported, reported, "DEV-03", "capsule DLTensor.device against __dlpack_device__()")


@producer("DEV-04")
def test_dl_device_of_own_device_exports_in_place(target, check):
    """dl_device equal to the tensor's own device (here the CPU) exports without a copy."""
    x, _ = tns.make(target, "float32", (2, 3))
    dev = tuple(int(v) for v in x.__dlpack_device__())
    info = pycap.fields(pycap.export_versioned(x, dl_device=dev))
    check.equal(tuple(info["device"]), dev, "DEV-04", "device of the capsule exported with dl_device=%r" % (dev,))
    ptr = tns.native_ptr(target, x)
    if ptr is not None and info.get("data") is not None:
        check.equal(info["data"] + info["byte_offset"], ptr, "DEV-04",
                    "dl_device equal to the own device must not move the data")


def _export_to(x, dl_device):
    """(capsule, None) or (None, exception) of x's versioned export with `dl_device`; Unsupported
    for a producer without the keyword (it predates array API 2023.12)."""
    try:
        return pycap.export_versioned(x, dl_device=dl_device), None
    except kit.Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - the caller judges the class
        if pycap.keyword_rejected(e, "dl_device"):
            raise kit.Unsupported("__dlpack__ has no dl_device keyword (predates array API 2023.12): %s" % e)
        return None, e


@producer("DEV-05")
def test_impossible_dl_device_raises_buffererror(target, check):
    """A dl_device the producer cannot handle (kDLHexagon) must raise BufferError."""
    x, _ = tns.make(target, "float32", (2, 3))
    cap, e = _export_to(x, (KDL_HEXAGON, 0))
    if isinstance(e, BufferError):
        check.record("DEV-05", "pass")
    elif e is not None:
        check.record("DEV-05", "fail", "dl_device=(kDLHexagon, 0) raised %s, not BufferError" % tries.describe_exc(e))
    else:
        info = pycap.fields(cap)
        check.record("DEV-05", "fail", "dl_device=(kDLHexagon, 0) was accepted: capsule %r on device %r"
                     % (info["name"], info.get("device")))


# ---------------------------------------------------------------------------- producer: dl_device CPU
@producer("DEV-06")
def test_dl_device_cpu_exports_host_memory(target, check):
    """dl_device=(kDLCPU, 0) gives CPU-accessible memory with the tensor's values; for a CPU
    tensor with copy=False that is its own memory (no copy needed)."""
    x, _ = tns.make(target, "float32", (2, 3))
    cap, e = _export_to(x, (1, 0))
    if e is not None:
        check.record("DEV-06", "warn", "dl_device=(1, 0) raised %s; a compliant library should export "
                     "CPU-accessible memory this way (DEV-06)" % tries.describe_exc(e))
        return
    info = pycap.fields(cap)
    check.equal(tuple(info["device"]), (1, 0), "DEV-06", "device of the dl_device=(1, 0) export")
    # an export whose layout does not describe x is the layout checks' finding (LAY-03, LAY-05)
    if tuple(info["device"]) == (1, 0) and info.get("readable", True) and not tns.compare_layout(target, x, info, 4):
        check.equal(kit.read_elements(cap), target.expected(x), "DEV-06", "values of the dl_device=(1, 0) export")


# ---------------------------------------------------------------------------- consumer: device keyword
KDL_CUDA = 2


@consumer("API-05")
def test_consumer_device_none_keeps_the_device(target, check):
    """from_dlpack(x, device=None) puts the result on x's device (here the CPU)."""
    imp.keeps_device(check, target, lambda: kit.RecordingProducer(kit.forges(shape=(2, 3)), keep=True), (1, 0))


@consumer("DEV-06")
def test_consumer_device_cpu(target, check):
    """from_dlpack(x, device='cpu') gives a CPU result: from a CPU producer, and from a
    producer on another device that can copy to the host when asked with dl_device. A
    producer's bug must not hide this consumer check's findings: each case runs."""
    tries.require_keywords(target, "device")
    imp.host_result(check, target, "CPU producer", kit.RecordingProducer(kit.forges(shape=(2, 3)), keep=True))
    imp.host_result(check, target, "CUDA producer with host copies",
                    kit.StreamDeviceProducer((KDL_CUDA, 0), host_copies=True))


@consumer("DEV-07")
def test_consumer_refuses_foreign_device_with_buffererror(target, check):
    """Memory on a device the consumer lacks (kDLHexagon here) should be refused with
    BufferError (older python_spec text said TypeError)."""
    imp.foreign_refused(check, target)


@consumer("CPY-08")
def test_consumer_device_cpu_impossible_is_buffererror(target, check):
    """from_dlpack(x, device='cpu') when x's memory cannot reach the host at all (its
    producer refuses dl_device=(1, 0)): BufferError."""
    imp.unservable_refused(check, target, kit.StreamDeviceProducer((KDL_CUDA, 0), host_copies=False))
