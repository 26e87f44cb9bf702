/* stream_probe: the GPU half of the stream checks (STR-01, STR-03, STR-05..07), built by
 * `make cuda` where nvcc exists.
 *
 * Without a CUDA device it prints "skip: no CUDA device (...)" and exits 77, so the suite
 * reports `skip` with that reason. With one, it checks on this driver what the virtual
 * stream device (probes/ref/vstream.c) models: a consumer stream that waits on an event
 * recorded on the producer's stream sees the producer's writes (STR-01), and the legacy (1)
 * and per-thread (2) default stream handles are accepted by the runtime (STR-05, STR-06).
 * Exit 0 with "pass: ...", 1 with "fail: ...". */
#include <cstdint>
#include <cstdio>

#include <cuda_runtime.h>

#define SKIP 77

static __global__ void slow_fill(int *p, int n, int value) {
  /* a deliberately slow writer: the consumer copy must not overtake it */
  long long start = clock64();
  while (clock64() - start < 20000000LL) {
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = value;
}

static int fail(const char *what, cudaError_t e) {
  std::printf("fail: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

int main() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("skip: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return SKIP;
  }
  const int n = 1 << 16;
  int *dev = nullptr;
  int *host = nullptr;
  cudaStream_t producer, consumer;
  cudaEvent_t ready;
  if ((e = cudaMalloc(&dev, n * sizeof(int))) != cudaSuccess) return fail("cudaMalloc", e);
  if ((e = cudaMallocHost(&host, n * sizeof(int))) != cudaSuccess) return fail("cudaMallocHost", e);
  cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaMemset(dev, 0, n * sizeof(int));
  cudaDeviceSynchronize();
  /* the producer's work, then what __dlpack__(stream=consumer) must do: event + wait */
  slow_fill<<<1, 256, 0, producer>>>(dev, n, 7);
  cudaEventRecord(ready, producer);
  cudaStreamWaitEvent(consumer, ready, 0);
  cudaMemcpyAsync(host, dev, n * sizeof(int), cudaMemcpyDeviceToHost, consumer);
  if ((e = cudaStreamSynchronize(consumer)) != cudaSuccess) return fail("consumer stream", e);
  for (int i = 0; i < n; i++)
    if (host[i] != 7) {
      std::printf("fail: STR-01: element %d is %d after the event wait\n", i, host[i]);
      return 1;
    }
  /* STR-05/06: the integer stream handles 1 and 2 name the legacy and per-thread streams */
  if ((e = cudaStreamQuery(reinterpret_cast<cudaStream_t>(uintptr_t{1}))) == cudaErrorInvalidResourceHandle)
    return fail("STR-05: stream 1", e);
  if ((e = cudaStreamQuery(reinterpret_cast<cudaStream_t>(uintptr_t{2}))) == cudaErrorInvalidResourceHandle)
    return fail("STR-06: stream 2", e);
  std::printf("pass: event wait orders the consumer stream after the producer (%d device(s))\n", count);
  return 0;
}
