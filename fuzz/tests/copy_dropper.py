"""A test consumer for test_fuzz_py.py: from_dlpack(device='cpu', copy=False) asks the producer
for the host but forwards copy=None, so the producer may copy although the caller forbade it
(CPY-07), then refuses whatever it got with BufferError."""


def from_dlpack(x, *, device=None, copy=None):
    x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=None)
    raise BufferError("this test consumer imports nothing")
