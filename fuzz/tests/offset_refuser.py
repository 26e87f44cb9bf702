"""A test consumer for test_fuzz_py.py: from_dlpack asks for the host, then refuses a non-zero
byte_offset with ValueError (torch 2.14: "Expected zero byte_offset") and any other export
with ValueError too. A refusal of the layout is no DEV-07 / CPY-08 finding; a ValueError for
the device alone is (DEV-07 here: the producer ignored dl_device)."""
from dlconform import _probe


def from_dlpack(x, *, device=None, copy=None):
    cap = x.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
    if _probe.inspect(cap)["byte_offset"]:
        raise ValueError("Expected zero byte_offset")
    raise ValueError("unsupported device")
