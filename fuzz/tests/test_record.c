/* test_record: unit test of the fuzz record codec, the layout planner and the mutator.
 * Prints "N passed, N failed"; exit status 1 when anything failed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layout.h"
#include "mutate.h"
#include "oracle.h"
#include "record.h"

static int passed, failed;

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (cond) {                                           \
      ++passed;                                           \
    } else {                                              \
      ++failed;                                           \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fputc('\n', stderr);                                \
    }                                                     \
  } while (0)

static uint8_t buf_a[DLC_REC_MAX_SIZE + 64], buf_b[DLC_REC_MAX_SIZE + 64];

/* decode(b) then encode equals b truncated or zero-extended to the record's size. */
static int canonical_roundtrip(const uint8_t *b, size_t n) {
  dlc_record r;
  dlc_rec_decode(b, n, &r);
  size_t m = dlc_rec_encode(&r, buf_b, sizeof buf_b);
  if (m != dlc_rec_size(&r) || m > sizeof buf_b) return 0;
  for (size_t i = 0; i < m; ++i)
    if (buf_b[i] != (i < n ? b[i] : 0)) return 0;
  return 1;
}

static void test_struct_roundtrip(void) {
  dlc_record r, back;
  dlc_rec_init(&r);
  r.kind = DLC_REC_VERSIONED | DLC_REC_DANGLING | 0xC0;
  r.ndim = 3;
  r.shape[0] = 2, r.shape[1] = INT64_MAX, r.shape[2] = -1;
  r.strides[0] = INT64_MIN, r.strides[1] = -3, r.strides[2] = 1;
  r.code = 17, r.bits = 4, r.lanes = 65535;
  r.device_type = -7, r.device_id = INT32_MIN;
  r.version_major = UINT32_MAX, r.version_minor = 2;
  r.flags = UINT64_MAX, r.byte_offset = (uint64_t)1 << 63;
  r.kw = 0xff, r.kw_max_major = -1, r.kw_max_minor = 3, r.kw_dev_type = 2, r.kw_dev_id = 5;
  r.kw_stream = INT64_MIN, r.kw_copy = 200, r.kw_stream_kind = 7, r.fill_seed = 9;
  r.offer = 0x55;
  size_t n = dlc_rec_encode(&r, buf_a, sizeof buf_a);
  CHECK(n == DLC_REC_HEADER_SIZE + 3 * 16, "encoded size %zu", n);
  CHECK(buf_a[0] == DLC_REC_FORMAT, "format byte %u", buf_a[0]);
  dlc_rec_decode(buf_a, n, &back);
  CHECK(back.kind == r.kind && back.ndim == 3 && back.code == 17 && back.bits == 4 &&
            back.lanes == 65535 && back.device_type == -7 && back.device_id == INT32_MIN &&
            back.version_major == UINT32_MAX && back.version_minor == 2 &&
            back.flags == UINT64_MAX && back.byte_offset == (uint64_t)1 << 63 &&
            back.kw == 0xff && back.kw_max_major == -1 && back.kw_max_minor == 3 &&
            back.kw_dev_type == 2 && back.kw_dev_id == 5 && back.kw_stream == INT64_MIN &&
            back.kw_copy == 200 && back.kw_stream_kind == 7 && back.fill_seed == 9 &&
            back.offer == 0x55,
        "header fields survive the round trip");
  CHECK(back.shape[0] == 2 && back.shape[1] == INT64_MAX && back.shape[2] == -1 &&
            back.strides[0] == INT64_MIN && back.strides[1] == -3 && back.strides[2] == 1,
        "shape and strides survive the round trip");
  CHECK(canonical_roundtrip(buf_a, n), "canonical bytes re-encode identically");
  /* truncated encoding: the missing tail decodes as zeros */
  size_t cut = dlc_rec_encode(&r, buf_a, 70);
  dlc_rec_decode(buf_a, 70, &back);
  CHECK(cut == n && back.ndim == 3 && back.shape[0] == 2 && back.shape[1] == 0,
        "truncated encoding zero-fills (shape[1] %lld)", (long long)back.shape[1]);
}

static void test_any_bytes_decode(void) {
  dlc_record r;
  dlc_rec_decode(NULL, 0, &r);
  CHECK(r.ndim == 0 && r.kind == 0 && r.lanes == 0 && r.format == 0, "empty input is zeros");
  dlc_rng g = {42};
  int ok = 1;
  for (int iter = 0; iter < 20000 && ok; ++iter) {
    size_t n = (size_t)(dlc_rng_next(&g) % (DLC_REC_MAX_SIZE + 40));
    for (size_t i = 0; i < n; ++i) buf_a[i] = (uint8_t)dlc_rng_next(&g);
    ok = canonical_roundtrip(buf_a, n);
    if (!ok) fprintf(stderr, "iteration %d, length %zu\n", iter, n);
  }
  CHECK(ok, "20000 random byte strings decode and re-encode canonically");
  ok = 1;
  for (size_t n = 0; n <= DLC_REC_HEADER_SIZE + 48 && ok; ++n) ok = canonical_roundtrip(buf_a, n);
  CHECK(ok, "every prefix length decodes");
  memset(buf_a, 0xff, sizeof buf_a);
  dlc_rec_decode(buf_a, sizeof buf_a, &r);
  CHECK(r.ndim == -1 && dlc_rec_dims(&r) == 0 && dlc_rec_size(&r) == DLC_REC_HEADER_SIZE,
        "negative ndim carries no dims");
  buf_a[2] = 0x7f;
  dlc_rec_decode(buf_a, sizeof buf_a, &r);
  CHECK(r.ndim == 127 && r.shape[126] == -1 && dlc_rec_size(&r) == DLC_REC_MAX_SIZE,
        "ndim 127 reads 127 shape and stride entries");
}

static void test_plan(void) {
  dlc_record r;
  dlc_plan p;
  dlc_rec_init(&r);
  r.ndim = 2, r.shape[0] = 3, r.shape[1] = 4;
  CHECK(dlc_rec_row_major(&r) == 0 && r.strides[0] == 4 && r.strides[1] == 1, "row-major");
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_BUFFER && p.size == 48 && p.pad == 0, "float32[3,4]: 48 bytes, got %llu",
        (unsigned long long)p.size);
  r.strides[0] = -4, r.byte_offset = 8;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_BUFFER && p.ext.lo == -32 && p.pad == 24 && p.size == 24 + 8 + 16,
        "negative stride: pad %llu size %llu", (unsigned long long)p.pad,
        (unsigned long long)p.size);
  r.shape[0] = (int64_t)1 << 40, r.strides[0] = 4, r.byte_offset = 0;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_NULL && strcmp(p.why, "cap") == 0, "over the cap: NULL data");
  r.kind |= DLC_REC_DANGLING;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_DANGLING, "over the cap with DANGLING: dangling data");
  r.shape[0] = -1;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_DANGLING && strcmp(p.why, "extent") == 0, "negative extent: no buffer");
  r.shape[0] = 0, r.kind = 0, r.byte_offset = 5;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_BUFFER && p.ext.zero_size && p.size == 5, "zero-size: byte_offset only");
  r.byte_offset = ((uint64_t)1 << 20) + 1;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_NULL, "byte_offset beyond the cap: no buffer");
  r.byte_offset = UINT64_MAX, r.shape[0] = 3;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  CHECK(p.mode == DLC_DATA_NULL, "byte_offset UINT64_MAX: no buffer, no wrap");
  CHECK(dlc_dangling_pointer() != NULL, "dangling pointer is not NULL");
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

/* 1 when touching p (a write, or a read) faults: tried in a child, which exits 0 when it
 * does not. Under ASan a fault is a report and a non-zero exit. */
static int faults(volatile uint8_t *p, int write) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    if (write) *p = 1;
    else (void)*p;
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 0;
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Every byte of a materialised buffer holds its fill pattern, read-only buffers fault on a
 * write, and (pool builds) the first byte past the buffer's 64-byte rounded end faults. The
 * sequence reuses the pool's regions with other sizes, seeds and protections in turn. */
static void test_fill_and_guard(void) {
  dlc_rng g = {11};
  int pattern = 1, ro_faults = 1, guard = 1, forks = 0, checked = 0;
  static const uint64_t sizes[] = {1, 4, 63, 64, 65, 4096, 4097, 100000, (uint64_t)1 << 20};
  for (int iter = 0; iter < 600; ++iter) {
    dlc_record r;
    dlc_rec_init(&r);
    r.code = 1, r.bits = 8, r.ndim = 1;
    r.shape[0] = (int64_t)sizes[dlc_rng_next(&g) % (sizeof sizes / sizeof sizes[0])];
    if (dlc_rng_next(&g) % 3 == 0) r.shape[0] -= (int64_t)(dlc_rng_next(&g) % 7);
    if (r.shape[0] < 1) r.shape[0] = 1;
    r.strides[0] = 1;
    r.fill_seed = (uint8_t)(dlc_rng_next(&g) % 6); /* few seeds: regions get reused */
    if (dlc_rng_next(&g) % 2) {
      r.kind |= DLC_REC_VERSIONED;
      r.flags = 1; /* READ_ONLY */
    }
    dlc_tensor_mem mem;
    if (dlc_rec_materialize(&r, DLC_REC_BUFFER_CAP, &mem) != 0) continue;
    for (uint64_t i = 0; i < mem.plan.size; ++i)
      if (mem.buffer[i] != (uint8_t)(i * 131u + r.fill_seed)) {
        pattern = 0;
        fprintf(stderr, "size %llu seed %u: byte %llu is %u\n", (unsigned long long)mem.plan.size,
                r.fill_seed, (unsigned long long)i, mem.buffer[i]);
        break;
      }
    ++checked;
    if (forks < 24 && dlc_rng_next(&g) % 8 == 0) {
      ++forks;
      if (mem.plan.readonly) ro_faults &= faults(mem.buffer + mem.plan.size / 2, 1);
      else ro_faults &= !faults(mem.buffer + mem.plan.size / 2, 1);
      if (!TEST_ASAN) guard &= faults(mem.buffer + ((mem.plan.size + 63) & ~(uint64_t)63), 0);
    }
    dlc_tensor_mem_free(&mem);
  }
  CHECK(checked > 500, "materialised %d buffers", checked);
  CHECK(pattern, "every buffer byte holds (i * 131 + seed) mod 256");
  CHECK(forks > 5 && ro_faults, "writes fault exactly in READ_ONLY buffers (%d tried)", forks);
  CHECK(guard, "the byte past a buffer's 64-byte rounded end faults");
}

/* Byte 67, the exchange API offer: decoded at its offset, every value names an offer, an
 * offer makes the export versioned, and the mutator reaches every kind and variant. */
static void test_offer(void) {
  dlc_record r, back;
  dlc_rec_init(&r);
  CHECK(r.offer == 0 && dlc_rec_offer(&r) == DLC_OFFER_NONE, "a fresh record offers nothing");
  int at67 = 1, apply = 1;
  for (unsigned v = 0; v < 256; ++v) {
    memset(buf_a, 0, DLC_REC_HEADER_SIZE);
    buf_a[67] = (uint8_t)v;
    dlc_rec_decode(buf_a, DLC_REC_HEADER_SIZE, &back);
    at67 &= back.offer == v && dlc_rec_offer(&back) == (int)(v & 7u) && back.fill_seed == 0;
    back.kind = DLC_REC_STRIDES_NULL;
    dlc_rec_apply_offer(&back);
    int want = (v & 7u) ? DLC_REC_STRIDES_NULL | DLC_REC_VERSIONED : DLC_REC_STRIDES_NULL;
    apply &= back.kind == want;
  }
  CHECK(at67, "byte 67 decodes as the offer, its kind in bits 0..2");
  CHECK(apply, "an offer (and only an offer) makes the export versioned");
  r.offer = DLC_OFFER_MAJOR | DLC_OFFER_MAJOR0 | 0x80;
  size_t n = dlc_rec_encode(&r, buf_a, sizeof buf_a);
  CHECK(n == DLC_REC_HEADER_SIZE && buf_a[67] == 0x8b && buf_a[0] == 2,
        "the offer is written at byte 67 (0x%02x), format 2", buf_a[67]);
  /* the mutator: every kind x variant, the kept bits, copy=True with an offer, and the offer
   * kept by valid_tensor (most mutations leave it) */
  dlc_rng g = {11};
  unsigned seen = 0, kept_bits = 0;
  int copy_with_offer = 0, kept = 0, rounds = 0;
  dlc_rec_init(&r);
  for (int iter = 0; iter < 20000; ++iter) {
    uint8_t before = r.offer;
    n = dlc_rec_encode(&r, buf_a, sizeof buf_a);
    size_t m = dlc_mutate_bytes(buf_a, n, sizeof buf_a, &g);
    dlc_rec_decode(buf_a, m, &r);
    seen |= 1u << (r.offer & 0x0f);
    kept_bits |= r.offer & 0xf0u;
    if (dlc_rec_offer(&r) && (r.kw & DLC_KW_COPY) && r.kw_copy % 3 == DLC_COPY_TRUE)
      ++copy_with_offer;
    if (before != 0) ++rounds, kept += r.offer == before;
    if (dlc_rng_next(&g) % 50 == 0) dlc_rec_init(&r);
  }
  CHECK(seen == 0xffff, "the mutator reaches every offer kind and variant (mask 0x%04x)", seen);
  CHECK(kept_bits == 0xf0, "the mutator flips the kept offer bits (0x%02x)", kept_bits);
  CHECK(copy_with_offer > 500, "offers come with copy=True (%d of 20000)", copy_with_offer);
  CHECK(rounds > 1000 && kept * 10 > rounds * 7, "an offer mostly survives a mutation (%d of %d)",
        kept, rounds);
}

/* Mutated records: the encoding fits, and materialised memory obeys layout.h. */
static void test_mutate_materialize(void) {
  dlc_rng g = {7};
  dlc_record r;
  dlc_rec_init(&r);
  int fits = 1, within = 1, capped = 1, filled = 1, buffers = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    size_t max = 1 + (size_t)(dlc_rng_next(&g) % (DLC_REC_MAX_SIZE + 16));
    size_t n = dlc_rec_encode(&r, buf_a, sizeof buf_a);
    size_t m = dlc_mutate_bytes(buf_a, n, max, &g);
    fits &= m <= max;
    dlc_rec_decode(buf_a, m, &r);
    dlc_tensor_mem mem;
    if (dlc_rec_materialize(&r, DLC_REC_BUFFER_CAP, &mem) != 0) continue;
    if (mem.plan.mode == DLC_DATA_BUFFER) {
      ++buffers;
      capped &= mem.plan.size <= DLC_REC_BUFFER_CAP && mem.plan.size >= 1;
      if (!mem.plan.ext.zero_size) {
        __int128 first = (__int128)mem.plan.pad + mem.t.byte_offset + mem.plan.ext.lo;
        __int128 end = (__int128)mem.plan.pad + mem.t.byte_offset + mem.plan.ext.hi;
        within &= first >= 0 && end <= (__int128)mem.plan.size;
      }
      filled &= mem.buffer[0] == r.fill_seed;
    }
    dlc_tensor_mem_free(&mem);
    if (dlc_rng_next(&g) % 50 == 0) dlc_rec_init(&r);
  }
  CHECK(fits, "mutated records never exceed max_size");
  CHECK(capped, "buffers stay within the cap");
  CHECK(within, "[lo, hi) + byte_offset lies inside every buffer");
  CHECK(filled, "buffers carry the fill pattern");
  CHECK(buffers > 1000, "mutator reaches real buffers often (%d of 20000)", buffers);
}

/* dlc_oracle_normalize: the same vectors as test_normalize in fuzz/tests/test_fuzz_py.py
 * (dlconform.fuzz.triage.normalize must agree, or known keys stop matching). */
static void test_normalize(void) {
  static const char *const cases[][2] = {
      {"accepted NULL data for 12 elements", "accepted NULL data for N elements"},
      {"at 0x7ffd12 and -5, data-4", "at N and N, data-N"},
      {"size overflows int64", "size overflows intN"},
      {"with sizes=[4, 5, 6] and strides=[1]", "with sizes=[N] and strides=[N]"},
      {"dtype (5, 8, 1) shape [2, -3]", "dtype (N, N, N) shape [N]"},
      {"sizes=[]", "sizes=[]"},
      {"[a, 1, 2]", "[a, N]"},
      {"sizes=[N, N, N] of NaN", "sizes=[N] of NaN"},
      {"N: [N, N]", "N: [N]"},
  };
  char out[256], again[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    dlc_oracle_normalize(cases[i][0], out, sizeof out);
    CHECK(strcmp(out, cases[i][1]) == 0, "normalize(%s) = %s", cases[i][0], out);
    dlc_oracle_normalize(out, again, sizeof again);
    CHECK(strcmp(out, again) == 0, "normalize is not idempotent on %s", out);
  }
}

int main(void) {
  test_struct_roundtrip();
  test_any_bytes_decode();
  test_plan();
  test_mutate_materialize();
  test_offer();
  test_fill_and_guard();
  test_normalize();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
