/* mutate: field-level mutations of a decoded record. Every operator keeps the record
 * encodable (the codec accepts every value), so mutation never needs to validate. The
 * value tables carry the edges consumers mis-handle: 0/1/-1, INT64 limits, spans that
 * overflow once multiplied by an item size, negative and zero strides, sub-byte and odd
 * widths, vector lanes, unknown codes, versions 0/1/2, undefined flag bits, and every
 * exchange API offer (byte 67, with copy=True now and then: some consumers take the
 * dltensor_from_py_object_no_sync path only for copies, XAPI-11). */
#include "mutate.h"

#include <string.h>

#include "layout.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

uint64_t dlc_rng_next(dlc_rng *g) {
  uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A value in [0, n): the high word of a 64x64-bit product (no division; a mutation draws
 * several of these, and a 64-bit modulo costs tens of cycles each). */
static uint64_t below(dlc_rng *g, uint64_t n) {
  return (uint64_t)(((unsigned __int128)dlc_rng_next(g) * n) >> 64);
}

static const int64_t k_i64[] = {
    0, 1, -1, 2, -2, 3, 7, 8, 16, 255, 256, 4096, 65536, -65536,
    INT32_MAX, (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 40, (int64_t)1 << 62,
    -((int64_t)1 << 62), INT64_MAX, INT64_MIN, INT64_MAX / 2, INT64_MAX / 8 + 1,
    INT64_MAX / 16 + 1, INT64_MIN / 8, 1 - INT64_MAX,
};
static const int8_t k_ndim[] = {0, 1, 2, 3, 4, 5, 8, 16, 32, 33, 64, 127, -1, -128};
static const uint8_t k_code[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 14, 15, 16, 17, 18, 100, 255};
static const uint8_t k_bits[] = {0, 1, 2, 4, 6, 8, 16, 32, 64, 128, 3, 7, 12, 24, 255};
static const uint16_t k_lanes[] = {1, 1, 1, 0, 2, 3, 4, 16, 64, 65, 256, 65535};
static const int32_t k_dev[][2] = {{1, 0}, {1, 0}, {1, 1}, {1, -1}, {2, 0}, {3, 0}, {13, 0},
                                   {13, 1}, {10, 0}, {0, 0}, {5, 0}, {17, 0}, {18, 0}, {19, 0},
                                   {-1, 0}, {INT32_MAX, INT32_MIN}};
static const uint32_t k_ver[][2] = {{1, 3}, {1, 0}, {1, 1}, {1, 2}, {1, 4}, {1, 99}, {0, 0},
                                    {0, 8}, {2, 0}, {2, 3}, {UINT32_MAX, UINT32_MAX}};
static const uint64_t k_flags[] = {0, 1, 2, 3, 4, 5, 7, 8, 0xff, (uint64_t)1 << 63, UINT64_MAX};
static const uint64_t k_offset[] = {0, 1, 2, 3, 4, 7, 8, 16, 255, 256, 4096, 65536, 1 << 20,
                                    ((uint64_t)1 << 20) + 1, (uint64_t)1 << 40,
                                    (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX};
/* Valid dtypes the array API and dlpack.h define (DT-03..DT-08, DT-12). */
static const uint8_t k_valid_dtype[][2] = {
    {6, 8},  {0, 8},  {0, 16}, {0, 32}, {0, 64}, {1, 8},  {1, 16}, {1, 32}, {1, 64},
    {2, 16}, {2, 32}, {2, 64}, {4, 16}, {5, 64}, {5, 128}, {5, 32}, {10, 8}, {15, 6},
    {16, 6}, {17, 4}, {0, 4},  {1, 1}};

static int64_t pick_i64(dlc_rng *g) {
  if (below(g, 4) == 0) return (int64_t)dlc_rng_next(g) >> below(g, 64);
  return k_i64[below(g, COUNT(k_i64))];
}

/* A small shape with row-major strides, possibly made non-contiguous. */
static void small_dims(dlc_record *r, dlc_rng *g, int from) {
  for (int i = from; i < dlc_rec_dims(r); ++i) r->shape[i] = (int64_t)below(g, 5) + 1;
  (void)dlc_rec_row_major(r);
}

/* Legal but unusual layouts (LAY-11): negate, double, zero (broadcast) or swap strides. */
static void stride_game(dlc_record *r, dlc_rng *g) {
  int n = dlc_rec_dims(r);
  if (n == 0) return;
  int i = (int)below(g, (uint64_t)n);
  switch (below(g, 6)) {
    case 0: (void)dlc_rec_row_major(r); break;
    case 1: r->strides[i] = (int64_t)(0u - (uint64_t)r->strides[i]); break;
    case 2: r->strides[i] = (int64_t)((uint64_t)r->strides[i] * 2u); break;
    case 3: r->strides[i] = 0; break;
    case 4: {
      int j = (int)below(g, (uint64_t)n);
      int64_t s = r->strides[i];
      r->strides[i] = r->strides[j];
      r->strides[j] = s;
      s = r->shape[i];
      r->shape[i] = r->shape[j];
      r->shape[j] = s;
      break;
    }
    default: r->strides[i] = pick_i64(g); break;
  }
}

/* A plausible valid export: what a well-behaved producer would send (reaches the deep,
 * accepting paths of a consumer). */
static void valid_tensor(dlc_record *r, dlc_rng *g) {
  uint8_t seed = r->fill_seed, offer = r->offer; /* kept: both are orthogonal to the tensor */
  dlc_rec_init(r);
  r->fill_seed = seed;
  r->offer = offer;
  r->ndim = (int8_t)below(g, 5);
  small_dims(r, g, 0);
  if (below(g, 3) == 0) stride_game(r, g);
  const uint8_t *dt = k_valid_dtype[below(g, 12)]; /* mostly the array-API dtypes */
  r->code = dt[0];
  r->bits = dt[1];
  r->byte_offset = below(g, 2) ? 0 : (r->bits / 8u) * below(g, 4);
  if (below(g, 2)) r->kind |= DLC_REC_VERSIONED;
  if (below(g, 4) == 0) r->kind |= DLC_REC_STRIDES_NULL, (void)dlc_rec_row_major(r);
  r->version_minor = (uint32_t)below(g, 4);
  r->flags = below(g, 3) == 0 ? below(g, 4) : 0;
}

/* The exchange API offer (record.h): a kind and the major-0 variant, now and then a flip of
 * a kept bit (4..7, which decode to the same offer), and copy=True for a quarter. */
static void offer_game(dlc_record *r, dlc_rng *g) {
  if (below(g, 8) == 0) {
    r->offer ^= (uint8_t)(0x10u << below(g, 4));
    return;
  }
  r->offer = (uint8_t)((r->offer & ~0x0fu) | below(g, 16));
  if (below(g, 4) == 0) {
    r->kw |= DLC_KW_COPY;
    r->kw_copy = DLC_COPY_TRUE;
  }
}

static void mutate_once(dlc_record *r, dlc_rng *g) {
  int n = dlc_rec_dims(r);
  switch (below(g, 17)) {
    case 0: {
      int old = n;
      r->ndim = below(g, 2) ? k_ndim[below(g, COUNT(k_ndim))] : (int8_t)(r->ndim + 1);
      if (r->ndim < -127) r->ndim = -128;
      if (dlc_rec_dims(r) > old) small_dims(r, g, old);
      break;
    }
    case 1:
      if (n) r->shape[below(g, (uint64_t)n)] = pick_i64(g);
      break;
    case 2:
      if (n) r->strides[below(g, (uint64_t)n)] = pick_i64(g);
      break;
    case 3:
      stride_game(r, g);
      break;
    case 4: {
      const uint8_t *dt = k_valid_dtype[below(g, COUNT(k_valid_dtype))];
      r->code = dt[0];
      r->bits = dt[1];
      r->lanes = 1;
      break;
    }
    case 5:
      switch (below(g, 3)) {
        case 0: r->code = k_code[below(g, COUNT(k_code))]; break;
        case 1: r->bits = k_bits[below(g, COUNT(k_bits))]; break;
        default: r->lanes = k_lanes[below(g, COUNT(k_lanes))]; break;
      }
      break;
    case 6: {
      const int32_t *d = k_dev[below(g, COUNT(k_dev))];
      r->device_type = d[0];
      r->device_id = d[1];
      break;
    }
    case 7: {
      const uint32_t *v = k_ver[below(g, COUNT(k_ver))];
      r->version_major = v[0];
      r->version_minor = v[1];
      break;
    }
    case 8:
      r->flags = below(g, 2) ? k_flags[below(g, COUNT(k_flags))] : r->flags ^ (1ull << below(g, 64));
      break;
    case 9:
      r->byte_offset = k_offset[below(g, COUNT(k_offset))];
      break;
    case 10:
      r->kind ^= (uint8_t)(1u << below(g, 7));
      break;
    case 11:
      switch (below(g, 5)) {
        case 0: r->kw ^= (uint8_t)(1u << below(g, 6)); break; /* bits 4, 5: producer kind */
        case 1: {
          const uint32_t *v = k_ver[below(g, COUNT(k_ver))];
          r->kw_max_major = (int32_t)v[0];
          r->kw_max_minor = (int32_t)v[1];
          break;
        }
        case 2: r->kw_copy = (uint8_t)below(g, 3); break;
        case 3: {
          const int32_t *d = k_dev[below(g, COUNT(k_dev))];
          r->kw_dev_type = d[0];
          r->kw_dev_id = d[1];
          break;
        }
        default:
          r->kw_stream_kind = (uint8_t)below(g, 3);
          r->kw_stream = below(g, 2) ? (int64_t)below(g, 4) - 1 : pick_i64(g);
          break;
      }
      break;
    case 12:
    case 13:
      valid_tensor(r, g);
      break;
    case 16:
      offer_game(r, g);
      break;
    case 14:
      /* one huge extent, the rest consistent: over the cap, or overflowing */
      if (n) {
        r->shape[below(g, (uint64_t)n)] = (int64_t)1 << (20 + below(g, 43));
        (void)dlc_rec_row_major(r);
      }
      break;
    default:
      r->fill_seed = (uint8_t)dlc_rng_next(g);
      if (below(g, 2)) r->byte_offset = (uint64_t)pick_i64(g);
      break;
  }
}

void dlc_mutate_record(dlc_record *r, dlc_rng *g) {
  int rounds = 1 + (int)below(g, 4);
  for (int i = 0; i < rounds; ++i) mutate_once(r, g);
}

size_t dlc_mutate_bytes(uint8_t *data, size_t size, size_t max_size, dlc_rng *g) {
  dlc_record r;
  dlc_rec_decode(data, size, &r);
  dlc_mutate_record(&r, g);
  size_t n = dlc_rec_encode(&r, data, max_size);
  return n < max_size ? n : max_size;
}
