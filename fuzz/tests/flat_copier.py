"""A test consumer for test_fuzz_py.py: gather_copier.py reading every export as compact, its
strides ignored (a copy of the wrong elements, LAY-11)."""
import gather_copier

gather_copier.FLAT = True
from_dlpack = gather_copier.from_dlpack
