/* target_pyempty: the throughput baseline. Same interpreter start-up as target_consumer
 * (pyhost: thread pools off, consumer imported), and an input body that does nothing. */
#include <stddef.h>
#include <stdint.h>

#include "pyhost.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  dlc_pyhost_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)data;
  (void)size;
  return 0;
}
