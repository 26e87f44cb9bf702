/* write_seeds: writes the committed seed corpus (fuzz/corpus/seeds/) with the record
 * encoder, one small binary per interesting export. Usage: write_seeds DIR */
#include <stdio.h>
#include <string.h>

#include "layout.h"
#include "record.h"

static const char *dir;

static void emit(const char *name, const dlc_record *r) {
  uint8_t buf[DLC_REC_MAX_SIZE];
  size_t n = dlc_rec_encode(r, buf, sizeof buf);
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(buf, 1, n, f) != n) {
    perror(path);
    return;
  }
  fclose(f);
}

/* A CPU tensor with row-major strides. */
static void base(dlc_record *r, int ndim, const int64_t *shape, uint8_t code, uint8_t bits) {
  dlc_rec_init(r);
  r->ndim = (int8_t)ndim;
  for (int i = 0; i < ndim; ++i) r->shape[i] = shape[i];
  (void)dlc_rec_row_major(r);
  r->code = code;
  r->bits = bits;
  r->fill_seed = 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  dlc_record r;
  static const int64_t s23[] = {2, 3}, s4[] = {4}, s32[] = {3, 2}, s222[] = {2, 2, 2},
                       s03[] = {0, 3}, s2[] = {2}, huge[] = {(int64_t)1 << 40};

  base(&r, 2, s23, 2, 32);
  emit("legacy-float32-2x3", &r);
  r.kind = DLC_REC_DELETER_NULL; /* OWN-01: a consumer must not call a NULL deleter */
  emit("legacy-float32-2x3-null-deleter", &r);

  base(&r, 1, s4, 0, 64);
  r.kind = DLC_REC_STRIDES_NULL;
  emit("legacy-int64-4-strides-null", &r);

  base(&r, 2, s32, 2, 64);
  r.kind = DLC_REC_VERSIONED;
  r.strides[0] = 1, r.strides[1] = 3; /* transposed */
  r.flags = 1;                        /* READ_ONLY (FLG-02) */
  r.kw = DLC_KW_COPY, r.kw_copy = DLC_COPY_NONE;
  emit("versioned-float64-transposed-readonly", &r);

  base(&r, 3, s222, 1, 8);
  r.strides[0] = -4, r.byte_offset = 4; /* negative stride, LAY-03 offset */
  emit("legacy-uint8-negstride-offset", &r);

  base(&r, 2, s03, 2, 32);
  r.kind = DLC_REC_DATA_NULL | DLC_REC_VERSIONED; /* LAY-04 */
  emit("versioned-zero-size-null-data", &r);

  base(&r, 0, NULL, 6, 8);
  emit("legacy-bool-0d", &r);

  base(&r, 1, s2, 5, 64);
  r.kind = DLC_REC_VERSIONED;
  r.kw = DLC_KW_COPY | DLC_KW_DL_DEVICE, r.kw_copy = DLC_COPY_TRUE, r.kw_dev_type = 1;
  emit("versioned-complex64-copy", &r);

  base(&r, 1, s4, 2, 32);
  r.kind = DLC_REC_VERSIONED, r.version_major = 2, r.version_minor = 0; /* VER-08 */
  emit("versioned-major2", &r);

  base(&r, 1, huge, 1, 8);
  r.kind = DLC_REC_DANGLING; /* valid extent, over the cap */
  emit("legacy-uint8-huge-dangling", &r);

  base(&r, 2, s23, 2, 32);
  r.shape[1] = -3; /* LAY-09 */
  emit("legacy-negative-extent", &r);

  base(&r, 1, s4, 4, 16);
  emit("legacy-bfloat16", &r);

  base(&r, 1, s4, 2, 32);
  r.lanes = 4; /* DT-10 vector */
  emit("legacy-float32x4", &r);

  base(&r, 1, s4, 2, 32);
  r.device_type = 2; /* CUDA from a CPU-only consumer */
  emit("legacy-cuda-device", &r);

  base(&r, 1, s4, 17, 4);
  r.kind = DLC_REC_VERSIONED, r.flags = 4; /* fp4, padded bit (FLG-06) */
  emit("versioned-fp4-padded", &r);
  base(&r, 1, s4, 2, 32);
  r.kind = DLC_REC_USED_NAME; /* already consumed (CAP-04) */
  emit("legacy-used-capsule", &r);

  base(&r, 1, s4, 2, 32);
  r.device_type = 2; /* CUDA producer asked for a host copy: device=(1, 0) (DEV-06, CPY-08) */
  r.kw = DLC_KW_DL_DEVICE | DLC_KW_STRICT_PRODUCER, r.kw_dev_type = 1;
  emit("legacy-cuda-strict-to-cpu", &r);

  /* device memory in the CUDA mode (fuzz/devmem.h); host memory named CUDA elsewhere */
  base(&r, 1, s4, 2, 32);
  r.device_type = 2, r.kind = DLC_REC_VERSIONED, r.flags = 0;
  r.version_major = 1, r.version_minor = 3;
  r.kw = DLC_KW_DL_DEVICE | DLC_KW_COPY, r.kw_dev_type = 1, r.kw_copy = DLC_COPY_FALSE;
  emit("versioned-cuda-to-cpu-copy-false", &r); /* CPY-07 */
  base(&r, 2, s23, 2, 32);
  r.device_type = 2, r.kind = DLC_REC_VERSIONED, r.version_major = 1, r.version_minor = 3;
  r.strides[0] = 1, r.strides[1] = 2; /* transposed (LAY-11) */
  emit("versioned-cuda-transposed", &r);
  base(&r, 2, s23, 2, 32);
  r.device_type = 2, r.kind = DLC_REC_VERSIONED, r.version_major = 1, r.version_minor = 3;
  r.kw = DLC_KW_COPY, r.kw_copy = DLC_COPY_TRUE; /* a copy of device memory (CPY-06) */
  emit("versioned-cuda-2x3-copy", &r);

  /* for the producer target's CUDA mode (fuzz/producer_cuda.h): the host copy of a CUDA tensor,
   * versioned (STR-12, FLG-04), and a consumer's own stream (an int above 2: STR-07, STR-11) */
  base(&r, 2, s23, 2, 32);
  r.kind = DLC_REC_VERSIONED, r.version_major = 1, r.version_minor = 3;
  r.kw = DLC_KW_MAX_VERSION | DLC_KW_DL_DEVICE, r.kw_max_major = 1, r.kw_max_minor = 3, r.kw_dev_type = 1;
  emit("versioned-max-version-host-copy", &r);
  base(&r, 2, s23, 2, 32);
  r.kind = DLC_REC_VERSIONED, r.version_major = 1, r.version_minor = 3;
  r.kw = DLC_KW_MAX_VERSION | DLC_KW_STREAM, r.kw_max_major = 1, r.kw_max_minor = 3;
  r.kw_stream_kind = DLC_STREAM_INT, r.kw_stream = 7;
  emit("versioned-max-version-stream-handle", &r);
  r.kw_stream = 0; /* STR-08: 0 is ambiguous on CUDA, a producer should refuse it */
  emit("versioned-max-version-stream-zero", &r);

  base(&r, 1, s4, 2, 32);
  r.kw = DLC_KW_OLD_PRODUCER; /* an old producer: __dlpack__(stream) only (VER-06) */
  emit("legacy-old-producer", &r);

  /* C exchange API offers (record.h, byte 67); an offered export is versioned */
  static const struct {
    const char *name;
    uint8_t offer;
    int copy; /* pass copy=True: the dltensor_from_py_object_no_sync path of some consumers */
  } offers[] = {
      {"offer-type", DLC_OFFER_TYPE, 0},
      {"offer-type-copy", DLC_OFFER_TYPE, 1},
      {"offer-instance", DLC_OFFER_INSTANCE, 0},               /* XAPI-04 */
      {"offer-shadowed", DLC_OFFER_SHADOWED, 0},               /* XAPI-04 */
      {"offer-major2", DLC_OFFER_MAJOR, 0},                    /* XAPI-06 */
      {"offer-major0", DLC_OFFER_MAJOR | DLC_OFFER_MAJOR0, 0}, /* XAPI-06 */
      {"offer-chained", DLC_OFFER_CHAINED, 0},                 /* XAPI-06, XAPI-07 */
      {"offer-null-dltensor-copy", DLC_OFFER_NULL_DLTENSOR, 1}, /* XAPI-11 */
      {"offer-minor", DLC_OFFER_MINOR, 1},
  };
  for (size_t i = 0; i < sizeof offers / sizeof offers[0]; ++i) {
    base(&r, 2, s23, 2, 32);
    r.kind = DLC_REC_VERSIONED;
    r.offer = offers[i].offer;
    if (offers[i].copy) r.kw = DLC_KW_COPY, r.kw_copy = DLC_COPY_TRUE;
    emit(offers[i].name, &r);
  }
  /* the consumer target's CUDA mode: a table offered over device bytes still pending on the
   * producer's stream, which its current_work_stream names (XAPI-19, fuzz/devmem.h) */
  base(&r, 2, s23, 2, 32);
  r.device_type = 2, r.kind = DLC_REC_VERSIONED, r.offer = DLC_OFFER_TYPE;
  emit("versioned-cuda-offer-type", &r);
  /* the consumer target's CUDA mode: from_dlpack(copy=True) inside a side-stream context of the
   * consumer's library (STR-07: it names that stream; STR-01: it copies there) */
  base(&r, 2, s23, 2, 32);
  r.device_type = 2, r.kind = DLC_REC_VERSIONED, r.version_major = 1, r.version_minor = 3;
  r.kw = DLC_KW_COPY | DLC_KW_SIDE_STREAM, r.kw_copy = DLC_COPY_TRUE;
  emit("versioned-cuda-2x3-copy-side-stream", &r);
  /* the consumer target's CUDA mode: a device export whose first element sits past data
   * (LAY-03 on the device) */
  base(&r, 2, s23, 2, 32);
  r.device_type = 2, r.kind = DLC_REC_VERSIONED, r.version_major = 1, r.version_minor = 3;
  r.byte_offset = 8;
  emit("versioned-cuda-2x3-offset", &r);
  return 0;
}
