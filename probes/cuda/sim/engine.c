/* engine.c: streams, events and the deferred operations on them (CUDA's ordering semantics,
 * made deterministic).
 *
 * A stream is a FIFO of operations that run only when something waits for them: nothing runs
 * on its own, so work that no one synchronised with has visibly not happened (the breach of
 * STR-01 is observable without a GPU: a reader that did not wait sees the old bytes).
 * Running an op first runs what it waits for:
 * - a WAIT (cudaStreamWaitEvent) runs the recording stream up to the event's record as it was
 *   when the wait was enqueued;
 * - an op on the legacy default stream runs the earlier ops of every blocking stream (created
 *   without cudaStreamNonBlocking, or a per-thread default stream), and an op on a blocking
 *   stream runs the earlier ops of the legacy stream (CUDA's legacy default stream semantics;
 *   STR-05). Non-blocking streams wait for nothing implicitly.
 * Everything an op waits for has a smaller seq, so the recursion ends and never cycles.
 *
 * Handles are never reused: a destroyed stream's or event's handle stays an error (STR-11's
 * destroyed stream is seen), and a created handle is never 0, 1 or 2. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum sim_stream_kind { SIM_LEGACY, SIM_PER_THREAD, SIM_CREATED };

typedef struct {
  enum sim_stream_kind kind;
  unsigned flags;
  int alive; /* its handle is valid (the legacy and per-thread streams always are) */
  sim_op *head, *tail;
  unsigned long long pending;
} sim_stream;

typedef struct {
  int alive;
  unsigned flags;
  size_t record_stream; /* the latest record: its stream and seq (0: never recorded) */
  uint64_t record_seq;
  uint64_t ran; /* the largest seq of this event's records that have run */
} sim_event;

/* handles: base + index * step; distinct ranges, so a stream is never taken for an event */
#define STREAM_BASE ((uintptr_t)0x51000000u)
#define EVENT_BASE ((uintptr_t)0xE1000000u)
#define HANDLE_STEP ((uintptr_t)16)

static sim_stream *g_streams; /* index 0: the legacy default stream */
static size_t g_nstreams, g_capstreams;
static sim_event *g_events;
static size_t g_nevents, g_capevents;
static uint64_t g_seq;
static _Thread_local size_t t_per_thread; /* index + 1 of this thread's default stream */

static int grow(void **array, size_t *cap, size_t count, size_t item) {
  if (count < *cap) return 1;
  size_t n = *cap ? 2 * *cap : 16;
  void *p = realloc(*array, n * item);
  if (!p) return 0;
  *array = p;
  *cap = n;
  return 1;
}

static cudaError_t add_stream(enum sim_stream_kind kind, unsigned flags, size_t *index) {
  if (!grow((void **)&g_streams, &g_capstreams, g_nstreams, sizeof *g_streams)) return cudaErrorMemoryAllocation;
  g_streams[g_nstreams] = (sim_stream){kind, flags, 1, NULL, NULL, 0};
  *index = g_nstreams++;
  return cudaSuccess;
}

static cudaError_t init(void) {
  size_t legacy;
  return g_nstreams ? cudaSuccess : add_stream(SIM_LEGACY, 0, &legacy);
}

cudaError_t sim_stream_of(cudaStream_t handle, size_t *index) {
  cudaError_t e = init();
  if (e) return e;
  uintptr_t h = (uintptr_t)handle;
  if (h == 0 || h == 1) {
    *index = 0;
    return cudaSuccess;
  }
  if (h == 2) {
    if (!t_per_thread) {
      size_t i;
      if ((e = add_stream(SIM_PER_THREAD, 0, &i))) return e;
      t_per_thread = i + 1;
    }
    *index = t_per_thread - 1;
    return cudaSuccess;
  }
  if (h < STREAM_BASE || (h - STREAM_BASE) % HANDLE_STEP) return cudaErrorInvalidResourceHandle;
  size_t i = (h - STREAM_BASE) / HANDLE_STEP;
  if (i >= g_nstreams || g_streams[i].kind != SIM_CREATED || !g_streams[i].alive)
    return cudaErrorInvalidResourceHandle;
  *index = i;
  return cudaSuccess;
}

cudaError_t sim_stream_new(unsigned flags, cudaStream_t *handle) {
  size_t i;
  cudaError_t e = init();
  if (e || (e = add_stream(SIM_CREATED, flags, &i))) return e;
  *handle = (cudaStream_t)(STREAM_BASE + i * HANDLE_STEP);
  return cudaSuccess;
}

cudaError_t sim_stream_flags(size_t index, unsigned *flags) {
  *flags = g_streams[index].flags;
  return cudaSuccess;
}

cudaError_t sim_stream_destroy(cudaStream_t handle) {
  size_t i;
  cudaError_t e = sim_stream_of(handle, &i);
  if (e) return e;
  if (g_streams[i].kind != SIM_CREATED) return cudaErrorInvalidResourceHandle;
  g_streams[i].alive = 0;
  return cudaSuccess;
}

cudaError_t sim_event_of(cudaEvent_t handle, size_t *index) {
  uintptr_t h = (uintptr_t)handle;
  if (h < EVENT_BASE || (h - EVENT_BASE) % HANDLE_STEP) return cudaErrorInvalidResourceHandle;
  size_t i = (h - EVENT_BASE) / HANDLE_STEP;
  if (i >= g_nevents || !g_events[i].alive) return cudaErrorInvalidResourceHandle;
  *index = i;
  return cudaSuccess;
}

cudaError_t sim_event_new(unsigned flags, cudaEvent_t *handle) {
  if (!grow((void **)&g_events, &g_capevents, g_nevents, sizeof *g_events)) return cudaErrorMemoryAllocation;
  g_events[g_nevents] = (sim_event){1, flags, 0, 0, 0};
  *handle = (cudaEvent_t)(EVENT_BASE + g_nevents * HANDLE_STEP);
  g_nevents++;
  return cudaSuccess;
}

cudaError_t sim_event_destroy(cudaEvent_t handle) {
  size_t i;
  cudaError_t e = sim_event_of(handle, &i);
  if (e) return e;
  g_events[i].alive = 0; /* records and waits already enqueued still run */
  return cudaSuccess;
}

uint64_t sim_enqueue(size_t stream, const sim_op *op) {
  sim_op *copy = malloc(sizeof *copy);
  if (!copy) return 0;
  *copy = *op;
  copy->next = NULL;
  copy->seq = ++g_seq;
  sim_stream *s = &g_streams[stream];
  if (s->tail)
    s->tail->next = copy;
  else
    s->head = copy;
  s->tail = copy;
  s->pending++;
  return copy->seq;
}

void sim_event_recorded(size_t event, size_t stream, uint64_t seq) {
  g_events[event].record_stream = stream;
  g_events[event].record_seq = seq;
}

void sim_event_last(size_t event, size_t *stream, uint64_t *seq) {
  *stream = g_events[event].record_stream;
  *seq = g_events[event].record_seq;
}

static int blocking(size_t i) {
  return g_streams[i].kind == SIM_PER_THREAD || (g_streams[i].kind == SIM_CREATED &&
                                                 !(g_streams[i].flags & cudaStreamNonBlocking));
}

/* Runs the op at the head of stream i: first what it waits for, then its effect. */
static void run_head(size_t i) {
  sim_op *op = g_streams[i].head;
  if (g_streams[i].kind == SIM_LEGACY) {
    for (size_t j = 0; j < g_nstreams; j++)
      if (j != i && blocking(j)) sim_run_stream(j, op->seq - 1);
  } else if (blocking(i)) {
    sim_run_stream(0, op->seq - 1);
  }
  if (op->kind == SIM_WAIT) sim_run_stream(op->record_stream, op->record_seq);
  /* what ran above had smaller seqs: op is still the head of stream i */
  sim_stream *s = &g_streams[i];
  s->head = op->next;
  if (!s->head) s->tail = NULL;
  s->pending--;
  switch (op->kind) {
    case SIM_COPY:
      memmove(op->dst, op->src, op->n); /* overlapping device ranges copy as if through a buffer */
      break;
    case SIM_FILL:
      memset(op->dst, op->byte, op->n);
      break;
    case SIM_RECORD:
      if (g_events[op->event].ran < op->seq) g_events[op->event].ran = op->seq;
      break;
    case SIM_WAIT:
      break;
  }
  free(op);
}

void sim_run_stream(size_t stream, uint64_t upto) {
  while (g_streams[stream].head && g_streams[stream].head->seq <= upto) run_head(stream);
}

void sim_run_all(void) {
  for (size_t i = 0; i < g_nstreams; i++) sim_run_stream(i, UINT64_MAX);
}

int sim_stream_idle(size_t stream) { return g_streams[stream].head == NULL; }

int sim_event_done(size_t event) { return g_events[event].ran >= g_events[event].record_seq; }

unsigned long long sim_pending(void) {
  unsigned long long n = 0;
  for (size_t i = 0; i < g_nstreams; i++) n += g_streams[i].pending;
  return n;
}
