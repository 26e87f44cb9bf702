/* abi: compile-time checks that the dlpack.h in use has the DLPack v1.3 ABI this suite
 * is written against. Included from check.h, so every translation unit that uses check
 * re-checks the header it was compiled with.
 *
 * Layout facts asserted (LP64: 8-byte pointers, 4-byte enums, natural alignment):
 *   DLDataType        code 0, bits 1, lanes 2; size 4
 *   DLDevice          device_type 0, device_id 4; size 8
 *   DLPackVersion     major 0, minor 4; size 8
 *   DLTensor          data 0, device 8, ndim 16, dtype 20, shape 24, strides 32,
 *                     byte_offset 40; size 48
 *   DLManagedTensor   dl_tensor 0, manager_ctx 48, deleter 56; size 64
 *   DLManagedTensorVersioned
 *                     version 0, manager_ctx 8, deleter 16, flags 24, dl_tensor 32; size 80
 *                     VER-10: the prefix up to and including flags keeps this layout in
 *                     every future ABI, so a consumer can always reach the deleter.
 *   DLPackExchangeAPIHeader
 *                     version 0, prev_api 8; size 16
 *   DLPackExchangeAPI header 0, managed_tensor_allocator 16,
 *                     managed_tensor_from_py_object_no_sync 24,
 *                     managed_tensor_to_py_object_no_sync 32,
 *                     dltensor_from_py_object_no_sync 40, current_work_stream 48; size 56
 */
#ifndef DLCONFORM_ABI_H
#define DLCONFORM_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>

#ifdef __cplusplus
#define DLC_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define DLC_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* The suite targets DLPack 1.3: the exchange API capsule and its struct exist from 1.3 on. */
DLC_STATIC_ASSERT(DLPACK_MAJOR_VERSION == 1, "dlpack.h major version must be 1");
DLC_STATIC_ASSERT(DLPACK_MINOR_VERSION >= 3, "dlpack.h must be v1.3 or later");

/* Flag bits of DLManagedTensorVersioned (FLG-02, FLG-04, FLG-06). */
DLC_STATIC_ASSERT(DLPACK_FLAG_BITMASK_READ_ONLY == 1, "READ_ONLY is bit 0");
DLC_STATIC_ASSERT(DLPACK_FLAG_BITMASK_IS_COPIED == 2, "IS_COPIED is bit 1");
DLC_STATIC_ASSERT(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == 4,
                  "IS_SUBBYTE_TYPE_PADDED is bit 2");

#if defined(__LP64__) || defined(_LP64)

DLC_STATIC_ASSERT(sizeof(void *) == 8, "LP64 pointers");

DLC_STATIC_ASSERT(sizeof(DLDataType) == 4, "DLDataType size");
DLC_STATIC_ASSERT(offsetof(DLDataType, code) == 0, "DLDataType.code");
DLC_STATIC_ASSERT(offsetof(DLDataType, bits) == 1, "DLDataType.bits");
DLC_STATIC_ASSERT(offsetof(DLDataType, lanes) == 2, "DLDataType.lanes");

DLC_STATIC_ASSERT(sizeof(DLDeviceType) == 4, "DLDeviceType is int-sized");
DLC_STATIC_ASSERT(sizeof(DLDevice) == 8, "DLDevice size");
DLC_STATIC_ASSERT(offsetof(DLDevice, device_type) == 0, "DLDevice.device_type");
DLC_STATIC_ASSERT(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id");

DLC_STATIC_ASSERT(sizeof(DLPackVersion) == 8, "DLPackVersion size");
DLC_STATIC_ASSERT(offsetof(DLPackVersion, major) == 0, "DLPackVersion.major");
DLC_STATIC_ASSERT(offsetof(DLPackVersion, minor) == 4, "DLPackVersion.minor");

DLC_STATIC_ASSERT(sizeof(DLTensor) == 48, "DLTensor size");
DLC_STATIC_ASSERT(offsetof(DLTensor, data) == 0, "DLTensor.data");
DLC_STATIC_ASSERT(offsetof(DLTensor, device) == 8, "DLTensor.device");
DLC_STATIC_ASSERT(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim");
DLC_STATIC_ASSERT(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype");
DLC_STATIC_ASSERT(offsetof(DLTensor, shape) == 24, "DLTensor.shape");
DLC_STATIC_ASSERT(offsetof(DLTensor, strides) == 32, "DLTensor.strides");
DLC_STATIC_ASSERT(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");

DLC_STATIC_ASSERT(sizeof(DLManagedTensor) == 64, "DLManagedTensor size");
DLC_STATIC_ASSERT(offsetof(DLManagedTensor, dl_tensor) == 0, "DLManagedTensor.dl_tensor");
DLC_STATIC_ASSERT(offsetof(DLManagedTensor, manager_ctx) == 48,
                  "DLManagedTensor.manager_ctx");
DLC_STATIC_ASSERT(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter");

/* VER-10: version, manager_ctx, deleter and flags are the ABI-stable prefix. */
DLC_STATIC_ASSERT(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned size");
DLC_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, version) == 0,
                  "DLManagedTensorVersioned.version (VER-10)");
DLC_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, manager_ctx) == 8,
                  "DLManagedTensorVersioned.manager_ctx (VER-10)");
DLC_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, deleter) == 16,
                  "DLManagedTensorVersioned.deleter (VER-10)");
DLC_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, flags) == 24,
                  "DLManagedTensorVersioned.flags (VER-10)");
DLC_STATIC_ASSERT(sizeof(((DLManagedTensorVersioned *)0)->flags) == 8,
                  "DLManagedTensorVersioned.flags is 64-bit (VER-10)");
DLC_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
                  "DLManagedTensorVersioned.dl_tensor");

DLC_STATIC_ASSERT(sizeof(DLPackExchangeAPIHeader) == 16, "DLPackExchangeAPIHeader size");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPIHeader, version) == 0,
                  "DLPackExchangeAPIHeader.version");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPIHeader, prev_api) == 8,
                  "DLPackExchangeAPIHeader.prev_api");

DLC_STATIC_ASSERT(sizeof(DLPackExchangeAPI) == 56, "DLPackExchangeAPI size");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPI, header) == 0, "DLPackExchangeAPI.header");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPI, managed_tensor_allocator) == 16,
                  "DLPackExchangeAPI.managed_tensor_allocator");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == 24,
                  "DLPackExchangeAPI.managed_tensor_from_py_object_no_sync");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == 32,
                  "DLPackExchangeAPI.managed_tensor_to_py_object_no_sync");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPI, dltensor_from_py_object_no_sync) == 40,
                  "DLPackExchangeAPI.dltensor_from_py_object_no_sync");
DLC_STATIC_ASSERT(offsetof(DLPackExchangeAPI, current_work_stream) == 48,
                  "DLPackExchangeAPI.current_work_stream");

#endif /* LP64 */

#endif /* DLCONFORM_ABI_H */
