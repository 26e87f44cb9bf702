/* copy_values: the values of a consumer's copy (LAY-11), for the consumer target.
 *
 * A result that does not alias the export is a copy; a copy must hold the export's elements,
 * read through its shape, strides and byte_offset (LAY-11: a consumer answers a layout by
 * importing, copying or raising, and a copy of the wrong elements is none of these). The
 * export's bytes are known without reading it: byte i of the buffer holds
 * (uint8_t)(i * 131 + fill seed) (layout.h), so the oracle holds even after the deleter ran.
 * Judged only where the answer is exact and cheap:
 *   - integers of 8 to 64 bits, and IEEE floats (float16/32/64, bfloat16, complex64/128),
 *     lanes 1; a part of a float that is a NaN may come back as any NaN (a copy may quiet a
 *     signalling NaN of the fill pattern); bools are left out (a copy may normalise them), and
 *     so are float8, fp6 and fp4, whose NaN encodings differ;
 *   - a valid, non-empty extent over a real buffer, at most DLC_COPY_CHECK_MAX elements;
 *   - a result view (buffer protocol, or a device result's CUDA array interface) of the
 *     export's shape and item size that is compact row-major, so that its bytes are its
 *     numel * itemsize bytes from its first element. A device view is read after the stream
 *     its interface names (CUDA array interface v3) through devmem.h.
 * A copy of an export whose bytes were pending on the producer's stream (devmem.h) whose first
 * wrong element is all DLC_DEVMEM_POISON copied the block before the producer's stream wrote it
 * (once written, no byte of the block is poison): that is the consumer's stream order, not a
 * copy of the wrong elements, and the caller names the clause (STR-01 through __dlpack__,
 * XAPI-19 through an exchange table's *_no_sync functions).
 * The Python twin is dlconform.fuzz.consumer_oracles.check_copy_values. */
#ifndef DLCONFORM_FUZZ_COPY_VALUES_H
#define DLCONFORM_FUZZ_COPY_VALUES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "layout.h"
#include "record.h"

#define DLC_COPY_CHECK_MAX 4096

/* LAY-11 through dlc_oracle_fail when the copy viewed by v holds other elements than the export
 * of r (planned p). on_device: v's buf is a device address, read after `stream` (0: none).
 * pending: the export's bytes were pending; a first wrong element that is all poison is then
 * no LAY-11: its index is returned, for the caller's stream clause (STR-01, or XAPI-19 through
 * an exchange table). Otherwise -1. */
long long dlc_check_copy_values(const dlc_record *r, const dlc_plan *p, const Py_buffer *v,
                                int on_device, uintptr_t stream, int pending);

#endif /* DLCONFORM_FUZZ_COPY_VALUES_H */
