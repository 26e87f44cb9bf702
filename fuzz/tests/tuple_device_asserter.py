"""A test consumer for test_fuzz_py.py: from_dlpack refuses a device= tuple with AssertionError,
as torch 2.14 does ("unsupported device type: <class 'tuple'>"), and any non-CPU producer with
BufferError. A pair other than (1, 0) names no device object of any library, so refusing the
argument with any class is not a finding (fuzz/consumer_oracles.c)."""


def from_dlpack(x, *, device=None, copy=None):
    if isinstance(device, tuple):
        raise AssertionError("from_dlpack: unsupported device type: %r" % type(device))
    if x.__dlpack_device__()[0] != 1:
        raise BufferError("only CPU exports are imported")
    raise BufferError("this test consumer imports nothing")
