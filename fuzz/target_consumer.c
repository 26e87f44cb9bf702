/* target_consumer: a forged capsule goes to a consumer's from_dlpack (embedded CPython).
 *
 * Per input: decode the record, forge a capsule over memory sized by check (forge.h), wrap
 * it in a producer object (producer.h), and call from_dlpack(producer[, copy=][, device=]).
 * That plumbing lives in exchange.h, outside this instrumented file. Then the oracles run;
 * each breach prints "dlconform-oracle: CLAUSE: message" and aborts. Why each holds:
 * fuzz/README.md ("Oracles", "Why these oracles").
 *   - EXC: the call failed with an exception class the spec does not name for refusals
 *     (SystemError, which also covers "returned NULL without setting an exception",
 *     RuntimeError, AssertionError ...). DLCONFORM_FUZZ_ALLOW_EXC adds classes.
 *   - OWN-03: the deleter ran while a zero-copy result is alive, ran more than once, ran
 *     with a foreign pointer, or had not run once the result (or the refusal) was dropped.
 *   - CAP-03: an accepted import left the capsule __dlpack__ handed out unrenamed (the producer
 *     still holds it, so its name is read without changing its lifetime), or the capsule died
 *     unconsumed (its destructor called the deleter) while the zero-copy result is alive: the
 *     consumer kept the memory without taking ownership.
 *   - LAY-09 / LAY-10 / VER-09 / VER-08 / LAY-01: the consumer accepted what it must refuse:
 *     an invalid extent, an overflowing one, a dtype or device type unknown to DLPack 1.3, a
 *     major version other than 1, NULL data for a non-empty tensor.
 *   - LAY-03 / LAY-05 / SEM-01: a zero-copy result (buffer protocol, a device result's CUDA
 *     array interface, or data_ptr(): result_view.h) starts elsewhere than data + byte_offset,
 *     has byte strides other than strides * itemsize, a different shape, or an element outside
 *     the exported buffer.
 *   - LAY-11: a copy holds other elements than the export's (copy_values.h).
 *   - STR-01 (CUDA mode): a device export's bytes are still pending on the producer's stream
 *     (devmem.h); its __dlpack__ orders the stream named after them. A copy holding the bytes
 *     from before (copy_values.h), or a view read stale on its own stream after stream=-1.
 *     XAPI-19 for the same through an exchange table (current_work_stream names that stream).
 *   - STR-10: the consumer passed a stream other than None for a CPU export.
 *   - keyword, stream, refusal-class and result oracles (STR-*, VER-06, DEV-06/07,
 *     CPY-06/07/08, API-05, SEM-01 copies, FLG-03, LAY-11): consumer_oracles.h. Kind bit 4
 *     of kw makes the producer an old one (VER-06).
 *   - XAPI-04 / XAPI-06 / XAPI-11: record byte 67 offers a C exchange API table
 *     (xapi_offer.h). The consumer used a table offered on the instance only, or one of a
 *     foreign header major, or called its NULL dltensor_from_py_object_no_sync
 *     (xapi_guard.h). An offered export is versioned (dlc_rec_apply_offer).
 *   - XAPI-15: a zero-copy result kept from dltensor_from_py_object_no_sync (a view valid
 *     only until control returns) outlives the producer's tensor.
 * With DLCONFORM_FUZZ_TRIAGE set, each input first prints "dlconform-input: CLAUSE: why":
 * the clause a plain crash on it breaks. That is its must-refuse clause, DEV-07 for another
 * device, LAY-04 for NULL data of a zero-size tensor, else LAY-11 (a legal export: import it,
 * copy or raise). fuzz-ci uses it.
 * Writes into a READ_ONLY export fault on their own: the buffer sits on PROT_READ pages.
 * A record with a valid extent whose data is dangling, or whose elements take more than the
 * cap (numel * itemsize: stride-0 giants), never gets copy=True. Nor does it get device=
 * when it is on another device: a conforming consumer would then read memory the record
 * only claims, or allocate gigabytes.
 * dlconform/fuzz/consumer_oracles.py is this file in Python, for reproducers
 * (fuzz/tests/test_oracle_agreement.py holds the two together). */
#include "consumer_oracles.h"
#include "copy_values.h"
#include "result_view.h"
#include "devmem.h"
#include "exchange.h"
#include "forge.h"
#include "oracle.h"
#include "plain_import.h"
#include "producer.h"
#include "pyhost.h"
#include "xapi_guard.h"
#include "xapi_offer.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "py_refcount_calls.h" /* last: it redefines the refcount macros */


int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Input outcomes, printed at exit when DLCONFORM_FUZZ_STATS is set (benchmarks). */
static unsigned long long n_skipped, n_accepted, n_refused;
static int triage; /* DLCONFORM_FUZZ_TRIAGE: print the input's crash clause first */

static void print_stats(void) {
  fprintf(stderr, "dlconform-fuzz: consumer %s: %llu accepted, %llu refused, %llu set aside\n",
          dlc_py.consumer, n_accepted, n_refused, n_skipped);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  if (getenv("DLCONFORM_FUZZ_STATS")) atexit(print_stats);
  triage = getenv("DLCONFORM_FUZZ_TRIAGE") != NULL;
  (void)argc;
  (void)argv;
  /* Buffers up to the 1 MiB cap come from the heap, not a fresh mmap per input (page
   * faults dominated otherwise). No effect under ASan's allocator. */
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  dlc_pyhost_init();
  PyObject *entry = dlc_devmem_init(dlc_py.consumer); /* the CUDA mode's import, or NULL */
  if (entry != NULL) Py_SETREF(dlc_py.from_dlpack, entry);
  dlc_devmem_side_init(dlc_py.consumer);
  if (dlc_producer_type_init() != 0 || dlc_xapi_offer_init() != 0) {
    PyErr_Print();
    abort();
  }
  if (dlc_xapi_guard_install() != 0) abort();
  return 0;
}

/* A conforming copy of a valid extent reads or allocates numel * itemsize bytes: a copy is
 * only asked for when that is within the cap (dangling data and stride-0 giants excluded). */
static int too_big_to_copy(const dlc_plan *plan) {
  return plan->ext.status == DLC_EXTENT_OK &&
         (plan->mode == DLC_DATA_DANGLING ||
          (unsigned __int128)plan->ext.numel * plan->ext.itemsize > DLC_REC_BUFFER_CAP);
}

/* The copy value from_dlpack gets for r (DLC_COPY_*), or -1 when none is passed. */
static int copy_passed(const dlc_record *r, const dlc_plan *plan) {
  if (!(r->kw & DLC_KW_COPY)) return -1;
  int copy = r->kw_copy % 3;
  return copy == DLC_COPY_TRUE && too_big_to_copy(plan) ? -1 : copy;
}

/* device= for an export of another device asks for a copy to that device (DEV-06): as with
 * copy=True, not for a record too big to copy (torch 2.14 then allocates the gigabytes the
 * record claims, a libFuzzer out-of-memory that is no finding). The record is the decoder's
 * copy, so every oracle below sees the keywords as passed. */
static void drop_giant_copies(dlc_record *r, const dlc_plan *plan) {
  if (r->device_type != kDLCPU && too_big_to_copy(plan)) r->kw &= (uint8_t)~DLC_KW_DL_DEVICE;
}

/* The clause a consumer breaks by accepting this export (DLPack 1.3 consumer rules), with a
 * message; NULL when accepting it is fine. */
/* msg may be NULL: then nothing is formatted (the per-input fast path). */
#define FMT(...) (msg != NULL ? snprintf(msg, n, __VA_ARGS__) : 0)
static const char *refusal_clause(const dlc_record *r, const dlc_plan *p, char *msg, size_t n) {
  DLDataType dtype = {r->code, r->bits, r->lanes};
  if (r->kind & DLC_REC_USED_NAME)
    return FMT( "accepted a capsule already named used_*"), "CAP-04";
  if ((r->kind & DLC_REC_VERSIONED) && r->version_major != 1)
    return FMT( "accepted a versioned capsule of version %u.%u", r->version_major,
                    r->version_minor), "VER-08";
  switch (p->ext.status) {
    case DLC_EXTENT_OK: break;
    case DLC_EXTENT_OVERFLOW:
      return FMT( "accepted a tensor whose size overflows int64"), "LAY-10";
    case DLC_EXTENT_BAD_ITEMSIZE:
      return FMT( "accepted dtype (%u, %u, %u) of item size 0", r->code, r->bits,
                      r->lanes), "DT-10";
    default:
      return FMT( "accepted ndim %d / shape %s with extent status %s",
                      (int)r->ndim, (r->kind & DLC_REC_SHAPE_NULL) ? "NULL" : "set",
                      dlc_extent_status_name(p->ext.status)), "LAY-09";
  }
  dlc_dtype_info dt = dlc_dtype_classify(dtype, 1, 3);
  if (!dt.valid)
    return FMT( "accepted dtype (%u, %u, %u), invalid in DLPack 1.3 (%s)",
                    r->code, r->bits, r->lanes, dt.clause ? dt.clause : "?"), "VER-09";
  if (!dlc_is_known_device(r->device_type, 1, 3))
    return FMT( "accepted device type %d, unknown in DLPack 1.3", r->device_type),
           "VER-09";
  if (p->mode == DLC_DATA_NULL && !p->ext.zero_size)
    return FMT( "accepted NULL data for %llu elements",
                    (unsigned long long)p->ext.numel), "LAY-01";
  return NULL;
}

/* DT-12: the array-API dtypes every consumer must import, as (code, bits), lanes 1. */
static int array_api_dtype(const dlc_record *r) {
  static const uint8_t k[][2] = {{6, 8},  {0, 8},  {0, 16}, {0, 32}, {0, 64}, {1, 8}, {1, 16},
                                 {1, 32}, {1, 64}, {2, 32}, {2, 64}, {5, 64}, {5, 128}};
  if (r->lanes != 1) return 0;
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i)
    if (r->code == k[i][0] && r->bits == k[i][1]) return 1;
  return 0;
}

/* small: the product of the extents, zeros counted as 1, times the item size is within the
 * cap (a zero-size tensor with giant other extents may be refused: its row-major strides or
 * the product of its other extents overflow). */
static int small_span(const dlc_record *r, const dlc_plan *p) {
  unsigned __int128 span = p->ext.itemsize;
  for (int i = 0; i < dlc_rec_dims(r) && span <= DLC_REC_BUFFER_CAP; ++i)
    span *= (unsigned __int128)(r->shape[i] > 1 ? r->shape[i] : 1);
  return span <= DLC_REC_BUFFER_CAP;
}

/* The clause a consumer breaks by refusing this export, or NULL. Only plain exports count:
 * CPU (1, 0) (or CUDA (2, 0) in the CUDA mode), an array-API dtype, a small valid extent of
 * at most 8 dims with row-major or NULL strides, no byte_offset, a shape, no keywords, an
 * unconsumed capsule, version 1.0..1.3 with no flag but READ_ONLY/IS_COPIED, and versioned
 * only when the consumer passed max_version with major >= 1. Then refusing NULL strides in a
 * legacy capsule breaks LAY-07, and refusing NULL data for a zero-size tensor breaks LAY-04. */
static const char *acceptance_clause(const dlc_record *r, const dlc_plan *p, long max_major) {
  int versioned = (r->kind & DLC_REC_VERSIONED) != 0;
  /* VER-02: a consumer that did not ask for max_version >= 1 may refuse a versioned capsule */
  if (versioned && max_major < 1) return NULL;
  if (!small_span(r, p)) return NULL;
  /* the plain device: the host's, or in the CUDA mode (2, 0) too (devmem.h) */
  int plain_device =
      (r->device_type == kDLCPU || (dlc_devmem_active() && r->device_type == kDLCUDA)) &&
      r->device_id == 0;
  if (!plain_device || !array_api_dtype(r) ||
      (r->kw & (DLC_KW_PASSED | DLC_KW_OLD_PRODUCER)) != 0 ||
      p->ext.status != DLC_EXTENT_OK || r->ndim > 8 || !p->ext.row_major ||
      r->byte_offset != 0 || (r->kind & (DLC_REC_SHAPE_NULL | DLC_REC_USED_NAME)) ||
      (versioned && (r->version_major != 1 || r->version_minor > 3 || (r->flags & ~3ull))))
    return NULL;
  if (p->ext.zero_size && p->mode == DLC_DATA_NULL) return "LAY-04";
  if (!versioned && (r->kind & DLC_REC_STRIDES_NULL) && r->ndim > 0 &&
      p->mode == DLC_DATA_BUFFER)
    return "LAY-07";
  return NULL;
}

/* LAY-03, LAY-05, SEM-01 on a view (buffer protocol, or a device result's CUDA array
 * interface) that aliases the export. */
static void check_view(const dlc_record *r, const dlc_forged *f, const Py_buffer *v) {
  DLTensor exported = dlc_forged_tensor(f, r);
  const DLTensor *t = &exported;
  const dlc_extent *e = &f->mem.plan.ext;
  const uint8_t *lo = (const uint8_t *)f->base, *hi = lo + f->mem.plan.size;
  if (v->ndim != t->ndim || (Py_ssize_t)e->itemsize != v->itemsize) {
    if (t->dtype.lanes == 1)
      dlc_oracle_fail("SEM-01", "view has ndim %d itemsize %zd, export ndim %d itemsize %llu",
                      v->ndim, v->itemsize, (int)t->ndim, (unsigned long long)e->itemsize);
    return;
  }
  int64_t rm[DLC_REC_MAX_NDIM];
  if (t->strides == NULL && dlc_row_major_strides(t->ndim, t->shape, rm) != 0) return;
  const int64_t *strides = t->strides ? t->strides : rm;
  for (int i = 0; i < t->ndim; ++i) {
    if (v->shape[i] != t->shape[i])
      return dlc_oracle_fail("SEM-01", "view shape[%d] = %zd, export %lld", i, v->shape[i],
                             (long long)t->shape[i]);
    /* strides read as bytes break LAY-05; any other mismatch ignores the layout (LAY-11) */
    if (t->shape[i] > 1 && v->strides[i] != strides[i] * (int64_t)e->itemsize)
      dlc_oracle_fail(v->strides[i] == strides[i] ? "LAY-05" : "LAY-11",
                      "view stride[%d] = %zd bytes, export %lld elements of %llu", i,
                      v->strides[i], (long long)strides[i], (unsigned long long)e->itemsize);
  }
  if (e->zero_size) return;
  /* The lowest and highest elements of a strided view: each dim at 0 or shape-1, whichever
   * its stride's sign makes extreme. Exact for any strides, O(ndim) (no element walk). The
   * shapes equal the export's here, so the products cannot overflow (valid extent). */
  const uint8_t *first = v->buf, *low = first, *high = first;
  for (int i = 0; i < t->ndim; ++i) {
    Py_ssize_t span = (Py_ssize_t)(v->shape[i] - 1) * v->strides[i];
    if (span < 0) low += span;
    else high += span;
  }
  if (low < lo || high + v->itemsize > hi)
    dlc_oracle_fail("LAY-03", "view elements span [%p, %p), outside the export [%p, %p)",
                    (const void *)low, (const void *)(high + v->itemsize), (const void *)lo,
                    (const void *)hi);
}

/* How a consumer's import of pending device bytes (devmem.h) was ordered: by the stream it
 * named to __dlpack__ (which the producer made wait), by none (stream=-1: STR-01 leaves
 * ordering to it), or through an exchange table's *_no_sync functions, whose consumer reads on
 * current_work_stream (XAPI-19). */
enum { ORDER_NAMED, ORDER_MINUS_ONE, ORDER_TABLE };

/* The clause a stale read of an import ordered `how` breaks: STR-01, or XAPI-19 through a
 * table. */
static const char *stale_clause(int how) { return how == ORDER_TABLE ? "XAPI-19" : "STR-01"; }

/* How the consumer ordered a copy found stale, in words, into buf. */
static const char *stale_why(int how, const dlc_producer_log *log, char *buf, size_t n) {
  if (how == ORDER_TABLE)
    return "imported through the exchange table's *_no_sync functions, it did not copy on the "
           "stream current_work_stream names";
  if (how == ORDER_MINUS_ONE)
    return "the consumer passed stream=-1 (no synchronisation) and did not synchronise itself";
  if (log->named_int)
    snprintf(buf, n, "the consumer named stream %lld to __dlpack__, which the producer made wait, "
             "and copied on another", log->named);
  else
    snprintf(buf, n, "the consumer named no stream to __dlpack__ (the legacy default stream, "
             "which the producer made wait) and copied on another");
  return buf;
}

/* STR-01 / XAPI-19 on a device view of pending data imported with stream=-1 or through an
 * exchange table: ordering its reads was the consumer's own to do. What it reads on the stream
 * its view names (CUDA array interface v3; none: the legacy default stream) must then be the
 * producer's data, as the device holds it once idle. Called before anything waits for the
 * producer's stream. After a stream it named, a stale read is either from_dlpack's or the
 * view's interface naming the wrong stream, which the suites leave open too
 * (test_cuda_stream.py): not judged. */
static void check_pending_view(const dlc_forged *f, int how) {
  const dlc_extent *e = &f->mem.plan.ext;
  /* a deleter that already ran gave the block back: OWN-03's to judge, below */
  if (e->status != DLC_EXTENT_OK || e->zero_size || f->deleter_calls > 0) return;
  const uint8_t *first = (const uint8_t *)f->mem.t.data + f->mem.t.byte_offset;
  size_t n = (size_t)(e->hi - e->lo);
  uint8_t *on = malloc(n), *idle = malloc(n);
  uintptr_t stream = dlc_cai_stream ? dlc_cai_stream : 1;
  /* a read the runtime refuses is the harness's: no verdict */
  if (on && idle && dlc_devmem_read_on(on, first + e->lo, n, stream) == 0 &&
      dlc_devmem_read_settled(idle, first + e->lo, n) == 0 && memcmp(on, idle, n) != 0) {
    size_t k = 0;
    while (on[k] == idle[k]) ++k;
    unsigned seen = on[k], final = idle[k];
    free(on);
    free(idle);
    return dlc_oracle_fail(stale_clause(how), "the import %s and its view, read on its stream "
                           "%llu, holds byte 0x%02x at +%lld where the producer's data, once "
                           "the device is idle, holds 0x%02x",
                           how == ORDER_TABLE ? "came through the exchange table's *_no_sync "
                                                "functions (current_work_stream names the "
                                                "producer's stream)"
                                              : "passed stream=-1 (no synchronisation)",
                           (unsigned long long)stream, seen, (long long)e->lo + (long long)k,
                           final);
  }
  free(on);
  free(idle);
}

/* Oracles on an accepted result, while it is alive. view_only: the consumer got the tensor
 * only as a dltensor_from_py_object_no_sync view (no __dlpack__ call, no owning hand-out).
 * how: ORDER_*, how the import was ordered after pending device bytes. log: the producer's
 * (its unrenamed: the capsule __dlpack__ handed out still has its unconsumed name). */
static void check_result(const dlc_record *r, const dlc_forged *f, PyObject *result,
                         int view_only, int how, const dlc_producer_log *log) {
  char msg[160];
  const char *breach = refusal_clause(r, &f->mem.plan, msg, sizeof msg);
  /* a dltensor_from_py_object_no_sync view is a bare DLTensor: it carries no version, so
   * VER-08 judges only a DLManagedTensorVersioned the consumer received (capsule, hand-out) */
  if (breach && !(view_only && strcmp(breach, "VER-08") == 0))
    dlc_oracle_fail(breach, "%s", msg);
  /* CAP-03: a consumer takes ownership by renaming the capsule; one that imported without it
   * leaves the producer's destructor to delete under it (seen below when the result views
   * the memory) or, with a NULL deleter, nothing that would show it but the name */
  if (log->unrenamed && !f->used)
    dlc_oracle_fail("CAP-03", "the consumer imported the tensor but left its capsule named %s",
                    f->versioned ? "dltensor_versioned" : "dltensor");
  const dlc_plan *p = &f->mem.plan;
  Py_buffer view;
  int have_view;
  const uint8_t *addr = dlc_result_address(result, &view, &have_view);
  uintptr_t a = (uintptr_t)addr, b = f->base;
  int aliases = p->mode == DLC_DATA_BUFFER && addr != NULL && a >= b && a - b <= p->size;
  if (aliases && have_view == 2 && f->pending && how != ORDER_NAMED) check_pending_view(f, how);
  /* Without an address, assume zero-copy unless a copy was asked for (SEM-01), or the result
   * of device memory says it lies elsewhere (device='cpu', or a host copy: no host result
   * views device memory). */
  int copy = copy_passed(r, p);
  int copy_asked = copy == DLC_COPY_TRUE;
  int zero_copy = aliases || (addr == NULL && !copy_asked && !p->ext.zero_size);
  if (zero_copy && !aliases && f->device != NULL) {
    long t, i;
    zero_copy = dlc_result_device(result, &t, &i) && t == r->device_type && i == r->device_id;
  }
  /* XAPI-15: a view is valid only until control returns; keeping it is the consumer's
   * breach, whose trace is the unconsumed capsule's destructor running the deleter */
  if (zero_copy && dlc_forged_has_deleter(f) && f->deleter_calls > 0) {
    const char *clause = "OWN-03", *why = "";
    if (f->destructor_deleted && view_only) {
      clause = "XAPI-15";
      why = " (a dltensor_from_py_object_no_sync view kept past the call)";
    } else if (f->destructor_deleted) {
      clause = "CAP-03";
      why = " (capsule died unconsumed)";
    }
    dlc_oracle_fail(clause, "deleter ran %d time(s) while the zero-copy result is alive%s",
                    f->deleter_calls, why);
  }
  if (aliases && !p->ext.zero_size) {
    const uint8_t *first = (const uint8_t *)f->mem.t.data + f->mem.t.byte_offset;
    if (addr != first)
      dlc_oracle_fail("LAY-03", "result starts at data%+lld, export at data+%llu",
                      (long long)(addr - (const uint8_t *)f->mem.t.data),
                      (unsigned long long)f->mem.t.byte_offset);
    if (have_view) check_view(r, f, &view);
  }
  if (!aliases && have_view && addr != NULL) { /* a copy: it holds the export's elements */
    long long stale = dlc_check_copy_values(r, p, &view, have_view == 2,
                                            have_view == 2 ? dlc_cai_stream : 0,
                                            f->device != NULL && f->pending);
    char why[160];
    if (stale >= 0)
      dlc_oracle_fail(stale_clause(how), "the copy's element %lld holds the export's bytes from "
                      "before the producer's stream wrote them (0x%02x): %s", stale,
                      DLC_DEVMEM_POISON, stale_why(how, log, why, sizeof why));
  }
  dlc_check_result_extra(r, copy, f, result, have_view == 1 ? &view : NULL, have_view != 0,
                         aliases, addr, view_only);
  if (have_view == 1) PyBuffer_Release(&view);
}

/* OWN-03 after everything is dropped: the deleter ran exactly once. */
static void check_released(const dlc_forged *f) {
  if (!dlc_forged_has_deleter(f)) return;
  if (f->bad_self) dlc_oracle_fail("OWN-03", "deleter called with a foreign pointer");
  if (f->used) {
    if (f->deleter_calls != 0)
      dlc_oracle_fail("CAP-04", "deleter of a capsule already named used_* ran %d time(s)",
                      f->deleter_calls);
    return;
  }
  if (f->deleter_calls > 1 && f->destructor_deleted)
    dlc_oracle_fail("CAP-03", "deleter ran %d times: the capsule died unconsumed, and the "
                    "consumer called it too", f->deleter_calls);
  if (f->deleter_calls != 1)
    dlc_oracle_fail("OWN-03", "deleter ran %d times once the result was dropped",
                    f->deleter_calls);
}

/* Control import for the must-accept oracles: 1 when the consumer accepts r. Ownership is
 * not checked here; the forged memory is freed once the result is dropped. */
static int control_accepts(const dlc_record *r) {
  dlc_forged *f;
  PyObject *result = dlc_plain_call(r, &f);
  int ok = result != NULL;
  Py_XDECREF(result);
  dlc_plain_end(f);
  return ok;
}

/* LAY-07 / LAY-04 hold only when the refusal is due to the NULL pointer: the same export
 * with row-major strides / a real buffer must be accepted. */
static int refusal_is_due_to(const char *clause, const dlc_record *r) {
  dlc_record control = *r;
  if (strcmp(clause, "LAY-07") == 0) {
    control.kind &= (uint8_t)~DLC_REC_STRIDES_NULL;
    if (dlc_rec_row_major(&control) != 0) return 0;
  } else {
    control.kind &= (uint8_t)~DLC_REC_DATA_NULL;
  }
  return control_accepts(&control);
}

/* Input classes a known plain crash can set aside (a bare token in the ignore lists), since
 * a crash has no oracle key to match: input:negative-stride (a dim of extent > 1 with a
 * negative stride). */
static int set_aside_input(const dlc_record *r) {
  static int neg = -1;
  if (neg < 0) neg = dlc_oracle_ignored("input:negative-stride");
  if (neg && !(r->kind & DLC_REC_STRIDES_NULL))
    for (int i = 0; i < dlc_rec_dims(r); ++i)
      if (r->shape[i] > 1 && r->strides[i] < 0) return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlc_record r;
  dlc_rec_decode(data, size, &r);
  dlc_rec_apply_offer(&r); /* an offered export is versioned (record.h) */
  dlc_plan plan;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &plan);
  drop_giant_copies(&r, &plan);
  char msg[160];
  const char *breach = refusal_clause(&r, &plan, triage ? msg : NULL, sizeof msg);
  if ((breach && dlc_oracle_ignored(breach)) || set_aside_input(&r)) { /* oracle.h */
    ++n_skipped;
    return 0;
  }
  if (triage) {
    /* device memory of the CUDA mode (devmem.h) is a legal export, not another device */
    int other = r.device_type != kDLCPU && !dlc_devmem_backs(&r, &plan);
    /* LAY-04: NULL data of a zero-size tensor is what a consumer must accept (the suite's
     * test_consumer_zero_size_null_data blames a death on it there too) */
    int null_empty = plan.mode == DLC_DATA_NULL && plan.ext.zero_size;
    const char *why = breach ? breach : other ? "DEV-07" : null_empty ? "LAY-04" : "LAY-11";
    fprintf(stderr, "dlconform-input: %s: %s\n", why,
            breach ? msg : other ? "another device: refuse with BufferError"
                 : null_empty ? "NULL data of a zero-size tensor: import it"
                              : "a legal export: import, copy or raise");
  }
  dlc_forged *f = dlc_forged_new_plan(&r, &plan);
  if (f == NULL) return 0;
  int copy = copy_passed(&r, &plan);
  PyObject *result;
  dlc_producer_log log;
  if (dlc_exchange(f, &r, copy, &result, &log) != 0) {
    dlc_forged_free(f);
    return 0;
  }
  long max_major = log.max_major;
  dlc_check_calls(&r, copy, &log, result == NULL, breach != NULL);
  if (result == NULL) {
    ++n_refused;
    const char *must = acceptance_clause(&r, &f->mem.plan, max_major);
    if (must && !dlc_oracle_ignored(must)) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      if (!refusal_is_due_to(must, &r)) must = NULL;
      PyErr_Restore(type, value, tb);
    }
    if (must) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyObject *s = value ? PyObject_Str(value) : NULL;
      const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
      dlc_oracle_fail(must, "refused a plain export it accepts without the NULL pointer (%s: %s)",
                      type ? ((PyTypeObject *)type)->tp_name : "?", text ? text : "?");
      Py_XDECREF(s);
      PyErr_Clear(); /* from PyObject_Str, if it failed */
      PyErr_Restore(type, value, tb);
    }
    /* DEV-07 / CPY-08 judge the class only when the device is the one thing unusual */
    int other_reason = breach != NULL || !array_api_dtype(&r) || r.ndim > 32 ||
                       r.byte_offset != 0 || f->mem.plan.ext.status != DLC_EXTENT_OK ||
                       !f->mem.plan.ext.row_major ||
                       f->mem.plan.mode != DLC_DATA_BUFFER ||
                       !small_span(&r, &f->mem.plan) ||
                       ((r.kind & DLC_REC_VERSIONED) && max_major < 1);
    dlc_check_refusal_class(&r, copy, &log, other_reason, f->device != NULL);
  } else {
    ++n_accepted;
    const dlc_xapi_log *x = dlc_xapi_log_now();
    int minus_one = log.named_int && log.named == -1;
    int how = log.calls > 0 ? (minus_one ? ORDER_MINUS_ONE : ORDER_NAMED)
              : x->views > 0 || x->handouts > 0 ? ORDER_TABLE
                                                : ORDER_NAMED;
    check_result(&r, f, result, x->views > 0 && x->handouts == 0 && log.calls == 0, how, &log);
    Py_DECREF(result);
  }
  if (dlc_forged_has_deleter(f) && f->deleter_calls == 0 && !f->used) PyGC_Collect();
  check_released(f);
  dlc_forged_free(f);
  return 0;
}
