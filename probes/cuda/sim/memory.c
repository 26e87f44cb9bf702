/* memory.c: the simulated device's memory.
 *
 * Invariants:
 * - device addresses lie in a range reserved with PROT_NONE: nothing of the host is ever mapped
 *   there, so a host read of a device address faults instead of reading something (reading
 *   device memory needs a cudaMemcpy, as on a real device without unified memory);
 * - the bytes of an allocation live in host storage of its own, reached only through
 *   sim_mem_host, which checks that the whole range lies inside one live allocation;
 * - allocations are 256-byte aligned (cudaMalloc's guarantee), zero-filled, and placed first-fit
 *   in address order, so the same calls give the same layout;
 * - the device holds SIM_MEMORY bytes: an allocation that would take the live ones past it
 *   fails with cudaErrorMemoryAllocation, as on a full device (a consumer that copies a
 *   stride-0 giant meets that, not the host's out-of-memory killer). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

#define SIM_ALIGN ((size_t)256)
/* 64 GiB of address space, reserved, never backed */
#define SIM_SPACE ((size_t)1 << 36)
/* the device's memory: 1 GiB */
#define SIM_MEMORY ((size_t)1 << 30)

typedef struct {
  uintptr_t addr;
  size_t span; /* rounded up to SIM_ALIGN: the address space it takes */
  size_t size; /* what was asked: the bytes a copy may touch */
  unsigned char *host;
} sim_block;

static uintptr_t g_base;
static sim_block *g_blocks; /* sorted by addr */
static size_t g_count, g_cap;
static size_t g_used; /* bytes of the live allocations (sizes as asked) */

static int reserve(void) {
  if (g_base) return 1;
  void *p = mmap(NULL, SIM_SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 0;
  g_base = (uintptr_t)p;
  return 1;
}

int sim_mem_is_device(uintptr_t addr) { return g_base && addr >= g_base && addr - g_base < SIM_SPACE; }

cudaError_t sim_mem_alloc(size_t n, uintptr_t *out) {
  if (n == 0 || n > SIM_MEMORY - g_used || !reserve()) return cudaErrorMemoryAllocation;
  size_t span = (n + SIM_ALIGN - 1) & ~(SIM_ALIGN - 1);
  if (g_count == g_cap) {
    size_t cap = g_cap ? 2 * g_cap : 64;
    sim_block *grown = realloc(g_blocks, cap * sizeof *grown);
    if (!grown) return cudaErrorMemoryAllocation;
    g_blocks = grown;
    g_cap = cap;
  }
  /* first fit: the lowest gap of at least span bytes */
  uintptr_t cursor = g_base;
  size_t at = 0;
  for (; at < g_count; at++) {
    if (g_blocks[at].addr - cursor >= span) break;
    cursor = g_blocks[at].addr + g_blocks[at].span;
  }
  if (at == g_count && g_base + SIM_SPACE - cursor < span) return cudaErrorMemoryAllocation;
  unsigned char *host = calloc(1, n);
  if (!host) return cudaErrorMemoryAllocation;
  memmove(&g_blocks[at + 1], &g_blocks[at], (g_count - at) * sizeof *g_blocks);
  g_blocks[at] = (sim_block){cursor, span, n, host};
  g_count++;
  g_used += n;
  *out = cursor;
  return cudaSuccess;
}

/* The index of the block containing addr, or g_count. */
static size_t find(uintptr_t addr) {
  size_t lo = 0, hi = g_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g_blocks[mid].addr + g_blocks[mid].span <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < g_count && g_blocks[lo].addr <= addr ? lo : g_count;
}

cudaError_t sim_mem_free(uintptr_t addr) {
  size_t i = find(addr);
  if (i == g_count || g_blocks[i].addr != addr) return cudaErrorInvalidValue;
  free(g_blocks[i].host);
  g_used -= g_blocks[i].size;
  memmove(&g_blocks[i], &g_blocks[i + 1], (g_count - i - 1) * sizeof *g_blocks);
  g_count--;
  return cudaSuccess;
}

unsigned char *sim_mem_host(uintptr_t addr, size_t n) {
  size_t i = find(addr);
  if (i == g_count) return NULL;
  size_t off = addr - g_blocks[i].addr;
  if (off > g_blocks[i].size || n > g_blocks[i].size - off) return NULL;
  return g_blocks[i].host + off;
}
