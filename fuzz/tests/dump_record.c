/* dump_record: prints a fuzz input as its decoded record and memory plan (triage aid).
 * Usage: dump_record FILE... */
#include <stdio.h>

#include "layout.h"
#include "record.h"

static void dump(const char *path) {
  static uint8_t buf[1 << 16];
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return;
  }
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  dlc_record r;
  dlc_rec_decode(buf, n, &r);
  static const char *const offers[] = {"none", "type", "instance", "major", "null-dltensor",
                                       "chained", "shadowed", "minor"};
  int offer = dlc_rec_offer(&r);
  printf("%s: %zu bytes, format %u\n", path, n, r.format);
  printf("  offer 0x%02x: %s%s%s\n", r.offer, offers[offer],
         offer == DLC_OFFER_MAJOR ? (r.offer & DLC_OFFER_MAJOR0 ? " (major 0)" : " (major 2)") : "",
         offer ? " (exported versioned)" : "");
  dlc_rec_apply_offer(&r); /* as the consumer target exports it */
  dlc_plan p;
  dlc_rec_plan(&r, DLC_REC_BUFFER_CAP, &p);
  static const char *const modes[] = {"buffer", "null", "dangling"};
  printf("  capsule %s%s%s%s%s%s  version %u.%u flags 0x%llx\n",
         r.kind & DLC_REC_VERSIONED ? "versioned" : "legacy",
         r.kind & DLC_REC_STRIDES_NULL ? " strides=NULL" : "",
         r.kind & DLC_REC_SHAPE_NULL ? " shape=NULL" : "",
         r.kind & DLC_REC_DELETER_NULL ? " deleter=NULL" : "",
         r.kind & DLC_REC_DATA_NULL ? " data=NULL" : "",
         r.kind & DLC_REC_DANGLING ? " dangling" : "", r.version_major, r.version_minor,
         (unsigned long long)r.flags);
  printf("  dtype (%u, %u, %u) device (%d, %d) byte_offset %llu ndim %d\n", r.code, r.bits,
         r.lanes, r.device_type, r.device_id, (unsigned long long)r.byte_offset, r.ndim);
  printf("  shape  [");
  for (int i = 0; i < dlc_rec_dims(&r); ++i) printf("%s%lld", i ? ", " : "", (long long)r.shape[i]);
  printf("]\n  strides [");
  for (int i = 0; i < dlc_rec_dims(&r); ++i)
    printf("%s%lld", i ? ", " : "", (long long)r.strides[i]);
  printf("]\n  kw 0x%x: max_version (%d, %d) copy %u dl_device (%d, %d) stream kind %u value %lld\n",
         r.kw, r.kw_max_major, r.kw_max_minor, r.kw_copy % 3, r.kw_dev_type, r.kw_dev_id,
         r.kw_stream_kind % 3, (long long)r.kw_stream);
  printf("  plan: extent status %s zero_size %d numel %llu lo %lld hi %lld; data %s%s%s size %llu pad %llu%s\n",
         dlc_extent_status_name(p.ext.status), p.ext.zero_size, (unsigned long long)p.ext.numel,
         (long long)p.ext.lo, (long long)p.ext.hi, modes[p.mode], p.why ? " because " : "",
         p.why ? p.why : "", (unsigned long long)p.size, (unsigned long long)p.pad,
         p.readonly ? " read-only" : "");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) dump(argv[i]);
  return argc > 1 ? 0 : 2;
}
