/* runtime.c: the exported CUDA runtime API of the simulation (cudasim.h lists it).
 *
 * Invariants:
 * - one mutex guards all state: each call takes it once, and memory.c and engine.c run under it;
 * - the only calls that run device work are the host-blocking ones (cudaStreamSynchronize,
 *   cudaEventSynchronize, cudaDeviceSynchronize, cudaMemcpy, cudaFree), and each such call
 *   adds one to dlcsim_host_syncs(): "the producer blocked the host" is observable;
 * - a failed call returns its error and leaves it as the thread's last error
 *   (cudaGetLastError reads and resets it, cudaPeekAtLastError reads it); cudaErrorNotReady,
 *   a query's answer, is not an error there, as in CUDA;
 * - stream 0 is the legacy default stream, as in CUDA's runtime API; the ban on 0 (STR-08) is
 *   DLPack's, for the `stream` argument of __dlpack__, and not the runtime's business.
 *
 * One device (device 0); DLCSIM_DEVICE_COUNT=0 in the environment makes it none (every
 * cudaGetDeviceCount then says cudaErrorNoDevice), to simulate a machine without a GPU. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long g_host_syncs;
static _Thread_local cudaError_t t_last;

static void lock(void) { pthread_mutex_lock(&g_lock); }

/* Unlocks and returns e, kept as the thread's last error when it is one. */
static cudaError_t unlock(cudaError_t e) {
  pthread_mutex_unlock(&g_lock);
  if (e != cudaSuccess && e != cudaErrorNotReady) t_last = e;
  return e;
}

static cudaError_t fail(cudaError_t e) {
  t_last = e;
  return e;
}

/* ---- device, versions, errors ---- */

static int no_device(void) {
  const char *v = getenv("DLCSIM_DEVICE_COUNT");
  return v && strcmp(v, "0") == 0;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = no_device() ? 0 : 1;
  return *count ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device) {
  if (!device) return fail(cudaErrorInvalidValue);
  if (no_device()) return fail(cudaErrorNoDevice);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (no_device()) return fail(cudaErrorNoDevice);
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaRuntimeGetVersion(int *version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = DLCSIM_CUDA_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version) { return cudaRuntimeGetVersion(version); }

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

static const struct {
  cudaError_t code;
  const char *name, *text;
} ERRORS[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
};

static size_t error_index(cudaError_t e) {
  size_t i = 0;
  while (i < sizeof ERRORS / sizeof *ERRORS && ERRORS[i].code != e) i++;
  return i;
}

const char *cudaGetErrorString(cudaError_t error) {
  size_t i = error_index(error);
  return i < sizeof ERRORS / sizeof *ERRORS ? ERRORS[i].text : "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error) {
  size_t i = error_index(error);
  return i < sizeof ERRORS / sizeof *ERRORS ? ERRORS[i].name : "unrecognized error code";
}

/* ---- memory ---- */

cudaError_t cudaMalloc(void **ptr, size_t size) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  if (size == 0) {
    *ptr = NULL;
    return cudaSuccess;
  }
  uintptr_t addr = 0;
  lock();
  cudaError_t e = sim_mem_alloc(size, &addr);
  if (!e) *ptr = (void *)addr;
  return unlock(e);
}

/* cudaFree synchronizes the device before it frees, as CUDA's does: no queued copy or fill can
 * outlive the memory it resolved at enqueue. */
cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  lock();
  if (!sim_mem_is_device((uintptr_t)ptr)) return unlock(cudaErrorInvalidValue);
  sim_run_all();
  g_host_syncs++;
  return unlock(sim_mem_free((uintptr_t)ptr));
}

/* One side of a copy: device memory wholly inside one allocation (want 1), host memory (want 0),
 * or whichever the address is (want -1, cudaMemcpyDefault). */
static cudaError_t side(const void *p, size_t n, int want, unsigned char **out) {
  if (!p) return cudaErrorInvalidValue;
  int device = sim_mem_is_device((uintptr_t)p);
  if (want < 0) want = device;
  if (want != device) return cudaErrorInvalidValue;
  *out = device ? sim_mem_host((uintptr_t)p, n) : (unsigned char *)p;
  return *out ? cudaSuccess : cudaErrorInvalidValue;
}

/* Enqueues a copy on `stream` (lock held); *seq is its seq. */
static cudaError_t enqueue_copy(size_t stream, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                uint64_t *seq) {
  static const int DST[] = {0, 1, 0, 1, -1}, SRC[] = {0, 0, 1, 1, -1};
  if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  sim_op op = {0};
  unsigned char *d, *s;
  cudaError_t e = side(dst, n, DST[kind], &d);
  if (e || (e = side(src, n, SRC[kind], &s))) return e;
  op.kind = SIM_COPY;
  op.dst = d;
  op.src = s;
  op.n = n;
  return (*seq = sim_enqueue(stream, &op)) ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* A synchronous copy: on the legacy default stream, then waited for. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  uint64_t seq;
  size_t legacy;
  lock();
  cudaError_t e = sim_stream_of(0, &legacy);
  if (e || (e = enqueue_copy(legacy, dst, src, count, kind, &seq))) return unlock(e);
  sim_run_stream(legacy, seq);
  g_host_syncs++;
  return unlock(cudaSuccess);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  uint64_t seq;
  size_t s;
  lock();
  cudaError_t e = sim_stream_of(stream, &s);
  if (e || count == 0) return unlock(e);
  return unlock(enqueue_copy(s, dst, src, count, kind, &seq));
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream) {
  size_t s;
  sim_op op = {0};
  lock();
  cudaError_t e = sim_stream_of(stream, &s);
  if (e || count == 0) return unlock(e);
  if ((e = side(ptr, count, 1, &op.dst))) return unlock(e);
  op.kind = SIM_FILL;
  op.n = count;
  op.byte = value;
  return unlock(sim_enqueue(s, &op) ? cudaSuccess : cudaErrorMemoryAllocation);
}

/* cudaMemset is asynchronous with respect to the host: it is a fill on the legacy stream. */
cudaError_t cudaMemset(void *ptr, int value, size_t count) { return cudaMemsetAsync(ptr, value, count, 0); }

int dlc_slow_fill(void *stream, void *ptr, size_t n, int byte, long long cycles) {
  if (cycles < 0) return fail(cudaErrorInvalidValue);
  return cudaMemsetAsync(ptr, byte, n, (cudaStream_t)stream);
}

/* ---- streams ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  if (!stream || (flags & ~(unsigned)cudaStreamNonBlocking)) return fail(cudaErrorInvalidValue);
  lock();
  return unlock(sim_stream_new(flags, stream));
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int *flags) {
  size_t s;
  if (!flags) return fail(cudaErrorInvalidValue);
  lock();
  cudaError_t e = sim_stream_of(stream, &s);
  return unlock(e ? e : sim_stream_flags(s, flags));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  size_t s;
  lock();
  cudaError_t e = sim_stream_of(stream, &s);
  if (e) return unlock(e);
  sim_run_stream(s, UINT64_MAX);
  g_host_syncs++;
  return unlock(cudaSuccess);
}

/* A query's answer (cudaStreamQuery, cudaEventQuery), the lock held: the lookup's error, else
 * done(*index) ? cudaSuccess : cudaErrorNotReady (not an error: the last error stays). */
static cudaError_t query(cudaError_t lookup, int (*done)(size_t), const size_t *index) {
  return unlock(lookup ? lookup : done(*index) ? cudaSuccess : cudaErrorNotReady);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  size_t s = 0;
  lock();
  return query(sim_stream_of(stream, &s), sim_stream_idle, &s);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  lock();
  return unlock(sim_stream_destroy(stream));
}

/* The stream and the event of an event operation (record, wait); the lock is held. */
static cudaError_t stream_and_event(cudaStream_t stream, cudaEvent_t event, size_t *s, size_t *ev) {
  cudaError_t e = sim_stream_of(stream, s);
  return e ? e : sim_event_of(event, ev);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  size_t s, ev;
  if (flags != cudaEventWaitDefault) return fail(cudaErrorInvalidValue);
  lock();
  cudaError_t e = stream_and_event(stream, event, &s, &ev);
  if (e) return unlock(e);
  return unlock(sim_enqueue_wait(s, ev) ? cudaSuccess : cudaErrorMemoryAllocation);
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (!event || (flags & ~known)) return fail(cudaErrorInvalidValue);
  lock();
  return unlock(sim_event_new(flags, event));
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  size_t s, ev;
  lock();
  cudaError_t e = stream_and_event(stream, event, &s, &ev);
  if (e) return unlock(e);
  return unlock(sim_enqueue_record(s, ev) ? cudaSuccess : cudaErrorMemoryAllocation);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  size_t ev = 0;
  lock();
  return query(sim_event_of(event, &ev), sim_event_done, &ev);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  size_t ev, s;
  uint64_t seq;
  lock();
  cudaError_t e = sim_event_of(event, &ev);
  if (e) return unlock(e);
  sim_event_last(ev, &s, &seq);
  if (seq) sim_run_stream(s, seq);
  g_host_syncs++;
  return unlock(cudaSuccess);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  lock();
  return unlock(sim_event_destroy(event));
}

/* ---- the device ---- */

cudaError_t cudaDeviceSynchronize(void) {
  lock();
  sim_run_all();
  g_host_syncs++;
  return unlock(cudaSuccess);
}

unsigned long long dlcsim_host_syncs(void) {
  lock();
  unsigned long long n = g_host_syncs;
  unlock(cudaSuccess);
  return n;
}

unsigned long long dlcsim_pending(void) {
  lock();
  unsigned long long n = sim_pending();
  unlock(cudaSuccess);
  return n;
}
