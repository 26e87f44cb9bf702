/* devmem: device memory of the consumer target's CUDA mode (issue 21; fuzz/README.md, "On a
 * GPU").
 *
 * DLCONFORM_FUZZ_DEVICE=cuda: an export a record places on (kDLCUDA, 0) over a real buffer
 * lives in CUDA device memory. The buffer is planned, laid out and filled on the host as
 * layout.h says, then copied into a cudaMalloc'd block of the same size; the capsule's data
 * points into the block at the same pad. So a CUDA consumer gets a truthful device export
 * and is judged on importing it, not only on refusing host memory named CUDA.
 * Invariants:
 *   - the runtime is the one dlconform.kit.cuda loads (dlconform.fuzz.devmem.setup), shared
 *     with the consumer and its library: one runtime, one device address space;
 *   - a block holds the host buffer's bytes, so the export's elements lie inside it
 *     (layout.h's extent invariant, moved to the device), and one byte more, so that no
 *     other allocation (a consumer's copy) starts where the buffer ends;
 *   - the mode changes nothing for records on other devices, ids or data modes, but that host
 *     memory named CUDA is a lie there, as on a machine with the device (devices.h);
 *   - without a runtime and a device the target does not start (one line, exit status 2).
 * The Python twin is dlconform.fuzz.devmem. */
#ifndef DLCONFORM_FUZZ_DEVMEM_H
#define DLCONFORM_FUZZ_DEVMEM_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "record.h"

/* Once, after the consumer is resolved (pyhost.h), from the consumer target's initialisation:
 * with DLCONFORM_FUZZ_DEVICE unset, nothing.
 * Else binds the runtime's functions and returns the consumer's device entry (a new reference:
 * ref's cuda_from_dlpack) or NULL for its own from_dlpack. Exits 2 with one line when the mode
 * cannot run. */
PyObject *dlc_devmem_init(const char *consumer);

/* Once, from the consumer target's initialisation, in the CUDA mode: the side-stream context
 * of the consumer's library that DLC_KW_SIDE_STREAM runs from_dlpack in
 * (dlconform.fuzz.devmem.side_stream: ref, pyref, torch, cupy; none for another library). A
 * failure is the harness's: one line, and the bit is ignored. */
void dlc_devmem_side_init(const char *consumer);

/* Enters a new side-stream context: the context (a new reference, for dlc_devmem_side_exit)
 * with *stream its DLPack int, or NULL (no context for this consumer, or entering failed: its
 * error cleared) with *stream 0. */
PyObject *dlc_devmem_side_enter(uintptr_t *stream);

/* Leaves the context, keeping the exception set (the import's refusal) as it was. */
void dlc_devmem_side_exit(PyObject *ctx);

/* 1 when the CUDA mode is on. */
int dlc_devmem_active(void);

/* 1 when the mode puts r's buffer (planned p) in device memory: (kDLCUDA, 0), mode BUFFER. */
int dlc_devmem_backs(const dlc_record *r, const dlc_plan *p);

/* The byte a pending block holds until the producer's stream wrote it (dlc_devmem_upload). */
#define DLC_DEVMEM_POISON 0xA5

/* A device block holding the n bytes at host (n > 0), or NULL when the runtime failed (its
 * error is cleared: it is the harness's, never the consumer's).
 * pending 0: the bytes are there when it returns.
 * pending 1 (STR-01): as a producer's data still being written on the producer's stream. The
 * block is DLC_DEVMEM_POISON throughout when it returns (written synchronously); the n bytes,
 * staged in device memory of the producer's, are then copied in on the producer's own
 * non-blocking stream, behind a spin of DLCONFORM_FUZZ_PENDING_CYCLES clock cycles (200000 by
 * default) where the runtime or the helper library has dlc_slow_fill, and the producer's event
 * is recorded after them. Until something orders a read after that event, a read sees poison:
 * the simulated runtime runs a stream's work only when something waits for it, a GPU runs the
 * spin first. */
void *dlc_devmem_upload(const void *host, size_t n, int pending);

/* What the producer does for a __dlpack__ call over a pending block (STR-01): the stream the
 * consumer named waits for the producer's event (None or 1: the legacy default stream, STR-04
 * and STR-05; 2: the per-thread default stream, STR-06; above 2: that handle, STR-07; 0, which
 * a consumer must not pass (STR-08): the legacy stream, as a lenient producer reads it); -1, a
 * value below it or a non-int: nothing (STR-03). host_copy (dl_device=(kDLCPU, 0)): the
 * producer's stream is synchronised instead (STR-12). A runtime error is cleared: a stream
 * handle the runtime does not know is the consumer's to answer for, not a verdict here. */
void dlc_devmem_order(PyObject *stream, int host_copy);

/* The producer's own stream, where its pending bytes are written (devmem.h), or NULL before
 * the first pending upload: what its exchange table's current_work_stream names for CUDA, the
 * stream a consumer importing through the table must read on (XAPI-19). */
void *dlc_devmem_work_stream(void);

/* Gives a block back, after the producer's stream ran what it holds (a pending copy writes
 * the block); NULL is a no-op. */
void dlc_devmem_free(void *block);

/* The n bytes at device address src into host memory dst, after the stream `stream` (a
 * cudaStream_t, or 1 / 2 for the legacy and per-thread default streams; 0: none) has run what
 * it holds: 0, or -1 when the runtime failed (its error cleared) or the mode is off. */
int dlc_devmem_download(void *dst, const void *src, size_t n, uintptr_t stream);

/* The n bytes at device address src into host memory dst, after the whole device ran what it
 * holds (cudaDeviceSynchronize: an export's data may be pending on any stream, even one the
 * producer made no other stream wait on): 0, or -1 as dlc_devmem_download. */
int dlc_devmem_read_settled(void *dst, const void *src, size_t n);

/* The n bytes at device address src into host memory dst as a consumer reading on `stream`
 * sees them: a copy enqueued on that stream (1 and 2 the legacy and per-thread default
 * streams), then that stream synchronised. 0, or -1 as dlc_devmem_download. */
int dlc_devmem_read_on(void *dst, const void *src, size_t n, uintptr_t stream);

/* A new non-blocking stream (a consumer's own, for the producer target's CUDA mode), or 0
 * when the runtime failed. */
uintptr_t dlc_devmem_stream_new(void);

/* 1 when the runtime still knows `stream` (cudaStreamQuery: done or busy), 0 when it was
 * destroyed (STR-11). */
int dlc_devmem_stream_alive(uintptr_t stream);

#endif /* DLCONFORM_FUZZ_DEVMEM_H */
