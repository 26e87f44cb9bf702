"""A test consumer for test_fuzz_py.py: from_dlpack(device='cpu') asks the producer for
dl_device=(1, 0), as numpy 2.4 does, and refuses what it cannot use with RuntimeError. A
producer that refuses the request (BufferError, DEV-05) leaves memory that cannot reach the
host: RuntimeError then breaks CPY-08 (MUST BufferError). A producer that ignores the request
and hands out an export of its own device broke DEV-05 itself; RuntimeError for that export is
DEV-07's case (SHOULD BufferError), not CPY-08's."""


def from_dlpack(x, *, device=None, copy=None):
    if device != "cpu":
        raise BufferError("this test consumer imports with device='cpu' only")
    try:
        x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=copy)
    except BufferError as e:
        raise RuntimeError("cannot reach the host: %s" % e) from None
    raise RuntimeError("Unsupported device in DLTensor.")
