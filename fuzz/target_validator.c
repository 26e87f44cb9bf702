/* target_validator: fuzzes probes/check itself (no Python).
 *
 * Per input: decode the record, materialise it (exact-size malloc'd shape, strides and
 * buffer, so ASan sees every over-read), then
 *   1. recompute the extent of the materialised tensor with check and compare it with an
 *      independent 128-bit reference of the contract in check_extent.c (EXTENT);
 *   2. extent OK and a buffer exists: read every byte of [lo, hi) relative to
 *      data + byte_offset (ASan proves it lies in the buffer), and for small tensors walk
 *      every element and assert its bytes lie in [lo, hi) (EXTENT);
 *   3. run every validator at several spec versions; reports must be well formed, and a
 *      tensor a validator accepts without a single violation must be usable: valid extent,
 *      valid dtype, known device, non-NULL data when non-empty, version 1.x, defined flags.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layout.h"
#include "oracle.h"
#include "record.h"

#define WALK_MAX_ELEMENTS 4096

typedef __int128 i128;

typedef struct {
  dlc_extent_status status;
  int zero_size;
  i128 numel, lo, hi;
} ref_extent;

static int fits64(i128 v) { return v >= INT64_MIN && v <= INT64_MAX; }

/* The contract of dlc_extent_of (check_extent.c), computed in 128 bits. Terms are bounded
 * by 2^126 and there are at most 127 dims, so no sum below can wrap. */
static ref_extent reference_extent(const DLTensor *t) {
  ref_extent e = {DLC_EXTENT_OK, 0, 0, 0, 0};
  uint64_t item = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7u) / 8u;
  if (t->ndim < 0) return e.status = DLC_EXTENT_BAD_NDIM, e;
  if (t->ndim > 0 && t->shape == NULL) return e.status = DLC_EXTENT_NULL_SHAPE, e;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) return e.status = DLC_EXTENT_NEG_SHAPE, e;
    if (t->shape[i] == 0) e.zero_size = 1;
  }
  if (item == 0) return e.status = DLC_EXTENT_BAD_ITEMSIZE, e.zero_size = 0, e;
  if (e.zero_size) return e;
  i128 numel = 1;
  for (int i = 0; i < t->ndim; ++i) {
    numel *= t->shape[i];
    if (numel > INT64_MAX) return e.status = DLC_EXTENT_OVERFLOW, e;
  }
  i128 neg = 0, pos = 0, rm = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    i128 stride = t->strides ? (i128)t->strides[i] : rm;
    i128 off = (i128)(t->shape[i] - 1) * stride;
    if (!fits64(off)) return e.status = DLC_EXTENT_OVERFLOW, e;
    if (off < 0) neg += off; else pos += off;
    rm *= t->shape[i];
  }
  i128 lo = neg * (i128)item, hi = pos * (i128)item + (i128)item;
  if (!fits64(neg) || !fits64(pos) || !fits64(lo) || !fits64(hi) || !fits64(hi - lo))
    return e.status = DLC_EXTENT_OVERFLOW, e;
  e.numel = numel;
  e.lo = lo;
  e.hi = hi;
  return e;
}

static void check_extent(const DLTensor *t, const dlc_extent *planned) {
  dlc_extent got = dlc_extent_of(t);
  ref_extent want = reference_extent(t);
  uint64_t item = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7u) / 8u;
  if (dlc_dtype_itemsize(t->dtype) != item)
    dlc_oracle_fail("LAY-10", "itemsize %llu, want ceil(bits*lanes/8) = %llu",
                    (unsigned long long)dlc_dtype_itemsize(t->dtype), (unsigned long long)item);
  if (got.status != want.status)
    dlc_oracle_fail("EXTENT", "status %d, reference %d (ndim %d)", (int)got.status,
                    (int)want.status, (int)t->ndim);
  if (got.status != planned->status ||
      (got.status == DLC_EXTENT_OK &&
       (got.lo != planned->lo || got.hi != planned->hi || got.numel != planned->numel)))
    dlc_oracle_fail("EXTENT", "extent differs between two copies of the same metadata");
  if (got.status != DLC_EXTENT_OK) return;
  if (got.zero_size != want.zero_size || (i128)got.numel != want.numel || got.lo != want.lo ||
      got.hi != want.hi)
    dlc_oracle_fail("EXTENT", "numel %llu lo %lld hi %lld, reference numel %lld lo %lld hi %lld",
                    (unsigned long long)got.numel, (long long)got.lo, (long long)got.hi,
                    (long long)want.numel, (long long)want.lo, (long long)want.hi);
}

/* Reads every byte of [lo, hi) and walks small tensors element by element (each element's
 * ends). */
static void touch(const dlc_tensor_mem *m) {
  const dlc_extent *e = &m->plan.ext;
  if (m->plan.mode != DLC_DATA_BUFFER || e->status != DLC_EXTENT_OK || e->zero_size) return;
  const volatile uint8_t *base = (const uint8_t *)m->t.data + m->t.byte_offset;
  uint8_t acc = 0;
  for (int64_t off = e->lo; off < e->hi; ++off) acc ^= base[off];
  if (e->numel > WALK_MAX_ELEMENTS) return;
  const DLTensor *t = &m->t;
  int64_t rm[DLC_REC_MAX_NDIM > 0 ? DLC_REC_MAX_NDIM : 1];
  if (dlc_row_major_strides(t->ndim, t->shape, rm) != 0)
    dlc_oracle_fail("EXTENT", "row-major strides overflow for a tensor whose extent is OK");
  const int64_t *strides = t->strides ? t->strides : rm;
  for (uint64_t flat = 0; flat < e->numel; ++flat) {
    i128 off = 0;
    uint64_t rest = flat;
    for (int i = t->ndim - 1; i >= 0; --i) {
      uint64_t idx = rest % (uint64_t)t->shape[i];
      rest /= (uint64_t)t->shape[i];
      off += (i128)idx * strides[i];
    }
    off *= (i128)e->itemsize;
    if (off < e->lo || off + (i128)e->itemsize > e->hi)
      dlc_oracle_fail("EXTENT", "element %llu at byte %lld lies outside [%lld, %lld)",
                      (unsigned long long)flat, (long long)off, (long long)e->lo,
                      (long long)e->hi);
    /* an element is contiguous: its first and last byte bound it for ASan (every byte of
     * [lo, hi) was read above), so a huge vector item (lanes up to 65535) costs O(1) */
    acc ^= base[(int64_t)off] ^ base[(int64_t)off + (int64_t)e->itemsize - 1];
  }
  (void)acc;
}

static void check_report_shape(const dlc_report *r, int returned, const char *who) {
  /* the return value counts every violation, also those a full report dropped */
  if (r->count < 0 || r->count > DLC_MAX_VIOLATIONS || returned < 0 ||
      (r->truncated ? returned < r->count : returned != r->count))
    dlc_oracle_fail("REPORT", "%s: report count %d, returned %d", who, r->count, returned);
  for (int i = 0; i < r->count; ++i) {
    const char *c = r->items[i].clause;
    if (c == NULL || c[0] == '\0' || strchr(c, '-') == NULL)
      dlc_oracle_fail("REPORT", "%s: violation %d has clause '%s'", who, i, c ? c : "(null)");
    if (memchr(r->items[i].message, '\0', DLC_MESSAGE_LEN) == NULL)
      dlc_oracle_fail("REPORT", "%s: violation %d message not terminated", who, i);
  }
}

/* A tensor accepted with no violation at all must be one a consumer can use. */
static void accepted_means_usable(const DLTensor *t, const dlc_extent *e, const char *who) {
  if (e->status != DLC_EXTENT_OK)
    dlc_oracle_fail("LAY-09", "%s accepted a tensor whose extent status is %s", who,
                    dlc_extent_status_name(e->status));
  if (!dlc_dtype_classify(t->dtype, 1, 3).valid)
    dlc_oracle_fail("DT-01", "%s accepted dtype (%u, %u, %u)", who, t->dtype.code,
                    t->dtype.bits, t->dtype.lanes);
  if (!dlc_is_known_device(t->device.device_type, 1, 3))
    dlc_oracle_fail("DEV-01", "%s accepted device type %d", who, (int)t->device.device_type);
  if (!e->zero_size && t->data == NULL)
    dlc_oracle_fail("LAY-04", "%s accepted NULL data for %llu elements", who,
                    (unsigned long long)e->numel);
}

static void run_validators(const dlc_record *rec, const dlc_tensor_mem *m) {
  static const uint32_t specs[][2] = {{1, 0}, {1, 1}, {1, 2}, {1, 3}, {0, 8}, {2, 0}};
  DLManagedTensor legacy;
  memset(&legacy, 0, sizeof legacy);
  legacy.dl_tensor = m->t;
  DLManagedTensorVersioned ver;
  memset(&ver, 0, sizeof ver);
  ver.version.major = rec->version_major;
  ver.version.minor = rec->version_minor;
  ver.flags = rec->flags;
  ver.dl_tensor = m->t;
  for (size_t s = 0; s < sizeof specs / sizeof specs[0]; ++s) {
    dlc_report r;
    dlc_report_init(&r);
    check_report_shape(&r, dlc_check_managed(&legacy, specs[s][0], specs[s][1], &r), "managed");
    dlc_report_init(&r);
    int nv = dlc_check_versioned(&ver, specs[s][0], specs[s][1], &r);
    check_report_shape(&r, nv, "versioned");
    if (nv == 0 && r.count == 0 && specs[s][0] == 1 && specs[s][1] == 3) {
      accepted_means_usable(&m->t, &m->plan.ext, "dlc_check_versioned");
      if (ver.version.major != 1)
        dlc_oracle_fail("VER-07", "accepted version major %u", ver.version.major);
      if (ver.flags & ~(uint64_t)7)
        dlc_oracle_fail("FLG-01", "accepted flags 0x%llx", (unsigned long long)ver.flags);
    }
    for (int kind = 0; kind < 2; ++kind) {
      dlc_report_init(&r);
      int n = dlc_check_tensor(&m->t, (dlc_capsule_kind)kind, specs[s][0], specs[s][1], 1, &r);
      check_report_shape(&r, n, "tensor");
    }
    dlc_dtype_info info = dlc_dtype_classify(m->t.dtype, specs[s][0], specs[s][1]);
    if (info.name == NULL || (!info.valid && info.clause == NULL))
      dlc_oracle_fail("DT-01", "classify returned name %p clause %p", (const void *)info.name,
                      (const void *)info.clause);
    (void)dlc_is_known_device(m->t.device.device_type, specs[s][0], specs[s][1]);
  }
  if (m->t.ndim >= 0) {
    size_t n = m->t.ndim > 0 ? (size_t)m->t.ndim : 1;
    int64_t *out = malloc(n * sizeof(int64_t));
    if (out != NULL) {
      (void)dlc_row_major_strides(m->t.ndim, m->t.shape, out);
      free(out);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlc_record rec;
  dlc_rec_decode(data, size, &rec);
  dlc_tensor_mem m;
  if (dlc_rec_materialize(&rec, DLC_REC_BUFFER_CAP, &m) != 0) return 0;
  check_extent(&m.t, &m.plan.ext);
  touch(&m);
  run_validators(&rec, &m);
  dlc_tensor_mem_free(&m);
  return 0;
}
