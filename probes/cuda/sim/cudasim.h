/* cudasim.h: the subset of the CUDA runtime API that dlconform's simulated runtime implements
 * (and the five driver API functions of the helper's PTX launch, driver.c)
 * (probes/cuda/sim, built by `make build` into build/cuda/sim/libcudart.so), declared with
 * CUDA's own names, values and signatures so that a caller (harness/dlconform/kit/cuda.py)
 * runs unchanged on the real libcudart. No CUDA header is needed: this builds everywhere.
 *
 * Beyond CUDA's names it exports dlc_slow_fill (the helper of probes/cuda/dlc_cuda.cu: here a
 * deferred fill on a stream) and two counters of the simulation itself (dlcsim_*). */
#ifndef DLCONFORM_CUDASIM_H
#define DLCONFORM_CUDASIM_H

#include <stddef.h>

#define DLCSIM_API __attribute__((visibility("default")))

/* cudaError_t is an enum in CUDA; an int has its ABI. The values are CUDA's. */
typedef int cudaError_t;
enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04
#define cudaEventWaitDefault 0x00

/* the version the simulation answers (CUDA 13.0) */
#define DLCSIM_CUDA_VERSION 13000

DLCSIM_API cudaError_t cudaGetDeviceCount(int *count);
DLCSIM_API cudaError_t cudaGetDevice(int *device);
DLCSIM_API cudaError_t cudaSetDevice(int device);
DLCSIM_API cudaError_t cudaRuntimeGetVersion(int *version);
DLCSIM_API cudaError_t cudaDriverGetVersion(int *version);
DLCSIM_API cudaError_t cudaGetLastError(void);
DLCSIM_API cudaError_t cudaPeekAtLastError(void);
DLCSIM_API const char *cudaGetErrorString(cudaError_t error);
DLCSIM_API const char *cudaGetErrorName(cudaError_t error);

DLCSIM_API cudaError_t cudaMalloc(void **ptr, size_t size);
DLCSIM_API cudaError_t cudaFree(void *ptr);
DLCSIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
DLCSIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                       cudaStream_t stream);
DLCSIM_API cudaError_t cudaMemset(void *ptr, int value, size_t count);
DLCSIM_API cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream);

DLCSIM_API cudaError_t cudaStreamCreate(cudaStream_t *stream);
DLCSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
DLCSIM_API cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int *flags);
DLCSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t stream);
DLCSIM_API cudaError_t cudaStreamQuery(cudaStream_t stream);
DLCSIM_API cudaError_t cudaStreamDestroy(cudaStream_t stream);
DLCSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);

DLCSIM_API cudaError_t cudaEventCreate(cudaEvent_t *event);
DLCSIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
DLCSIM_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
DLCSIM_API cudaError_t cudaEventQuery(cudaEvent_t event);
DLCSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t event);
DLCSIM_API cudaError_t cudaEventDestroy(cudaEvent_t event);

DLCSIM_API cudaError_t cudaDeviceSynchronize(void);

/* probes/cuda/dlc_cuda.cu's helper: on the real device a kernel on `stream` that spins
 * `cycles` clock cycles and then writes `byte` into the n bytes at ptr; here that write,
 * deferred on `stream` like any other operation (`cycles` only has to be >= 0). */
DLCSIM_API int dlc_slow_fill(void *stream, void *ptr, size_t n, int byte, long long cycles);

/* The CUDA driver API functions kit/cuda_ptx.py launches the helper's PTX with (driver.c):
 * CUresult is an enum in CUDA; an int has its ABI. The values are CUDA's. */
typedef int CUresult;
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
};
DLCSIM_API CUresult cuCtxGetCurrent(void **ctx);
DLCSIM_API CUresult cuModuleLoadData(void **module, const void *image);
DLCSIM_API CUresult cuModuleGetFunction(void **function, void *module, const char *name);
DLCSIM_API CUresult cuLaunchKernel(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                   unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared,
                                   void *stream, void **params, void **extra);
DLCSIM_API CUresult cuGetErrorString(CUresult error, const char **text);

/* How many calls blocked the host on device work (cudaStreamSynchronize, cudaEventSynchronize,
 * cudaDeviceSynchronize, cudaMemcpy, cudaFree), counted whether or not work was pending. */
DLCSIM_API unsigned long long dlcsim_host_syncs(void);
/* How many enqueued operations have not run yet, over every stream. */
DLCSIM_API unsigned long long dlcsim_pending(void);

#endif /* DLCONFORM_CUDASIM_H */
