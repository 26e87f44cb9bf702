"""pyref: a small array library in pure Python with ctypes, and a reference for DLPack.

It exchanges arrays with any DLPack library: `Array.__dlpack__` and `__dlpack_device__`
export them (producer), `from_dlpack` imports anything that offers both (consumer). The
structs of dlpack.h v1.3 are dlconform's one ctypes declaration of them (`pyref.dlpack`,
dlconform.kit.abi); capsules go through `ctypes.pythonapi`. Storage is ctypes buffers pyref
owns, or memory it imported.

    >>> import pyref
    >>> x = pyref.frombuffer(bytes(24), "float32", (2, 3))
    >>> y = pyref.from_dlpack(x.T)          # a view of x's memory
    >>> y.shape, y.strides
    ((3, 2), (1, 3))

`pyref.to_device(x)` gives a DeviceArray: the same elements in CUDA memory (the runtime
DLCONFORM_CUDART names, else the system's libcudart), produced on a non-blocking stream of its
own, exported with CUDA's stream semantics (`__dlpack__(stream=...)`, dl_device=(1, 0)).
`pyref.device_from_dlpack(x)` imports a CUDA producer's memory, read on pyref's current stream
(1, the legacy default stream, or the one `with pyref.cuda_stream(handle):` names).

There is no C exchange API (`__dlpack_c_exchange_api__`): pure Python has no C functions to
put in its table. Built-in faults (`FAULTS`, `set_fault`) turn pyref into a library that
breaks one DLPack rule, for testing test suites.
"""
from ..kit import abi as dlpack
from ._array import Array, flip, frombuffer, zeros
from ._consumer import from_dlpack
from ._cuda import DeviceArray, cuda_available, to_device
from ._device_consumer import cuda_stream, current_stream, device_from_dlpack
from ._dtypes import NAMES as DTYPES
from ._faults import CUDA_FAULTS, FAULTS, current as current_fault, set_fault
from ._producer import live_exports

__version__ = "1.0"
DLPACK_VERSION = dlpack.DLPACK_VERSION

__all__ = ["Array", "CUDA_FAULTS", "DLPACK_VERSION", "DTYPES", "DeviceArray", "FAULTS", "cuda_available",
           "cuda_stream", "current_fault", "current_stream", "device_from_dlpack", "dlpack", "flip", "from_dlpack",
           "frombuffer", "live_exports", "set_fault", "to_device", "zeros"]
