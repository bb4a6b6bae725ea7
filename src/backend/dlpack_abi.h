/* Internal: the DLPack structures, from the vendored upstream dlpack.h
 * (third_party/dlpack), plus what DLPack 1.x added when that header predates
 * 1.0 (v0.6 defines no DLPACK_MAJOR_VERSION): DLPackVersion,
 * DLManagedTensorVersioned and its flag bits, defined field for field as the
 * 1.x ABI has them; with an upstream 1.x header these definitions step aside.
 * The type codes 1.x added (bool, fp8, fp4) are KK__DL_* constants here, so
 * they never clash with a header's enum. docs/dlpack.md. */
#ifndef KK_BACKEND_DLPACK_ABI_H
#define KK_BACKEND_DLPACK_ABI_H

#include <dlpack/dlpack.h>
#include <stdint.h>

#ifndef DLPACK_MAJOR_VERSION
#define KK__DLPACK_OWN_V1 1

/* DLPack 1.x: the version a DLManagedTensorVersioned carries. */
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* DLPack 1.x: the versioned managed tensor (the layout every 1.x keeps). */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif

#ifndef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED /* added in 1.1 */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
#endif

/* The ABI major version this library reads and writes. */
#define KK__DLPACK_MAJOR 1

/* DLDataTypeCode values of DLPack 1.0 (bool) and 1.1 (fp8, fp6, fp4). */
enum {
    KK__DL_BOOL = 6,
    KK__DL_FLOAT8_E3M4 = 7,
    KK__DL_FLOAT8_E4M3 = 8,
    KK__DL_FLOAT8_E4M3B11FNUZ = 9,
    KK__DL_FLOAT8_E4M3FN = 10,
    KK__DL_FLOAT8_E4M3FNUZ = 11,
    KK__DL_FLOAT8_E5M2 = 12,
    KK__DL_FLOAT8_E5M2FNUZ = 13,
    KK__DL_FLOAT8_E8M0FNU = 14,
    KK__DL_FLOAT6_E2M3FN = 15,
    KK__DL_FLOAT6_E3M2FN = 16,
    KK__DL_FLOAT4_E2M1FN = 17,
};

/* DLDeviceType values of DLPack 1.x beyond v0.6's. */
enum {
    KK__DL_ONEAPI = 14,
    KK__DL_WEBGPU = 15,
    KK__DL_HEXAGON = 16,
    KK__DL_MAIA = 17,
    KK__DL_TRN = 18,
};

#endif
