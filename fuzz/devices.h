/* devices: which DLPack device types this machine really has (issue 21, item 4).
 *
 * A forged export that names a device over host memory is a lie a consumer can act on where
 * that device exists: it copies from "device" memory and the runtime fails (torch: a CUDA
 * error for device='cpu'). There the class of the consumer's refusal says nothing about the
 * consumer, so the refusal-class oracles (DEV-07, CPY-08) leave it alone; without the device
 * the same seed is judged as before. The Python twin is dlconform.fuzz.devices. */
#ifndef DLC_FUZZ_DEVICES_H
#define DLC_FUZZ_DEVICES_H

#include <stdint.h>

/* 1 when a device of DLDeviceType `device_type` is present: CUDA (2) when an NVIDIA device
 * node /dev/nvidia<N> exists, ROCm (10) when /dev/kfd does. DLCONFORM_REAL_DEVICES (a comma
 * list of device types, possibly empty) overrides the detection. Read once. */
int dlc_device_present(int32_t device_type);

#endif
