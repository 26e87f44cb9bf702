/* driver.c: the few CUDA driver API functions kit/cuda_ptx.py calls to launch the helper's
 * kernel from PTX (cuCtxGetCurrent, cuModuleLoadData, cuModuleGetFunction, cuLaunchKernel,
 * cuGetErrorString), so that path runs without a GPU.
 *
 * Invariants:
 * - there is one module and one function: an image is accepted when it is PTX text declaring
 *   the entry `dlc_slow_fill`; a launch of it is dlc_slow_fill(stream, ptr, n, byte, cycles)
 *   of runtime.c, its arguments read from kernelParams as the PTX declares them (u64 ptr,
 *   u64 n, u32 byte, s64 cycles), so a caller that marshals them wrongly fills the wrong bytes;
 * - the context is current where the runtime has a device (DLCSIM_DEVICE_COUNT=0: none);
 * - CUresult values are CUDA's; runtime errors of the fill map to the driver's of equal value. */
#include <stdint.h>
#include <string.h>

#include "sim.h"

static char g_context, g_module, g_function; /* their addresses are the handles */

static int have_device(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

CUresult cuCtxGetCurrent(void **ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = have_device() ? &g_context : NULL;
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(void **module, const void *image) {
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  if (!have_device()) return CUDA_ERROR_INVALID_CONTEXT;
  const char *text = image;
  if (!strstr(text, ".version ") || !strstr(text, ".entry dlc_slow_fill(")) return CUDA_ERROR_INVALID_IMAGE;
  *module = &g_module;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  if (!function || !name) return CUDA_ERROR_INVALID_VALUE;
  if (module != &g_module) return CUDA_ERROR_INVALID_HANDLE;
  if (strcmp(name, "dlc_slow_fill") != 0) return CUDA_ERROR_NOT_FOUND;
  *function = &g_function;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                        unsigned block_y, unsigned block_z, unsigned shared, void *stream, void **params,
                        void **extra) {
  if (function != &g_function) return CUDA_ERROR_INVALID_HANDLE;
  if (!params || extra || shared || !grid_x || !grid_y || !grid_z || !block_x || !block_y || !block_z ||
      (uint64_t)block_x * block_y * block_z > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t ptr, n;
  uint32_t byte;
  int64_t cycles;
  memcpy(&ptr, params[0], sizeof ptr);
  memcpy(&n, params[1], sizeof n);
  memcpy(&byte, params[2], sizeof byte);
  memcpy(&cycles, params[3], sizeof cycles);
  int e = dlc_slow_fill(stream, (void *)(uintptr_t)ptr, (size_t)n, (int)(byte & 0xFF), (long long)cycles);
  if (e == cudaSuccess) return CUDA_SUCCESS;
  cudaGetLastError(); /* the launch's error is the driver's answer, not the runtime's last error */
  return e == cudaErrorInvalidValue ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuGetErrorString(CUresult error, const char **text) {
  if (!text) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_INVALID_IMAGE: *text = "device kernel image is invalid"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context"; break;
    case CUDA_ERROR_INVALID_HANDLE: *text = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
    default: *text = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
