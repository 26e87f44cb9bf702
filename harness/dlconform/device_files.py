"""The suites' files a device run (dlconform run --device) takes, by device: read by the CLI,
which runs them, and by the pytest plugin in every child, which runs the host files' producer
checks on a device variant's tensors only where they are written for them."""

#: the files of the device checks, by device: its streams observed, its exchange table, what its
#: consumer makes of device capsules of every layout and dtype, of every reason to refuse one, of
#: from_dlpack's keywords and READ_ONLY, and of every installed CUDA producer's tensors
DEVICE_FILES = {"cuda": ("test_cuda_stream.py", "test_cuda_exchange.py", "test_cuda_layout.py",
                         "test_cuda_refusals.py", "test_cuda_keywords.py", "test_cuda_interop.py")}
#: the test files of a device run, by device (--device): the device checks, and the files whose
#: producer checks judge a tensor the library makes (its fields, layout, dtype, elements, capsules,
#: versions, flags, copies, errors, device, ownership and exports from many threads), run on the
#: device tensors of the targets that make them (target.device_tensors; pytest_plugin skips
#: the other host files' producer checks there)
DEVICE_TESTS = {"cuda": DEVICE_FILES["cuda"] + (
    "test_fields.py", "test_layout.py", "test_dtype.py", "test_capsule.py", "test_versioning.py", "test_flags.py",
    "test_copy.py", "test_errors.py", "test_device.py", "test_ownership.py", "test_threads.py")}
