"""DEV: the device a producer reports and exports, and how it answers `dl_device` (producer side)."""
import pytest

import _capsule_support as S
from dlconform import _probe
from dlconform.verdicts import Unsupported

KNOWN_DEVICE_TYPES = {1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
HOST_DEVICES_WITH_ID_ZERO = {1, 3, 13}  # kDLCPU, kDLCUDAHost, kDLCUDAManaged (DEV-02)
KDL_HEXAGON = 16  # a device no CPU library can export to


def _cpu_tensor(target, check):
    x, values, mk = S.make(target, "float32", (2, 3))
    return x, S.setup_lines(target) + mk


@pytest.mark.clause("DEV-01", "DEV-02", "DEV-03")
@pytest.mark.role("producer")
def test_reported_device_matches_exported_device(target, check):
    """__dlpack_device__() is a known (type, id) pair, and the capsule's DLTensor.device agrees
    with it when dl_device is None."""
    x, setup = _cpu_tensor(target, check)
    check.repro(setup + ["print(x.__dlpack_device__(), _probe.inspect(x.__dlpack__())['device'])"])
    reported = tuple(int(v) for v in x.__dlpack_device__())
    info = _probe.inspect(S.export_legacy(x))
    exported = tuple(info["device"])
    check.that(reported[0] in KNOWN_DEVICE_TYPES, "DEV-01", "__dlpack_device__ type %r is no DLDeviceType" % (reported[0],))
    check.that(exported[0] in KNOWN_DEVICE_TYPES, "DEV-01", "capsule device type %r is no DLDeviceType" % (exported[0],))
    for label, (dev_type, dev_id) in (("__dlpack_device__", reported), ("capsule", exported)):
        if dev_type in HOST_DEVICES_WITH_ID_ZERO:
            check.equal(dev_id, 0, "DEV-02", "%s device_id of host memory (type %d)" % (label, dev_type))
    check.equal(exported, reported, "DEV-03", "capsule DLTensor.device against __dlpack_device__()")


@pytest.mark.clause("DEV-04")
@pytest.mark.role("producer")
def test_dl_device_of_own_device_exports_in_place(target, check):
    """dl_device equal to the tensor's own device (here the CPU) exports without a copy."""
    x, setup = _cpu_tensor(target, check)
    dev = tuple(int(v) for v in x.__dlpack_device__())
    check.repro(setup + ["cap = x.__dlpack__(max_version=(1, 3), dl_device=%r)" % (dev,),
                         "print(_probe.inspect(cap))"])
    cap = S.export_versioned(x, dl_device=dev)
    info = _probe.inspect(cap)
    check.equal(tuple(info["device"]), dev, "DEV-04", "device of the capsule exported with dl_device=%r" % (dev,))
    ptr = S.native_ptr(target, x)
    if ptr is not None and info.get("data") is not None:
        check.equal(info["data"] + info["byte_offset"], ptr, "DEV-04",
                    "dl_device equal to the own device must not move the data")


@pytest.mark.clause("DEV-05")
@pytest.mark.role("producer")
def test_impossible_dl_device_raises_buffererror(target, check):
    """A dl_device the producer cannot handle (kDLHexagon) must raise BufferError."""
    x, setup = _cpu_tensor(target, check)
    check.repro(setup + ["x.__dlpack__(max_version=(1, 3), dl_device=(%d, 0))  # expected: BufferError" % KDL_HEXAGON])
    try:
        cap = S.export_versioned(x, dl_device=(KDL_HEXAGON, 0))
    except Unsupported:
        raise
    except BufferError:
        check.record("DEV-05", "pass")
        return
    except Exception as e:  # noqa: BLE001 - the class is what is checked
        if S.keyword_rejected(e, "dl_device"):
            raise Unsupported("__dlpack__ has no dl_device keyword (predates array API 2023.12): %s" % e)
        check.record("DEV-05", "fail", "dl_device=(kDLHexagon, 0) raised %s, not BufferError" % S.describe_exc(e))
        return
    info = _probe.inspect(cap)
    check.record("DEV-05", "fail", "dl_device=(kDLHexagon, 0) was accepted: capsule %r on device %r"
                 % (info["name"], info.get("device")))
