/* consumer_oracles: the consumer target's oracles on how the consumer called the producer,
 * on the class of its refusal, and on an accepted result beyond its layout. Each breach
 * goes through dlc_oracle_fail (oracle.h). The rules, and why they hold: fuzz/README.md
 * ("Oracles", "Why these oracles").
 *
 * Calls (the producer's log, producer.h):
 *   - STR-08, STR-09, STR-10, STR-12, STR-14: the stream passed to the producer;
 *   - VER-06: an old producer's TypeError was not followed by a retry without the new
 *     keywords;
 *   - DEV-06: from_dlpack(device='cpu') refused a non-CPU producer without asking it for
 *     dl_device=(1, 0);
 *   - CPY-07: from_dlpack(device='cpu', copy=False) forwarded a copy other than False, or
 *     asked for dl_device=(1, 0) without copy=False (the producer may then copy).
 * Refusal class:
 *   - DEV-07 (SHOULD), or CPY-08 when device= was passed: a non-CPU export refused with a
 *     class other than BufferError. Exceptions: ValueError with copy=False (CPY-07), and a
 *     TypeError naming a keyword (the consumer lacks it).
 *   - EXC: any other refusal with a class outside BufferError, TypeError, ValueError,
 *     MemoryError and DLCONFORM_FUZZ_ALLOW_EXC; also NULL without an exception.
 * Result:
 *   - API-05: a result of a (1, 0) export, or of a device export (the CUDA mode, devmem.h),
 *     imported without device=, reports another device;
 *   - SEM-01: a result that does not alias a CPU export, or a row-major device export, it
 *     could view (byte-sized scalar dtype, copy not requested, no device= or the export's
 *     own): a CUDA library may hold only compact arrays, and then copies a strided export
 *     (SEM-01's "otherwise copy"); ambiguous (a warn) when the consumer copies even a plain
 *     export (plain_import.h);
 *   - CPY-06: copy=True returned a view of memory the producer did not flag IS_COPIED;
 *   - FLG-03: a zero-copy result of a READ_ONLY export is writable, though its type can
 *     say read-only;
 *   - LAY-11: a zero-copy result without a view (buffer protocol, CUDA array interface)
 *     reports element strides (`strides` attribute or `stride()`) other than the export's. */
#ifndef DLCONFORM_FUZZ_CONSUMER_ORACLES_H
#define DLCONFORM_FUZZ_CONSUMER_ORACLES_H

#include "forge.h"
#include "producer.h"
#include "record.h"

/* copy: the DLC_COPY_* value actually passed to from_dlpack, or -1 when none was. */

/* After from_dlpack returned; refused: it returned NULL (the exception is still set and is
 * left set). must_refuse: the record breaks a must-refuse clause. */
void dlc_check_calls(const dlc_record *r, int copy, const dlc_producer_log *log, int refused,
                     int must_refuse);

/* On a refusal: consumes the pending exception (or its absence) and judges its class.
 * other_reason: the export has something unusual besides its device (a must-refuse clause,
 * a dtype outside the array API, an invalid extent, NULL or dangling data, more elements than
 * the 1 MiB cap holds (stride-0 giants), more than 32 dims, a versioned capsule the consumer did not ask for), so DEV-07 / CPY-08 cannot tell why it was refused.
 * Host memory named as a device this machine really has (devices.h) is a lie the consumer can
 * act on: then no class is judged, SystemError aside. backed: the export is device memory
 * (the CUDA mode, devmem.h), no lie. */
void dlc_check_refusal_class(const dlc_record *r, int copy, const dlc_producer_log *log,
                             int other_reason, int backed);

/* The (type, id) the result's __dlpack_device__ reports: 1, with -1 for what is not an int
 * pair; 0 when it has none or raised (no exception left set). */
int dlc_result_device(PyObject *result, long *type, long *id);

/* On an accepted result, while it lives. view: its buffer-protocol view or NULL; described:
 * the layout checks had a view (buffer protocol or CUDA array interface); aliases:
 * its first element lies in the forged buffer; addr: that address or NULL when unknown;
 * view_only: the consumer got the tensor only as a dltensor_from_py_object_no_sync view,
 * a bare DLTensor without the export's flags (FLG-03 is then not judged). */
void dlc_check_result_extra(const dlc_record *r, int copy, const dlc_forged *f, PyObject *result,
                            const Py_buffer *view, int described, int aliases, const void *addr,
                            int view_only);

#endif /* DLCONFORM_FUZZ_CONSUMER_ORACLES_H */
