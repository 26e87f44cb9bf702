/* Unit tests of the simulated CUDA runtime (probes/cuda/sim), linked into one executable with
 * ASan and UBSan by `make ctest`; the last line is "N passed, N failed". They call the API
 * directly, as a C library under test would through libcudart. */
#include "cuda/sim/cudasim.h"
#include "tap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define N 64

static unsigned char g_host[N];

/* The first byte of device memory p, read with a synchronous copy. */
static int first_byte(void *p) {
  unsigned char b = 0xEE;
  if (cudaMemcpy(&b, p, 1, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
  return b;
}

/* Bytes read on `stream` as a consumer reads them: a copy enqueued there, then that stream
 * synchronized alone. */
static int read_on(cudaStream_t stream, void *p) {
  memset(g_host, 0xEE, sizeof g_host);
  if (cudaMemcpyAsync(g_host, p, N, cudaMemcpyDeviceToHost, stream) != cudaSuccess) return -1;
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -2;
  for (int i = 1; i < N; i++)
    if (g_host[i] != g_host[0]) return -3;
  return g_host[0];
}

static void test_device_and_errors(void) {
  int n = -1, v = 0;
  CHECK_INT(cudaGetDeviceCount(&n), cudaSuccess);
  CHECK_INT(n, 1);
  CHECK_INT(cudaSetDevice(1), cudaErrorInvalidDevice);
  CHECK_INT(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  CHECK_INT(cudaGetLastError(), cudaErrorInvalidDevice);
  CHECK_INT(cudaGetLastError(), cudaSuccess);
  CHECK_INT(cudaRuntimeGetVersion(&v), cudaSuccess);
  CHECK_INT(v, DLCSIM_CUDA_VERSION);
  CHECK_STR(cudaGetErrorString(cudaErrorInvalidResourceHandle), "invalid resource handle");
  CHECK_STR(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
  CHECK_STR(cudaGetErrorString(12345), "unrecognized error code");
  setenv("DLCSIM_DEVICE_COUNT", "0", 1);
  CHECK_INT(cudaGetDeviceCount(&n), cudaErrorNoDevice);
  CHECK_INT(n, 0);
  unsetenv("DLCSIM_DEVICE_COUNT");
  cudaGetLastError();
}

static void test_memory(void) {
  void *p = NULL, *q = NULL;
  unsigned char in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = (unsigned char)(i * 7);
  CHECK_INT(cudaMalloc(&p, N), cudaSuccess);
  CHECK_INT(cudaMalloc(&q, 3), cudaSuccess);
  CHECK(p != NULL && q != NULL && p != q);
  CHECK_INT((uintptr_t)p % 256, 0);
  CHECK_INT((uintptr_t)q % 256, 0);
  CHECK(p != (void *)in && p != (void *)out);
  CHECK_INT(first_byte(p), 0); /* zero-filled */
  CHECK_INT(cudaMemcpy(p, in, N, cudaMemcpyHostToDevice), cudaSuccess);
  CHECK_INT(cudaMemcpy(out, p, N, cudaMemcpyDeviceToHost), cudaSuccess);
  CHECK(memcmp(in, out, N) == 0);
  CHECK_INT(cudaMemcpy(out, (char *)p + 8, 8, cudaMemcpyDefault), cudaSuccess);
  CHECK(memcmp(in + 8, out, 8) == 0);
  /* a device to device copy within one allocation, overlapping */
  CHECK_INT(cudaMemcpy((char *)p + 1, p, 8, cudaMemcpyDeviceToDevice), cudaSuccess);
  CHECK_INT(cudaMemcpy(out, p, 9, cudaMemcpyDeviceToHost), cudaSuccess);
  CHECK(out[0] == in[0] && memcmp(out + 1, in, 8) == 0);
  /* a host pointer is no device pointer, nor a device pointer a host one; ranges stay inside */
  CHECK_INT(cudaMemcpy(out, in, N, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  CHECK_INT(cudaMemcpy(p, q, 1, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  CHECK_INT(cudaMemcpy(out, p, N + 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  CHECK_INT(cudaMemcpy(out, q, 4, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  CHECK_INT(cudaMemcpy(out, p, 1, (enum cudaMemcpyKind)9), cudaErrorInvalidMemcpyDirection);
  CHECK_INT(cudaMemcpy(out, NULL, 1, cudaMemcpyDefault), cudaErrorInvalidValue);
  CHECK_INT(cudaFree((char *)p + 1), cudaErrorInvalidValue);
  CHECK_INT(cudaFree(in), cudaErrorInvalidValue);
  CHECK_INT(cudaFree(p), cudaSuccess);
  CHECK_INT(cudaFree(p), cudaErrorInvalidValue);
  CHECK_INT(cudaMemcpy(out, p, 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  CHECK_INT(cudaFree(q), cudaSuccess);
  CHECK_INT(cudaFree(NULL), cudaSuccess);
  CHECK_INT(cudaMalloc(&p, 0), cudaSuccess);
  CHECK(p == NULL);
  /* first fit: a freed range is used again */
  CHECK_INT(cudaMalloc(&p, 100), cudaSuccess);
  CHECK_INT(cudaMalloc(&q, 100), cudaSuccess);
  void *first = p;
  CHECK_INT(cudaFree(p), cudaSuccess);
  CHECK_INT(cudaMalloc(&p, 50), cudaSuccess);
  CHECK(p == first);
  cudaFree(p);
  cudaFree(q);
  /* the device holds 1 GiB: what would pass it fails as on a full device, and fits again once
   * memory is given back (blocks are zero-filled lazily: no host memory is touched here) */
  void *big = NULL, *more = NULL;
  CHECK_INT(cudaMalloc(&big, (size_t)1 << 30), cudaSuccess);
  CHECK_INT(cudaMalloc(&more, 256), cudaErrorMemoryAllocation);
  CHECK_INT(cudaGetLastError(), cudaErrorMemoryAllocation);
  CHECK_INT(cudaFree(big), cudaSuccess);
  CHECK_INT(cudaMalloc(&more, 256), cudaSuccess);
  cudaFree(more);
  cudaGetLastError();
}

/* STR-01: work on a non-blocking stream is seen by another stream only after an event wait. */
static void test_event_wait(void) {
  void *p;
  cudaStream_t producer, consumer;
  cudaEvent_t ready;
  cudaMalloc(&p, N);
  CHECK_INT(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  CHECK_INT(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  CHECK((uintptr_t)producer > 2 && (uintptr_t)consumer > 2 && producer != consumer);
  CHECK_INT(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);

  CHECK_INT(dlc_slow_fill(producer, p, N, 7, 1000), cudaSuccess);
  CHECK_INT(dlcsim_pending(), 1);
  CHECK_INT(cudaStreamQuery(producer), cudaErrorNotReady);
  CHECK_INT(cudaGetLastError(), cudaSuccess); /* not ready is an answer, not an error */
  CHECK_INT(read_on(consumer, p), 0);         /* no wait: the old bytes */
  CHECK_INT(cudaStreamQuery(producer), cudaErrorNotReady);

  CHECK_INT(cudaEventRecord(ready, producer), cudaSuccess);
  CHECK_INT(cudaEventQuery(ready), cudaErrorNotReady);
  CHECK_INT(cudaStreamWaitEvent(consumer, ready, 0), cudaSuccess);
  CHECK_INT(read_on(consumer, p), 7); /* the wait ran the producer up to the event */
  CHECK_INT(cudaEventQuery(ready), cudaSuccess);
  CHECK_INT(cudaStreamQuery(producer), cudaSuccess);

  /* the wait is on the record as it was when the wait was enqueued */
  CHECK_INT(dlc_slow_fill(producer, p, N, 8, 0), cudaSuccess);
  CHECK_INT(cudaStreamWaitEvent(consumer, ready, 0), cudaSuccess);
  CHECK_INT(cudaEventRecord(ready, producer), cudaSuccess);
  CHECK_INT(read_on(consumer, p), 7);
  CHECK_INT(cudaEventSynchronize(ready), cudaSuccess);
  CHECK_INT(read_on(consumer, p), 8);
  CHECK_INT(dlc_slow_fill(producer, p, N, 9, -1), cudaErrorInvalidValue);
  cudaGetLastError();

  cudaEventDestroy(ready);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
  cudaFree(p);
}

/* STR-05, STR-06: the legacy default stream (0 or 1) and the blocking streams wait for each
 * other; a non-blocking stream waits for neither; 2 is this thread's (blocking) default stream. */
static void test_legacy_stream(void) {
  void *p;
  cudaStream_t blocking, nonblocking;
  unsigned flags = 99;
  cudaMalloc(&p, N);
  CHECK_INT(cudaStreamCreate(&blocking), cudaSuccess);
  CHECK_INT(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  CHECK_INT(cudaStreamGetFlags(blocking, &flags), cudaSuccess);
  CHECK_INT(flags, 0);
  CHECK_INT(cudaStreamGetFlags(nonblocking, &flags), cudaSuccess);
  CHECK_INT(flags, cudaStreamNonBlocking);

  dlc_slow_fill(blocking, p, N, 3, 0);
  CHECK_INT(read_on(cudaStreamLegacy, p), 3);
  dlc_slow_fill(nonblocking, p, N, 4, 0);
  CHECK_INT(read_on(cudaStreamLegacy, p), 3);
  CHECK_INT(first_byte(p), 3); /* cudaMemcpy is on the legacy stream too */
  CHECK_INT(read_on(nonblocking, p), 4);

  dlc_slow_fill(cudaStreamPerThread, p, N, 5, 0);
  CHECK_INT(read_on(0, p), 5);
  dlc_slow_fill(0, p, N, 6, 0);
  CHECK_INT(read_on(blocking, p), 6); /* a blocking stream waits for the legacy stream */
  dlc_slow_fill(0, p, N, 7, 0);
  CHECK_INT(read_on(nonblocking, p), 6); /* a non-blocking one does not */
  CHECK_INT(read_on(cudaStreamPerThread, p), 7);
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(nonblocking);
  cudaFree(p);
}

/* A producer's export, as pyref's: an event recorded on the data's stream, the consumer's
 * stream made to wait on it, the event destroyed. Many of them while nothing synchronises keep
 * the queues and the event slots bounded (a GPU drains its queues; the simulation must not grow
 * without end, or an export/release loop looks like a leak of the producer's), keep the order,
 * and never give a destroyed event's handle again. */
static void test_export_pattern_is_bounded(void) {
  void *p;
  cudaStream_t producer, blocking;
  cudaEvent_t first = NULL, ev = NULL;
  int distinct = 1;
  cudaMalloc(&p, N);
  CHECK_INT(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  CHECK_INT(cudaStreamCreate(&blocking), cudaSuccess);
  CHECK_INT(dlc_slow_fill(producer, p, N, 9, 1000), cudaSuccess);
  unsigned long long before = dlcsim_pending();
  for (int i = 0; i < 10000; i++) {
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) break;
    if (i == 0)
      first = ev;
    else if (ev == first)
      distinct = 0;
    cudaEventRecord(ev, producer);
    cudaStreamWaitEvent(cudaStreamLegacy, ev, 0);
    cudaEventDestroy(ev);
  }
  CHECK(distinct);
  CHECK_INT(dlcsim_pending(), before + 2); /* one record, one wait */
  CHECK_INT(cudaEventQuery(first), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  CHECK_INT(cudaStreamQuery(producer), cudaErrorNotReady);
  CHECK_INT(read_on(cudaStreamLegacy, p), 9); /* the one wait still orders after the fill */

  /* a wait merged into the one before it orders what it would have: here the blocking
   * stream's work enqueued between the two (the legacy stream's implicit wait) */
  CHECK_INT(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  CHECK_INT(cudaEventRecord(ev, producer), cudaSuccess);
  CHECK_INT(cudaStreamWaitEvent(cudaStreamLegacy, ev, 0), cudaSuccess);
  CHECK_INT(dlc_slow_fill(blocking, p, N, 10, 0), cudaSuccess);
  CHECK_INT(cudaEventRecord(ev, producer), cudaSuccess);
  CHECK_INT(cudaStreamWaitEvent(cudaStreamLegacy, ev, 0), cudaSuccess);
  CHECK_INT(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  CHECK_INT(cudaStreamQuery(blocking), cudaSuccess);
  cudaEventDestroy(ev);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(blocking);
  cudaFree(p);
}

static void test_host_syncs(void) {
  void *p;
  cudaStream_t s;
  cudaEvent_t ev;
  unsigned char b;
  cudaMalloc(&p, N);
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEventCreate(&ev);
  unsigned long long before = dlcsim_host_syncs();
  dlc_slow_fill(s, p, N, 1, 0);
  cudaMemcpyAsync(&b, p, 1, cudaMemcpyDeviceToHost, s);
  cudaEventRecord(ev, s);
  cudaStreamWaitEvent(0, ev, 0);
  cudaStreamQuery(s);
  cudaEventQuery(ev);
  cudaMemset(p, 2, N);
  CHECK_INT(dlcsim_host_syncs() - before, 0); /* nothing above blocks */
  CHECK_INT(cudaEventSynchronize(ev), cudaSuccess);
  CHECK_INT(cudaStreamSynchronize(s), cudaSuccess);
  CHECK_INT(cudaDeviceSynchronize(), cudaSuccess);
  CHECK_INT(first_byte(p), 2);
  CHECK_INT(dlcsim_host_syncs() - before, 4);
  CHECK_INT(cudaFree(p), cudaSuccess);
  CHECK_INT(dlcsim_host_syncs() - before, 5);
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
}

static void test_bad_handles(void) {
  cudaStream_t s;
  cudaEvent_t ev;
  void *p;
  cudaMalloc(&p, N);
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEventCreate(&ev);
  CHECK_INT(cudaStreamDestroy(0), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaStreamDestroy(cudaStreamLegacy), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaStreamDestroy(cudaStreamPerThread), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaStreamSynchronize((cudaStream_t)3), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaStreamSynchronize((cudaStream_t)ev), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaEventSynchronize((cudaEvent_t)s), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaEventRecord(ev, (cudaStream_t)ev), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaStreamWaitEvent(s, ev, 7), cudaErrorInvalidValue);
  CHECK_INT(cudaStreamCreateWithFlags(&s, 4), cudaErrorInvalidValue);
  /* a destroyed stream's pending work still runs; its handle is an error from then on */
  dlc_slow_fill(s, p, N, 9, 0);
  CHECK_INT(cudaStreamDestroy(s), cudaSuccess);
  CHECK_INT(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaMemcpyAsync(g_host, p, 1, cudaMemcpyDeviceToHost, s), cudaErrorInvalidResourceHandle);
  CHECK_INT(dlc_slow_fill(s, p, N, 1, 0), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaDeviceSynchronize(), cudaSuccess);
  CHECK_INT(first_byte(p), 9);
  CHECK_INT(cudaEventDestroy(ev), cudaSuccess);
  CHECK_INT(cudaEventQuery(ev), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaEventDestroy(ev), cudaErrorInvalidResourceHandle);
  CHECK_INT(cudaMemsetAsync((char *)p + N, 0, 1, 0), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFree(p);
}

/* Threads enqueue and synchronize concurrently; each sees its own streams' writes. The two
 * streams of a thread write different memory: the same bytes written on two streams that do
 * not wait for each other are a race in CUDA, whose outcome no test may assume (another
 * thread's cudaFree runs every pending op, in enqueue order). */
static void *worker(void *arg) {
  int id = (int)(intptr_t)arg, bad = 0;
  void *p, *q;
  cudaStream_t s;
  unsigned char b[N], c[N];
  if (cudaMalloc(&p, N) || cudaMalloc(&q, N) || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))
    return (void *)1;
  for (int i = 0; i < 200; i++) {
    int v = (id * 31 + i) & 0xFF;
    dlc_slow_fill(s, p, N, v, 0);
    dlc_slow_fill(cudaStreamPerThread, q, N, v ^ 0xFF, 0);
    cudaMemcpyAsync(b, p, N, cudaMemcpyDeviceToHost, s);
    cudaMemcpyAsync(c, q, N, cudaMemcpyDeviceToHost, cudaStreamPerThread);
    cudaStreamSynchronize(s);
    bad += b[0] != v || b[N - 1] != v;
    cudaStreamSynchronize(cudaStreamPerThread);
    bad += c[0] != (v ^ 0xFF) || c[N - 1] != (v ^ 0xFF);
  }
  cudaStreamDestroy(s);
  cudaFree(q);
  cudaFree(p);
  return (void *)(intptr_t)bad;
}

static void test_threads(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < 4; i++) {
    void *bad;
    pthread_join(t[i], &bad);
    CHECK_INT((intptr_t)bad, 0);
  }
}

/* driver.c: the PTX launch of the helper, as kit/cuda_ptx.py makes it. Only an image that
 * declares the entry loads; a launch reads its four arguments from kernelParams (u64 ptr, u64
 * n, u32 byte: its low 8 bits, s64 cycles) and fills exactly that range on its stream. */
static void test_driver_launch(void) {
  void *ctx = NULL, *module = NULL, *function = NULL, *p = NULL;
  const char *text = NULL;
  CHECK_INT(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
  CHECK(ctx != NULL);
  CHECK_INT(cuModuleLoadData(&module, ".version 7.0\n.entry other(\n"), CUDA_ERROR_INVALID_IMAGE);
  CHECK_INT(cuModuleLoadData(&module, ".version 7.0\n.visible .entry dlc_slow_fill(\n"), CUDA_SUCCESS);
  CHECK_INT(cuModuleGetFunction(&function, module, "fill"), CUDA_ERROR_NOT_FOUND);
  CHECK_INT(cuModuleGetFunction(&function, NULL, "dlc_slow_fill"), CUDA_ERROR_INVALID_HANDLE);
  CHECK_INT(cuModuleGetFunction(&function, module, "dlc_slow_fill"), CUDA_SUCCESS);
  CHECK_INT(cudaMalloc(&p, 3 * N), cudaSuccess);
  cudaStream_t s;
  CHECK_INT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  uint64_t ptr = (uint64_t)(uintptr_t)p + N, n = N;
  uint32_t byte = 0x15A;
  int64_t cycles = 1000;
  void *params[] = {&ptr, &n, &byte, &cycles};
  CHECK_INT(cuLaunchKernel(function, 1, 1, 1, 256, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  CHECK_INT(cuLaunchKernel(function, 1, 1, 1, 2048, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
  CHECK_INT(cuLaunchKernel(function, 1, 1, 1, 256, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
  CHECK_INT(first_byte((char *)p + N), 0); /* the legacy stream does not wait for a non-blocking one */
  CHECK_INT(cudaStreamSynchronize(s), cudaSuccess);
  CHECK_INT(first_byte(p), 0);
  CHECK_INT(first_byte((char *)p + N), 0x5A);
  CHECK_INT(first_byte((char *)p + 2 * N - 1), 0x5A);
  CHECK_INT(first_byte((char *)p + 2 * N), 0);
  cycles = -1;
  CHECK_INT(cuLaunchKernel(function, 1, 1, 1, 256, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
  CHECK_INT(cudaGetLastError(), cudaSuccess); /* the driver's error is not the runtime's */
  CHECK_INT(cuGetErrorString(CUDA_ERROR_INVALID_IMAGE, &text), CUDA_SUCCESS);
  CHECK_STR(text, "device kernel image is invalid");
  CHECK_INT(cudaStreamDestroy(s), cudaSuccess);
  CHECK_INT(cudaFree(p), cudaSuccess);
}

int main(void) {
  test_device_and_errors();
  test_driver_launch();
  test_memory();
  test_event_wait();
  test_legacy_stream();
  test_export_pattern_is_bounded();
  test_host_syncs();
  test_bad_handles();
  test_threads();
  CHECK_INT(cudaDeviceSynchronize(), cudaSuccess);
  CHECK_INT(dlcsim_pending(), 0);
  return tap_finish();
}
