"""A test consumer for test_fuzz_py.py: from_dlpack raises SystemError (an EXC finding of the
fuzz target) whenever it is passed device=, and BufferError otherwise. It shows which records
the consumer target passes device= to."""


def from_dlpack(x, *, device=None, copy=None):
    if device is not None:
        raise SystemError("device=%r passed for an export of device %r" % (device, x.__dlpack_device__()))
    raise BufferError("this test consumer imports nothing")
