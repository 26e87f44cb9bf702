/* dlc_cuda: dlconform's helper library on a real CUDA device (build/cuda/libdlc_cuda.so, built
 * by `make cuda` where nvcc exists; linked with the shared CUDA runtime, so its streams are the
 * ones harness/dlconform/kit/cuda.py's libcudart makes).
 *
 * dlc_slow_fill is work of known length on a stream followed by a distinctive write: the stream
 * checks (STR-01, STR-03) enqueue it on a producer's stream and look at what a consumer's
 * stream reads, so no library under test is needed to observe another. The simulated runtime
 * (probes/cuda/sim) exports the same function as a deferred fill. */
#include <cstddef>

#include <cuda_runtime.h>

#define DLC_EXPORT extern "C" __attribute__((visibility("default")))

/* Every thread spins `cycles` clock cycles, then the grid writes `byte` into the n bytes:
 * nothing is written before the spin ends, so a reader ordered after the kernel sees every
 * byte and one that is not sees (at least at first) none. */
static __global__ void slow_fill(unsigned char *p, size_t n, unsigned char byte, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  size_t step = (size_t)blockDim.x * gridDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) p[i] = byte;
}

/* Enqueues the fill on `stream` (a cudaStream_t, 0/1 the legacy and 2 the per-thread default
 * stream); returns the launch's cudaError_t (0: enqueued). Nothing waits for it here. */
DLC_EXPORT int dlc_slow_fill(void *stream, void *ptr, size_t n, int byte, long long cycles) {
  if (cycles < 0 || (n > 0 && ptr == nullptr)) return (int)cudaErrorInvalidValue;
  if (n == 0) return (int)cudaSuccess;
  const unsigned threads = 256;
  size_t blocks = (n + threads - 1) / threads;
  if (blocks > 1024) blocks = 1024;
  slow_fill<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>((unsigned char *)ptr, n, (unsigned char)byte,
                                                                     cycles);
  return (int)cudaGetLastError();
}
