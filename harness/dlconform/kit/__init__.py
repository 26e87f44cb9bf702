"""The kit: DLPack in Python, as every part of dlconform uses it.

- `abi`: dlpack.h's structs, names, flags and dtypes as ctypes types (declared once);
- `capsules`: reading capsules (`inspect`, `extent`, `read_elements`, `read_storage`, `gather`, `elements`),
  consuming them (`consume`) and counting their deleter calls (`instrument`);
- `forge`: forged capsules with counted deleters (`Forge`) and the producers that hand them
  to a consumer (`RecordingProducer`, `CapsuleProducer`, `StreamDeviceProducer`,
  `CopyingProducer`), and `attempt`;
- `xapi`: the C exchange API table (`exchange_api`, `xapi_*`);
- `check`: verdicts and the `Check` that records them, and `reproduce`, which runs a check as
  its own reproducer;
- `cuda` (imported as `from dlconform.kit import cuda`, not re-exported here): a CUDA runtime
  found at run time (`runtime()`, `why_not()`), the system's libcudart or the one
  `DLCONFORM_CUDART` names, such as dlconform's simulated runtime. `read_elements` reads
  kDLCUDA and kDLCUDAManaged memory through it when there is one; nothing loads a runtime
  before such a read or a `runtime()` call.

The kit imports nothing but the standard library: a standalone reproducer embeds it as it is.
Checks import it as `from dlconform import kit` and use the names below.
"""
from .abi import (DEFINED_FLAGS, DLPACK_VERSION, DTYPES, FLAG_IS_COPIED, FLAG_READ_ONLY, FLAG_SUBBYTE_PADDED,
                  LEGACY, USED_LEGACY, USED_NAMES, USED_VERSIONED, VERSIONED, XAPI_NAME, capsule_name, is_capsule,
                  itemsize, keep_forever, row_major)
from .capsules import (Handle, Tracker, consume, elements, extent, gather, inspect, instrument, layout_extent,
                       read_elements, read_storage, rename)
from .check import (FAILING, FINDINGS, HARNESS_ERROR, VERDICTS, Check, CheckFailure, Unsupported, Warn, breach,
                    describe, detach, reproduce, unclean, worst)
from .forge import (CapsuleProducer, CopyingProducer, Forge, HostTensor, RecordingProducer, StreamDeviceProducer,
                    attempt, forges, legacy_producer)
from .xapi import (exchange_api, xapi_alloc, xapi_current_stream, xapi_dltensor_from, xapi_managed_from,
                   xapi_to_py)

__all__ = [
    "DEFINED_FLAGS", "DLPACK_VERSION", "DTYPES", "FLAG_IS_COPIED", "FLAG_READ_ONLY", "FLAG_SUBBYTE_PADDED", "LEGACY",
    "USED_LEGACY", "USED_NAMES", "USED_VERSIONED", "VERSIONED", "XAPI_NAME", "capsule_name", "is_capsule", "itemsize",
    "keep_forever", "row_major", "Handle", "Tracker", "consume", "elements", "extent", "gather", "inspect",
    "instrument", "layout_extent", "read_elements", "read_storage", "rename", "FAILING", "FINDINGS", "HARNESS_ERROR",
    "VERDICTS", "Check", "CheckFailure", "Unsupported", "Warn", "breach", "describe", "detach", "reproduce",
    "unclean", "worst", "CapsuleProducer", "CopyingProducer", "Forge", "HostTensor", "RecordingProducer",
    "StreamDeviceProducer", "attempt", "forges", "legacy_producer", "exchange_api", "xapi_alloc",
    "xapi_current_stream", "xapi_dltensor_from", "xapi_managed_from", "xapi_to_py"
]
