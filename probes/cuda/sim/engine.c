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
 * destroyed stream is seen), and a created handle is never 0, 1 or 2. An event's slot is
 * reused once it is destroyed and no record of it is queued, under a new generation that its
 * new handle carries, so an old handle still names no live event.
 *
 * Bounded queues: a program that records, waits on and destroys an event per call (a DLPack
 * producer's export) must not grow the simulation without end while nothing synchronises, as a
 * GPU drains its queues by itself. So a wait enqueued behind a wait for the same stream becomes
 * that one wait, for the later record, with the new wait's seq (it stays the tail: it orders
 * what it did, and whatever the new one would have, implicit legacy-stream ordering included),
 * and a record enqueued behind a record of a destroyed event takes that op over, with its own
 * seq (no one can ask a destroyed event, and the ops before the old record stay before it). */
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
  uint64_t gen;         /* the slot's generation, part of its handle: bumped at each reuse */
  size_t records;       /* RECORD ops of this slot still queued: the slot is free only at 0 */
  size_t record_stream; /* the latest record: its stream and seq (0: never recorded) */
  uint64_t record_seq;
  uint64_t ran; /* the largest seq of this event's records that have run */
} sim_event;

/* handles: base + index * step; distinct ranges, so a stream is never taken for an event */
#define STREAM_BASE ((uintptr_t)0x51000000u)
#define EVENT_BASE ((uintptr_t)0xE1000000u)
#define HANDLE_STEP ((uintptr_t)16)
/* an event handle's serial: its slot index in the low EVENT_INDEX_BITS, its generation above */
#define EVENT_INDEX_BITS 24
#define EVENT_INDEX_MASK ((((uint64_t)1) << EVENT_INDEX_BITS) - 1)
_Static_assert(sizeof(uintptr_t) >= 8, "event handles carry a generation above 24 index bits");

static sim_stream *g_streams; /* index 0: the legacy default stream */
static size_t g_nstreams, g_capstreams;
static sim_event *g_events;
static size_t g_nevents, g_capevents;
static size_t *g_free_events; /* slots destroyed with no record queued */
static size_t g_nfree, g_capfree;
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
  uint64_t serial = (h - EVENT_BASE) / HANDLE_STEP;
  size_t i = (size_t)(serial & EVENT_INDEX_MASK);
  if (i >= g_nevents || !g_events[i].alive || g_events[i].gen != serial >> EVENT_INDEX_BITS)
    return cudaErrorInvalidResourceHandle;
  *index = i;
  return cudaSuccess;
}

cudaError_t sim_event_new(unsigned flags, cudaEvent_t *handle) {
  size_t i;
  uint64_t gen = 0;
  if (g_nfree) {
    i = g_free_events[--g_nfree];
    gen = g_events[i].gen + 1;
  } else {
    if (g_nevents > EVENT_INDEX_MASK) return cudaErrorMemoryAllocation;
    if (!grow((void **)&g_events, &g_capevents, g_nevents, sizeof *g_events)) return cudaErrorMemoryAllocation;
    i = g_nevents++;
  }
  g_events[i] = (sim_event){.alive = 1, .flags = flags, .gen = gen};
  *handle = (cudaEvent_t)(EVENT_BASE + (uintptr_t)((gen << EVENT_INDEX_BITS) | i) * HANDLE_STEP);
  return cudaSuccess;
}

/* Puts a destroyed slot with no record queued on the free list (a failed grow keeps it out:
 * a slot lost, never a handle reused). */
static void release_if_unused(size_t i) {
  if (g_events[i].alive || g_events[i].records) return;
  if (grow((void **)&g_free_events, &g_capfree, g_nfree, sizeof *g_free_events)) g_free_events[g_nfree++] = i;
}

cudaError_t sim_event_destroy(cudaEvent_t handle) {
  size_t i;
  cudaError_t e = sim_event_of(handle, &i);
  if (e) return e;
  g_events[i].alive = 0; /* records and waits already enqueued still run */
  release_if_unused(i);
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
  g_events[event].records++;
}

uint64_t sim_enqueue_record(size_t stream, size_t event) {
  sim_op *tail = g_streams[stream].tail;
  if (tail && tail->kind == SIM_RECORD && !g_events[tail->event].alive) { /* take the op over */
    size_t old = tail->event;
    g_events[old].records--;
    release_if_unused(old);
    tail->event = event;
    tail->seq = ++g_seq;
    sim_event_recorded(event, stream, tail->seq);
    return tail->seq;
  }
  sim_op op = {.kind = SIM_RECORD, .event = event};
  uint64_t seq = sim_enqueue(stream, &op);
  if (seq) sim_event_recorded(event, stream, seq);
  return seq;
}

int sim_enqueue_wait(size_t stream, size_t event) {
  sim_event *ev = &g_events[event];
  if (ev->record_seq == 0) return 1; /* an event never recorded: nothing to wait for */
  sim_op *tail = g_streams[stream].tail;
  if (tail && tail->kind == SIM_WAIT && tail->record_stream == ev->record_stream &&
      tail->record_seq <= ev->record_seq) {
    tail->record_seq = ev->record_seq; /* one wait for the later record of the same stream */
    tail->event = event;
    tail->seq = ++g_seq;
    return 1;
  }
  sim_op op = {.kind = SIM_WAIT, .event = event, .record_stream = ev->record_stream, .record_seq = ev->record_seq};
  return sim_enqueue(stream, &op) != 0;
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
      g_events[op->event].records--;
      release_if_unused(op->event);
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
