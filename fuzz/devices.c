/* devices: see devices.h. */
#include "devices.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { KDL_CUDA = 2, KDL_ROCM = 10 };

static int known = 0, cuda = 0, rocm = 0;

static void detect(void) {
  const char *forced = getenv("DLCONFORM_REAL_DEVICES");
  if (forced != NULL) {
    /* a comma list of device types */
    for (const char *s = forced; *s;) {
      char *end;
      long v = strtol(s, &end, 10);
      if (end == s) break;
      if (v == KDL_CUDA) cuda = 1;
      if (v == KDL_ROCM) rocm = 1;
      s = *end == ',' ? end + 1 : end;
    }
    return;
  }
  glob_t g;
  if (glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0) {
    cuda = g.gl_pathc > 0;
    globfree(&g);
  }
  rocm = access("/dev/kfd", F_OK) == 0;
}

int dlc_device_present(int32_t device_type) {
  if (!known) {
    detect();
    known = 1;
  }
  return (device_type == KDL_CUDA && cuda) || (device_type == KDL_ROCM && rocm);
}
