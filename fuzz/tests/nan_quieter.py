"""A test consumer for test_fuzz_py.py: gather_copier.py setting the quiet bit of each float16
NaN it copies (a copy through a wider float may): still the export's elements."""
import gather_copier

gather_copier.QUIET = True
from_dlpack = gather_copier.from_dlpack
