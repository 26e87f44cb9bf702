"""A test consumer for test_fuzz_py.py: ref's import, kept as a view when the export is
C-contiguous and copied (ref's copy=True of that view) when it is not. A library that can view
yet copies a strided export it could view breaks SEM-01 plainly: its plain import views, so
the copy is its choice (not the ambiguous case of a library that copies everything)."""
from dlconform import _ref


def _row_major(shape, strides):
    want = 1
    for n, s in reversed(list(zip(shape, strides))):
        if n > 1 and s != want:
            return False
        want *= n
    return True


def from_dlpack(x, *, device=None, copy=None):
    y = _ref.from_dlpack(x)
    if _row_major(y.shape, y.strides):
        return y
    return _ref.from_dlpack(y, copy=True)
