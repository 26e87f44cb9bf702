"""Which DLPack device types this machine really has: the twin of fuzz/devices.c, whose
comment says why the consumer oracles ask (issue 21, item 4): where a device exists, a
forged export naming it over host memory is a lie the consumer can act on, so the class of its
refusal is not judged."""
import glob
import os

CUDA, ROCM = 2, 10
ENV = "DLCONFORM_REAL_DEVICES"
_found = None


def _detect():
    forced = os.environ.get(ENV)
    if forced is not None:
        found = set()
        for part in forced.split(","):
            try:
                found.add(int(part))
            except ValueError:
                break
        return frozenset(found & {CUDA, ROCM})
    found = set()
    if glob.glob("/dev/nvidia[0-9]*"):
        found.add(CUDA)
    if os.path.exists("/dev/kfd"):
        found.add(ROCM)
    return frozenset(found)


def present(device_type):
    """dlc_device_present: whether a device of this DLDeviceType is here (read once)."""
    global _found
    if _found is None:
        _found = _detect()
    return device_type in _found
