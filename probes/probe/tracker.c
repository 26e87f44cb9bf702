/* tracker.c: `instrument(capsule)` and the `Tracker` type: deleter accounting.
 *
 * instrument() swaps the managed struct's `deleter` for a trampoline. The trampoline may be
 * called from any thread, with or without the GIL, even after interpreter finalisation
 * (OWN-04), so its state lives in a static table guarded by a pthread mutex, never in
 * Python objects. Per call it records (thread id, GIL held, Py_IsInitialized) and then
 * forwards to the original deleter if that is non-NULL (OWN-01).
 *
 * Invariants of the table:
 *  - at most one live slot per struct address (`managed` != NULL); a stale slot (its
 *    struct freed, the address possibly reused) has `managed` == NULL and is never found by
 *    a trampoline;
 *  - a slot is armed once per instrument() of its struct (`armed`); a producer that hands
 *    the same struct out more than once (a cached export, each hand-out holding a
 *    reference) legitimately gets one deleter call per hand-out. Calls beyond `armed` are
 *    recorded but not forwarded: a consumer calling the deleter twice (OWN-03) is reported
 *    as calls == 2 instead of crashing on a double free;
 *  - a slot outlives its Trackers: it is reused only once no Tracker refers to it, no call
 *    is in flight and every armed call was forwarded. Reuse is lazy (when no free slot is
 *    left), because a cached struct can outlive its hand-outs with the trampoline still
 *    installed; a full table is a RuntimeError;
 *  - the original deleter runs outside the mutex (it may take the GIL, OWN-04, or free
 *    memory that another instrument() reuses); a slot with a call in flight is not reused.
 */
#include "probe.h"

#include <pthread.h>
#include <stdio.h>

#define TRACK_SLOTS 16384
#define TRACK_LOG 16 /* calls logged per slot; later calls are only counted */

typedef struct {
  unsigned long thread_id;
  int gil_held;
  int py_initialized;
} track_call;

typedef struct {
  int in_use;
  int versioned;
  void *managed; /* lookup key; NULL when stale */
  void (*orig_legacy)(struct DLManagedTensor *);
  void (*orig_versioned)(struct DLManagedTensorVersioned *);
  uint64_t gen;      /* bumped on each reuse so a Tracker never reads another's slot */
  long trackers;     /* live Tracker objects */
  uint64_t armed;    /* deleter calls to forward (one per instrument() of this struct) */
  uint64_t calls;    /* deleter calls seen */
  uint64_t forwarded;
  long in_call;      /* forwards in flight */
  track_call log[TRACK_LOG];
} track_slot;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static track_slot g_slots[TRACK_SLOTS];
static int g_high; /* slots [0, g_high) have been used at least once */

static int slot_reclaimable(const track_slot *s) {
  return s->trackers == 0 && s->in_call == 0 && s->forwarded >= s->armed;
}

/* Caller holds g_lock. */
static track_slot *find_live(const void *managed, int versioned) {
  for (int i = 0; i < g_high; i++) {
    track_slot *s = &g_slots[i];
    if (s->in_use && s->managed == managed && s->versioned == versioned) return s;
  }
  return NULL;
}

/* Caller holds g_lock. A never-used or freed slot first, else the first reclaimable one. */
static track_slot *alloc_slot(void) {
  for (int i = 0; i < g_high; i++)
    if (!g_slots[i].in_use) return &g_slots[i];
  if (g_high < TRACK_SLOTS) return &g_slots[g_high++];
  for (int i = 0; i < TRACK_SLOTS; i++)
    if (slot_reclaimable(&g_slots[i])) return &g_slots[i];
  return NULL;
}

static void trampoline(void *self, int versioned) {
  track_call rec;
  rec.thread_id = PyThread_get_thread_ident(); /* pthread_self: no GIL needed */
  rec.py_initialized = Py_IsInitialized();
  /* PyGILState_Check is only meaningful while the interpreter lives. */
  rec.gil_held = rec.py_initialized ? PyGILState_Check() : 0;

  void (*orig_l)(struct DLManagedTensor *) = NULL;
  void (*orig_v)(struct DLManagedTensorVersioned *) = NULL;
  int forward = 0;
  pthread_mutex_lock(&g_lock);
  track_slot *s = find_live(self, versioned);
  if (s != NULL) {
    if (s->calls < TRACK_LOG) s->log[s->calls] = rec;
    s->calls++;
    if (s->forwarded < s->armed) {
      forward = 1;
      s->forwarded++;
      s->in_call++;
      orig_l = s->orig_legacy;
      orig_v = s->orig_versioned;
    }
  }
  pthread_mutex_unlock(&g_lock);
  if (s == NULL) {
    /* Not ours any more (its slot was reused): the original is unknown, so the struct
     * leaks rather than risking a wrong call. */
    fprintf(stderr, "dlconform._probe: deleter trampoline called for untracked struct %p\n",
            self);
    return;
  }
  if (forward) {
    /* OWN-01: a NULL original deleter is skipped. */
    if (versioned && orig_v != NULL) orig_v((struct DLManagedTensorVersioned *)self);
    if (!versioned && orig_l != NULL) orig_l((struct DLManagedTensor *)self);
    pthread_mutex_lock(&g_lock);
    s->in_call--;
    pthread_mutex_unlock(&g_lock);
  }
}

/* Two trampolines with the exact deleter signatures: no function-pointer casts. */
static void trampoline_legacy(struct DLManagedTensor *self) { trampoline(self, 0); }
static void trampoline_versioned(struct DLManagedTensorVersioned *self) {
  trampoline(self, 1);
}

/* ---- Tracker ----------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  int slot;
  uint64_t gen;
  int versioned;
  void *managed;
  int original_null;
} ProbeTracker;

static void tracker_dealloc(PyObject *o) {
  ProbeTracker *t = (ProbeTracker *)o;
  if (t->slot < 0) {
    Py_TYPE(o)->tp_free(o);
    return;
  }
  pthread_mutex_lock(&g_lock);
  track_slot *s = &g_slots[t->slot];
  if (s->in_use && s->gen == t->gen) {
    s->trackers--;
    /* A stale slot whose calls are all done has no reader and no caller left. */
    if (s->managed == NULL && slot_reclaimable(s)) s->in_use = 0;
  }
  pthread_mutex_unlock(&g_lock);
  Py_TYPE(o)->tp_free(o);
}

/* Copies the slot under the lock; -1 (RuntimeError) if it is not this Tracker's any more,
 * which the invariants above rule out. */
static int tracker_snapshot(ProbeTracker *t, track_slot *out) {
  int ok;
  pthread_mutex_lock(&g_lock);
  track_slot *s = &g_slots[t->slot];
  ok = s->in_use && s->gen == t->gen;
  if (ok) *out = *s;
  pthread_mutex_unlock(&g_lock);
  if (!ok) PyErr_SetString(PyExc_RuntimeError, "tracker slot was reused (internal error)");
  return ok ? 0 : -1;
}

static PyObject *tracker_calls(PyObject *o, void *c) {
  (void)c;
  track_slot s;
  if (tracker_snapshot((ProbeTracker *)o, &s) < 0) return NULL;
  return PyLong_FromUnsignedLongLong(s.calls);
}

static PyObject *tracker_forwarded(PyObject *o, void *c) {
  (void)c;
  track_slot s;
  if (tracker_snapshot((ProbeTracker *)o, &s) < 0) return NULL;
  return PyLong_FromUnsignedLongLong(s.forwarded);
}

static PyObject *tracker_armed(PyObject *o, void *c) {
  (void)c;
  track_slot s;
  if (tracker_snapshot((ProbeTracker *)o, &s) < 0) return NULL;
  return PyLong_FromUnsignedLongLong(s.armed);
}

static PyObject *tracker_original_null(PyObject *o, void *c) {
  (void)c;
  return PyBool_FromLong(((ProbeTracker *)o)->original_null);
}

static PyObject *tracker_kind(PyObject *o, void *c) {
  (void)c;
  return PyUnicode_FromString(((ProbeTracker *)o)->versioned ? "versioned" : "legacy");
}

static PyObject *tracker_pointer(PyObject *o, void *c) {
  (void)c;
  return probe_ptr_int(((ProbeTracker *)o)->managed);
}

static PyObject *tracker_log(PyObject *o, void *c) {
  (void)c;
  track_slot s;
  if (tracker_snapshot((ProbeTracker *)o, &s) < 0) return NULL;
  uint64_t n = s.calls < TRACK_LOG ? s.calls : TRACK_LOG;
  PyObject *list = PyList_New((Py_ssize_t)n);
  if (list == NULL) return NULL;
  for (uint64_t i = 0; i < n; i++) {
    PyObject *d = Py_BuildValue("{s:k,s:O,s:O}", "thread_id", s.log[i].thread_id, "gil_held",
                                s.log[i].gil_held ? Py_True : Py_False, "py_initialized",
                                s.log[i].py_initialized ? Py_True : Py_False);
    if (d == NULL) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, d);
  }
  return list;
}

static PyObject *tracker_repr(PyObject *o) {
  ProbeTracker *t = (ProbeTracker *)o;
  track_slot s;
  if (tracker_snapshot(t, &s) < 0) return NULL;
  return PyUnicode_FromFormat("<dlconform._probe.Tracker %s %p calls=%llu forwarded=%llu>",
                              t->versioned ? "versioned" : "legacy", t->managed,
                              (unsigned long long)s.calls, (unsigned long long)s.forwarded);
}

static PyGetSetDef tracker_getset[] = {
    {"calls", tracker_calls, NULL, "deleter calls seen so far", NULL},
    {"original_null", tracker_original_null, NULL, "the original deleter was NULL (OWN-01)",
     NULL},
    {"log", tracker_log, NULL,
     "per call (first 16): dict of thread_id, gil_held, py_initialized (OWN-04)", NULL},
    {"forwarded", tracker_forwarded, NULL,
     "calls passed on to the original deleter (at most `armed`)", NULL},
    {"armed", tracker_armed, NULL,
     "instrument() calls on this struct: calls beyond this are not forwarded", NULL},
    {"kind", tracker_kind, NULL, "'legacy' or 'versioned'", NULL},
    {"pointer", tracker_pointer, NULL, "the managed struct's address", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ProbeTracker_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dlconform._probe.Tracker",
    .tp_basicsize = sizeof(ProbeTracker),
    .tp_dealloc = tracker_dealloc,
    .tp_repr = tracker_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Deleter accounting for one instrumented managed struct (see instrument()).",
    .tp_getset = tracker_getset,
};

PyObject *probe_instrument(PyObject *self, PyObject *obj) {
  (void)self;
  probe_capsule c;
  if (probe_capsule_read(obj, &c) < 0) return NULL;
  if (c.kind != PROBE_KIND_LEGACY && c.kind != PROBE_KIND_VERSIONED) {
    PyErr_Format(PyExc_ValueError, "cannot instrument a capsule named %s (%s, CAP-04)",
                 c.name ? c.name : "NULL", probe_kind_str(c.kind));
    return NULL;
  }
  int versioned = c.kind == PROBE_KIND_VERSIONED;
  ProbeTracker *t = PyObject_New(ProbeTracker, &ProbeTracker_Type);
  if (t == NULL) return NULL;
  t->slot = -1; /* not attached yet: dealloc leaves the table alone */

  /* The deleter field is read and written for any version: it keeps its offset across
   * majors (VER-10), and calling it is always allowed (VER-08). */
  DLManagedTensor *ml = versioned ? NULL : (DLManagedTensor *)c.pointer;
  DLManagedTensorVersioned *mv = versioned ? (DLManagedTensorVersioned *)c.pointer : NULL;

  pthread_mutex_lock(&g_lock);
  track_slot *s = find_live(c.pointer, versioned);
  int already = versioned ? mv->deleter == trampoline_versioned
                          : ml->deleter == trampoline_legacy;
  if (s != NULL && already) {
    /* The same live struct handed out again (cached export): one more call to expect. */
    s->armed++;
  } else {
    if (s != NULL) {
      /* The address was freed and reused by a new struct: the old slot goes stale. */
      s->managed = NULL;
      if (slot_reclaimable(s)) s->in_use = 0;
    }
    if (already) {
      /* Our trampoline with no live slot: nothing knows the original any more. */
      pthread_mutex_unlock(&g_lock);
      Py_DECREF(t);
      PyErr_SetString(PyExc_RuntimeError, "struct carries an untracked trampoline");
      return NULL;
    }
    s = alloc_slot();
    if (s == NULL) {
      pthread_mutex_unlock(&g_lock);
      Py_DECREF(t);
      PyErr_Format(PyExc_RuntimeError,
                   "instrument table full (%d structs with live Trackers or pending calls)",
                   TRACK_SLOTS);
      return NULL;
    }
    uint64_t gen = s->gen + 1;
    memset(s, 0, sizeof *s);
    s->gen = gen;
    s->in_use = 1;
    s->versioned = versioned;
    s->managed = c.pointer;
    s->armed = 1;
    if (versioned) {
      s->orig_versioned = mv->deleter;
      mv->deleter = trampoline_versioned;
    } else {
      s->orig_legacy = ml->deleter;
      ml->deleter = trampoline_legacy;
    }
  }
  s->trackers++;
  t->slot = (int)(s - g_slots);
  t->gen = s->gen;
  t->versioned = versioned;
  t->managed = c.pointer;
  t->original_null = versioned ? s->orig_versioned == NULL : s->orig_legacy == NULL;
  pthread_mutex_unlock(&g_lock);
  return (PyObject *)t;
}
