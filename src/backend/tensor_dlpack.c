/* DLPack import and export (include/kernelkit/dlpack.h): a kk_tensor viewing
 * another library's DLManagedTensor(Versioned), whose storage calls the
 * producer's deleter on its last release, and a managed tensor viewing a
 * kk_tensor, which keeps a retained descriptor until the consumer's deleter.
 * Here because a tensor with storage is built next to the memory manager's
 * (tensor_storage.c). docs/dlpack.md has the mapping and the rules. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dlpack_abi.h"
#include "core/error.h"
#include "core/tensor_internal.h"
#include "kernelkit/dlpack.h"
#include "kernelkit/kernelkit.h"

/* The layouts the DLPack ABI fixes on a 64-bit target (what a ctypes or cffi
 * mirror of these structs must match). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(DLTensor) == 48 && offsetof(DLTensor, device) == 8 &&
                   offsetof(DLTensor, ndim) == 16 && offsetof(DLTensor, dtype) == 20 &&
                   offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, strides) == 32 &&
                   offsetof(DLTensor, byte_offset) == 40,
               "DLTensor layout");
_Static_assert(offsetof(DLManagedTensor, manager_ctx) == 48 &&
                   offsetof(DLManagedTensor, deleter) == 56 && sizeof(DLManagedTensor) == 64,
               "DLManagedTensor layout");
_Static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8 &&
                   offsetof(DLManagedTensorVersioned, deleter) == 16 &&
                   offsetof(DLManagedTensorVersioned, flags) == 24 &&
                   offsetof(DLManagedTensorVersioned, dl_tensor) == 32 &&
                   sizeof(DLManagedTensorVersioned) == 80,
               "DLManagedTensorVersioned layout");
#endif

#define SUPPORTED_DTYPES                                                                           \
    "float64/32/16, bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn, int8, int32 or uint8, "   \
    "lanes 1"

/* ---- dtypes ---- */

static const char *code_name(unsigned code) {
    static const char *const names[] = {
        "kDLInt",
        "kDLUInt",
        "kDLFloat",
        "kDLOpaqueHandle",
        "kDLBfloat",
        "kDLComplex",
        "kDLBool",
        "kDLFloat8_e3m4",
        "kDLFloat8_e4m3",
        "kDLFloat8_e4m3b11fnuz",
        "kDLFloat8_e4m3fn",
        "kDLFloat8_e4m3fnuz",
        "kDLFloat8_e5m2",
        "kDLFloat8_e5m2fnuz",
        "kDLFloat8_e8m0fnu",
        "kDLFloat6_e2m3fn",
        "kDLFloat6_e3m2fn",
        "kDLFloat4_e2m1fn",
    };
    return code < sizeof names / sizeof names[0] ? names[code] : "an unknown code";
}

static kk_status dtype_from_dl(const char *func, DLDataType t, uint64_t flags, kk_dtype *out) {
    const char *arg = "dl_tensor.dtype";
    const unsigned code = t.code, bits = t.bits, lanes = t.lanes;
    unsigned want_bits = 0; /* the only width a code allows (0: several) */
    kk_dtype d = KK_DTYPE_COUNT;
    switch (code) {
    case kDLFloat:
        d = bits == 64 ? KK_DTYPE_F64 : bits == 32 ? KK_DTYPE_F32 : bits == 16 ? KK_DTYPE_F16 : d;
        break;
    case kDLBfloat:
        want_bits = 16;
        d = KK_DTYPE_BF16;
        break;
    case kDLInt: d = bits == 8 ? KK_DTYPE_INT8 : bits == 32 ? KK_DTYPE_INT32 : d; break;
    case kDLUInt: d = bits == 8 ? KK_DTYPE_UINT8 : d; break;
    case KK__DL_FLOAT8_E4M3FN:
        want_bits = 8;
        d = KK_DTYPE_FP8_E4M3;
        break;
    case KK__DL_FLOAT8_E5M2:
        want_bits = 8;
        d = KK_DTYPE_FP8_E5M2;
        break;
    case KK__DL_FLOAT4_E2M1FN:
        want_bits = 4;
        d = KK_DTYPE_E2M1;
        break;
    default:
        if (code > KK__DL_FLOAT4_E2M1FN)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg,
                                 "a DLDataTypeCode (0 to 17) of " SUPPORTED_DTYPES, "code %u",
                                 code);
        break; /* a code DLPack has and KernelKit not: unsupported below */
    }
    if (want_bits && bits != want_bits)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg, "the width its code has",
                             "%s with bits %u (expected %u)", code_name(code), bits, want_bits);
    if (d == KK_DTYPE_COUNT || lanes != 1)
        return kk__arg_error(KK_ERR_UNSUPPORTED, func, arg, SUPPORTED_DTYPES,
                             "%s, bits %u, lanes %u%s", code_name(code), bits, lanes,
                             d == KK_DTYPE_COUNT ? " (not a KernelKit dtype)"
                                                 : " (vector lanes are not supported)");
    if (d == KK_DTYPE_E2M1 && (flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED))
        return kk__arg_error(KK_ERR_UNSUPPORTED, func, "flags",
                             "packed float4_e2m1fn (two elements a byte, low nibble first)",
                             "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (one element a byte)");
    *out = d;
    return KK_OK;
}

static DLDataType dtype_to_dl(kk_dtype d) {
    DLDataType t = {kDLFloat, (uint8_t)kk_dtype_bits(d), 1};
    switch (d) {
    case KK_DTYPE_BF16: t.code = kDLBfloat; break;
    case KK_DTYPE_FP8_E4M3: t.code = KK__DL_FLOAT8_E4M3FN; break;
    case KK_DTYPE_FP8_E5M2: t.code = KK__DL_FLOAT8_E5M2; break;
    case KK_DTYPE_E2M1: t.code = KK__DL_FLOAT4_E2M1FN; break;
    case KK_DTYPE_INT8:
    case KK_DTYPE_INT32: t.code = kDLInt; break;
    case KK_DTYPE_UINT8: t.code = kDLUInt; break;
    default: break; /* f64, f32, f16: kDLFloat */
    }
    return t;
}

/* ---- devices ---- */

static const char *device_type_name(int type) {
    static const char *const names[] = {
        NULL,        "kDLCPU",      "kDLCUDA",   "kDLCUDAHost",    "kDLOpenCL",
        NULL,        NULL,          "kDLVulkan", "kDLMetal",       "kDLVPI",
        "kDLROCM",   "kDLROCMHost", "kDLExtDev", "kDLCUDAManaged", "kDLOneAPI",
        "kDLWebGPU", "kDLHexagon",  "kDLMAIA",   "kDLTrn",
    };
    const int n = (int)(sizeof names / sizeof names[0]);
    return type >= 0 && type < n ? names[type] : NULL;
}

static kk_status device_from_dl(const char *func, DLDevice dev, kk_backend_kind *kind, int *index,
                                char canon[16]) {
    const char *arg = "dl_tensor.device";
    const int type = (int)dev.device_type, id = (int)dev.device_id;
    const char *name = device_type_name(type);
    char spec[32];
    if (type == kDLCPU || type == kDLCUDAHost) { /* pinned host memory is CPU memory */
        snprintf(spec, sizeof spec, "cpu");
    } else if (type == kDLCUDA) {
        if (id < 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg, "a device_id >= 0",
                                 "kDLCUDA device_id %d", id);
        if (!kk_built_with_cuda())
            return kk__arg_error(KK_ERR_UNSUPPORTED, func, arg,
                                 "kDLCPU or kDLCUDAHost (this build of KernelKit has no CUDA "
                                 "backend)",
                                 "kDLCUDA device_id %d (cuda:%d)", id, id);
        snprintf(spec, sizeof spec, "cuda:%d", id);
    } else if (name) {
        return kk__arg_error(KK_ERR_UNSUPPORTED, func, arg,
                             "kDLCPU, kDLCUDAHost or kDLCUDA (the devices KernelKit has)",
                             "%s device_id %d", name, id);
    } else {
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg, "a DLDeviceType", "device_type %d",
                             type);
    }
    return kk__tensor_device(func, spec, kind, index, canon);
}

/* ---- import ---- */

static void release_legacy(void *ctx) {
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

static void release_versioned(void *ctx) {
    DLManagedTensorVersioned *m = ctx;
    if (m->deleter) m->deleter(m);
}

static kk_status check_shape(const char *func, const DLTensor *dl, int64_t *numel) {
    if (dl->ndim < 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.ndim", ">= 0", "%d",
                             (int)dl->ndim);
    if (dl->ndim > KK_TENSOR_MAX_DIMS)
        return kk__arg_error(KK_ERR_UNSUPPORTED, func, "dl_tensor.ndim",
                             "at most 8 (KK_TENSOR_MAX_DIMS)", "%d", (int)dl->ndim);
    if (dl->ndim > 0 && !dl->shape)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.shape",
                             "a non-NULL pointer when ndim > 0", "NULL");
    int64_t n = 1;
    for (int d = 0; d < dl->ndim; d++) {
        if (dl->shape[d] < 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.shape", "sizes >= 0",
                                 "shape[%d] = %lld", d, (long long)dl->shape[d]);
        if (!kk__mul_i64(n, dl->shape[d], &n))
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.shape",
                                 "an element count that fits int64_t",
                                 "overflow at shape[%d] = %lld", d, (long long)dl->shape[d]);
    }
    *numel = n;
    return KK_OK;
}

/* strides[] from dl's (compact when NULL); negative strides where they are
 * never used become the compact ones; the span must fit int64_t and size_t. */
static kk_status check_strides(const char *func, const DLTensor *dl, kk_dtype dtype, int64_t numel,
                               int64_t *strides) {
    const int nd = dl->ndim;
    kk__contiguous_strides(nd, dl->shape, strides);
    if (!dl->strides) return KK_OK;
    int64_t last = 0, term = 0;
    for (int d = 0; d < nd; d++) {
        const int64_t s = dl->strides[d];
        if (s < 0 && (numel == 0 || dl->shape[d] == 1)) continue; /* never used */
        if (s < 0)
            return kk__arg_error(KK_ERR_UNSUPPORTED, func, "dl_tensor.strides",
                                 "strides >= 0 (KernelKit views have no negative strides: copy "
                                 "first)",
                                 "strides[%d] = %lld", d, (long long)s);
        strides[d] = s;
        if (numel == 0) continue;
        if (!kk__mul_i64(dl->shape[d] - 1, s, &term) || !kk__add_i64(last, term, &last) ||
            last == INT64_MAX)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.strides",
                                 "a memory span that fits int64_t",
                                 "overflow at strides[%d] = %lld", d, (long long)s);
    }
    size_t bytes = 0;
    return numel ? kk__bytes_checked(func, "dl_tensor.strides", dtype, last + 1, &bytes) : KK_OK;
}

static kk_status check_data(const char *func, const DLTensor *dl, kk_dtype dtype, int64_t numel,
                            void **data) {
    *data = NULL;
    if (!dl->data) {
        if (numel == 0) return KK_OK;
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.data",
                             "a non-NULL pointer for a non-empty tensor", "NULL");
    }
    const uintptr_t base = (uintptr_t)dl->data;
    if (dl->byte_offset > (uint64_t)(UINTPTR_MAX - base))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.byte_offset",
                             "an offset that keeps the address in range", "%llu (data %p)",
                             (unsigned long long)dl->byte_offset, dl->data);
    const uintptr_t addr = base + (uintptr_t)dl->byte_offset;
    const int bits = kk_dtype_bits(dtype);
    const uintptr_t align = bits >= 8 ? (uintptr_t)(bits / 8) : 1;
    if (addr % align != 0) {
        char expected[96];
        snprintf(expected, sizeof expected, "an address aligned to %d bytes for %s", (int)align,
                 kk_dtype_name(dtype));
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dl_tensor.data", expected,
                             "%p (data %p + byte_offset %llu)", (void *)addr, dl->data,
                             (unsigned long long)dl->byte_offset);
    }
    *data = (void *)addr;
    return KK_OK;
}

/* A kk_tensor over dl; its storage calls release(ctx) on the last release
 * (release NULL: nothing). On an error nothing is kept and release is not
 * called. */
static kk_status import(const char *func, const DLTensor *dl, uint64_t flags,
                        void (*release)(void *), void *ctx, kk_tensor **out) {
    kk_dtype dtype = KK_DTYPE_F32;
    int64_t numel = 0;
    int64_t strides[KK_TENSOR_MAX_DIMS] = {0};
    void *data = NULL;
    kk_backend_kind kind;
    int index;
    char canon[16];
    kk_status st;
    if ((st = check_shape(func, dl, &numel)) ||
        (st = dtype_from_dl(func, dl->dtype, flags, &dtype)))
        return st;
    size_t bytes = 0;
    if ((st = kk__bytes_checked(func, "dl_tensor.shape", dtype, numel, &bytes)) ||
        (st = check_strides(func, dl, dtype, numel, strides)) ||
        (st = check_data(func, dl, dtype, numel, &data)) ||
        (st = device_from_dl(func, dl->device, &kind, &index, canon)))
        return st;
    kk_tensor *t =
        kk__tensor_new_desc(func, dtype, (int)dl->ndim, dl->shape, strides, kind, index, canon);
    if (!t) return KK_ERR_OUT_OF_MEMORY;
    t->data = data;
    if ((st = kk__check_e2m1_layout(func, "dl_tensor.strides", t, 0))) {
        free(t);
        return st;
    }
    kk__tensor_storage *s = calloc(1, sizeof *s);
    if (!s) {
        free(t);
        return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation of a tensor failed");
    }
    atomic_init(&s->refs, 1);
    s->bytes = numel ? kk__tensor_span_bytes(t) : 0;
    memcpy(s->device, canon, sizeof s->device);
    s->release = release;
    s->release_ctx = ctx;
    s->read_only = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    t->storage = s;
    *out = t;
    return KK_OK;
}

kk_status kk_tensor_from_dlpack(void *dl_managed_tensor, int take_ownership, kk_tensor **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    *out = NULL;
    if ((st = KK__CHECK_NOT_NULL(dl_managed_tensor))) return st;
    DLManagedTensor *m = dl_managed_tensor;
    return import(__func__, &m->dl_tensor, 0, take_ownership ? release_legacy : NULL, m, out);
}

kk_status kk_tensor_from_dlpack_versioned(void *dl_managed_tensor_versioned, int take_ownership,
                                          kk_tensor **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    *out = NULL;
    if ((st = KK__CHECK_NOT_NULL(dl_managed_tensor_versioned))) return st;
    DLManagedTensorVersioned *m = dl_managed_tensor_versioned;
    if (m->version.major != KK__DLPACK_MAJOR)
        return kk__arg_error(KK_ERR_UNSUPPORTED, __func__, "version",
                             "major version 1 (the DLPack ABI this library reads; the caller "
                             "still owns the tensor and may call its deleter)",
                             "%u.%u", (unsigned)m->version.major, (unsigned)m->version.minor);
    return import(__func__, &m->dl_tensor, m->flags, take_ownership ? release_versioned : NULL, m,
                  out);
}

/* ---- export ---- */

/* One allocation per export; the managed tensor comes first, so the deleter's
 * `self` is the block. */
typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } m;
    int64_t shape[KK_TENSOR_MAX_DIMS];
    int64_t strides[KK_TENSOR_MAX_DIMS];
    kk_tensor *keep; /* a descriptor retaining t's storage */
} export_block;

static void free_block(export_block *b) {
    if (!b) return;
    kk_tensor_destroy(b->keep);
    free(b);
}

static void delete_legacy(DLManagedTensor *self) { free_block((export_block *)(void *)self); }

static void delete_versioned(DLManagedTensorVersioned *self) {
    free_block((export_block *)(void *)self);
}

static kk_status export_block_new(const char *func, kk_tensor *t, export_block **block,
                                  DLTensor *dl) {
    kk_status st = kk__check_tensor(func, "t", t);
    if (st) return st;
    if (t->device_kind != KK_BACKEND_CPU && t->device_kind != KK_BACKEND_CUDA)
        return kk__arg_error(KK_ERR_UNSUPPORTED, func, "t", "a tensor on the CPU or a CUDA device",
                             "a tensor on %s", t->device);
    export_block *b = calloc(1, sizeof *b);
    if (!b)
        return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation of a DLPack tensor failed");
    if (!(b->keep = kk__tensor_clone_desc(func, t))) {
        free(b);
        return KK_ERR_OUT_OF_MEMORY;
    }
    for (int d = 0; d < t->ndim; d++) {
        b->shape[d] = t->shape[d];
        b->strides[d] = t->strides[d];
    }
    memset(dl, 0, sizeof *dl);
    dl->data = t->data;
    dl->device.device_type = t->device_kind == KK_BACKEND_CUDA ? kDLCUDA : kDLCPU;
    dl->device.device_id = t->device_kind == KK_BACKEND_CUDA ? t->device_index : 0;
    dl->ndim = t->ndim;
    dl->dtype = dtype_to_dl(t->dtype);
    dl->shape = b->shape;
    dl->strides = b->strides;
    dl->byte_offset = 0;
    *block = b;
    return KK_OK;
}

kk_status kk_tensor_to_dlpack(kk_tensor *t, void **dl_managed_tensor_out) {
    export_block *b = NULL;
    DLTensor dl = {0};
    kk_status st = KK__CHECK_NOT_NULL(dl_managed_tensor_out);
    if (st) return st;
    *dl_managed_tensor_out = NULL;
    if ((st = export_block_new(__func__, t, &b, &dl))) return st;
    b->m.legacy.dl_tensor = dl;
    b->m.legacy.manager_ctx = b;
    b->m.legacy.deleter = delete_legacy;
    *dl_managed_tensor_out = &b->m.legacy;
    return KK_OK;
}

kk_status kk_tensor_to_dlpack_versioned(kk_tensor *t, void **dl_managed_tensor_versioned_out) {
    export_block *b = NULL;
    DLTensor dl = {0};
    kk_status st = KK__CHECK_NOT_NULL(dl_managed_tensor_versioned_out);
    if (st) return st;
    *dl_managed_tensor_versioned_out = NULL;
    if ((st = export_block_new(__func__, t, &b, &dl))) return st;
    DLManagedTensorVersioned *m = &b->m.versioned;
    m->version.major = KK__DLPACK_MAJOR;
    m->version.minor = dl.dtype.code > KK__DL_BOOL ? 1 : 0; /* fp8/fp4 codes came with 1.1 */
    m->manager_ctx = b;
    m->deleter = delete_versioned;
    m->flags = kk_tensor_is_read_only(t) ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    m->dl_tensor = dl;
    *dl_managed_tensor_versioned_out = m;
    return KK_OK;
}
