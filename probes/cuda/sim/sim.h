/* sim.h: the simulated CUDA runtime's internals, shared by its files (driver.c, the PTX launch
 * of the helper, uses only the exported API of runtime.c):
 *   memory.c   the device address space: allocations at opaque addresses, host storage behind them
 *   engine.c   streams, events and their queues of deferred operations, and running them
 *   runtime.c  the exported CUDA API: argument checks, the lock, last error, host-sync count
 * runtime.c holds sim_lock around every call into the other two; they assume it held. */
#ifndef DLCONFORM_CUDASIM_SIM_H
#define DLCONFORM_CUDASIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "cudasim.h"

/* ---- memory.c ---- */
/* A new allocation of n > 0 bytes, zero-filled, 256-aligned, in the device range. */
cudaError_t sim_mem_alloc(size_t n, uintptr_t *out);
/* Frees the allocation that starts at addr; cudaErrorInvalidValue for any other address. */
cudaError_t sim_mem_free(uintptr_t addr);
/* The host storage of [addr, addr + n) when it lies inside one live allocation, else NULL. */
unsigned char *sim_mem_host(uintptr_t addr, size_t n);
/* Whether addr lies in the device address range (allocated or not). */
int sim_mem_is_device(uintptr_t addr);

/* ---- engine.c ---- */
enum sim_op_kind { SIM_COPY, SIM_FILL, SIM_RECORD, SIM_WAIT };

/* One deferred operation. seq numbers every enqueued op, over all streams, in enqueue order:
 * an op only ever waits for ops of smaller seq, so running never cycles. */
typedef struct sim_op {
  struct sim_op *next;
  uint64_t seq;
  enum sim_op_kind kind;
  unsigned char *dst;       /* COPY, FILL: host storage (device memory resolved at enqueue) */
  const unsigned char *src; /* COPY */
  size_t n;                 /* COPY, FILL */
  int byte;                 /* FILL */
  size_t event;             /* RECORD, WAIT: the event's index */
  size_t record_stream;     /* WAIT: the stream and seq of the record it waits for */
  uint64_t record_seq;
} sim_op;

/* The stream a handle names: 0 and 1 (cudaStreamLegacy) the legacy default stream, 2
 * (cudaStreamPerThread) the calling thread's default stream, else a live created stream. */
cudaError_t sim_stream_of(cudaStream_t handle, size_t *index);
cudaError_t sim_stream_new(unsigned flags, cudaStream_t *handle);
cudaError_t sim_stream_flags(size_t index, unsigned *flags);
/* Invalidates a created stream's handle; its pending work still runs when waited for. */
cudaError_t sim_stream_destroy(cudaStream_t handle);
cudaError_t sim_event_of(cudaEvent_t handle, size_t *index);
cudaError_t sim_event_new(unsigned flags, cudaEvent_t *handle);
cudaError_t sim_event_destroy(cudaEvent_t handle);

/* Appends a copy of *op to the stream's queue; returns its seq (0 when out of memory). */
uint64_t sim_enqueue(size_t stream, const sim_op *op);
/* Notes that the event's latest record is the op `seq` on `stream` (one more queued). */
void sim_event_recorded(size_t event, size_t stream, uint64_t seq);
/* cudaEventRecord: a RECORD of the event on the stream; returns its seq (0: out of memory). */
uint64_t sim_enqueue_record(size_t stream, size_t event);
/* cudaStreamWaitEvent: the stream waits for the event's latest record; 0 when out of memory. */
int sim_enqueue_wait(size_t stream, size_t event);
/* The event's latest record (stream and seq); seq 0 when never recorded. */
void sim_event_last(size_t event, size_t *stream, uint64_t *seq);
/* Runs the stream's queue in order up to and including the op `upto` (each op first running
 * what it waits for). */
void sim_run_stream(size_t stream, uint64_t upto);
/* Runs every queue to its end. */
void sim_run_all(void);
int sim_stream_idle(size_t stream);
int sim_event_done(size_t event);
unsigned long long sim_pending(void);

#endif /* DLCONFORM_CUDASIM_SIM_H */
