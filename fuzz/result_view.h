/* result_view: where a consumer's result lies, and how, for the consumer target's oracles.
 *
 * Sources, in order: the buffer protocol (host results: numpy, ref, pyref); in the CUDA mode
 * (devmem.h) the result's __cuda_array_interface__ (torch and cupy on the GPU, pyref's device
 * arrays, a kernel library's arrays); else a data_ptr (torch: a method giving the first
 * element; ref: an int attribute, with a byte_offset attribute next to it). */
#ifndef DLCONFORM_FUZZ_RESULT_VIEW_H
#define DLCONFORM_FUZZ_RESULT_VIEW_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The stream the last CUDA array interface read names (v3 "stream": work on it comes before
 * a read of the data), or 0 for none. */
extern uintptr_t dlc_cai_stream;

/* Address of the result's first element, or NULL when the result exposes none. *have_view:
 * 1 for a buffer-protocol view in *view (the caller releases it), 2 for a CUDA array
 * interface view (buf, ndim, itemsize, shape, strides set; nothing to release; its shape and
 * strides live in static storage until the next call), else 0. */
const uint8_t *dlc_result_address(PyObject *result, Py_buffer *view, int *have_view);

#endif /* DLCONFORM_FUZZ_RESULT_VIEW_H */
