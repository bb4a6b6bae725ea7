/* rope_kv_append on the CPU, with rope's table and row rotation
 * (rope_cpu.h): the lengths are checked first, so a bad one writes nothing;
 * caches given as two buffers are copied in to out, one (slab) per
 * iteration; then q's rows and the appended k and v rows are written, each
 * row once. In place (kk_rope_kv_append) only the S appended rows of each
 * cache move. q, k, v and q_out may be strided views ([B,H,S,D] with D
 * contiguous: a decoder hands the projections' [B,S,H,D] rows over as they
 * are); the caches are whole contiguous buffers. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_rows.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "cpu/rope_cpu.h"
#include "opdef/rope_kv_append.h"

/* 1: out is in (in place); 0: apart; an error when they overlap otherwise,
 * where a copy would read what it had written. */
static kk_status same_buffer(const kk_tensor *in, const kk_tensor *out, const char *name,
                             size_t bytes, int *same) {
    const char *a = in->data, *b = out->data;
    *same = a == b;
    if (*same || a + bytes <= b || b + bytes <= a) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope_kv_append", name,
                         "the input cache's buffer itself, or memory apart from it",
                         "a buffer overlapping it at %+lld bytes", (long long)(b - a));
}

/* Row (b, h, s) of a [B,H,S,D] tensor, by its strides. */
static char *row_of(const kk_tensor *x, int64_t b, int64_t h, int64_t s, size_t es) {
    return (char *)x->data +
           (size_t)(b * x->strides[0] + h * x->strides[1] + s * x->strides[2]) * es;
}

kk_status kk__rope_kv_append_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    /* q, k, v and q_out [B,H,S,D] may be strided views, D contiguous; the
     * caches are whole contiguous buffers */
    kk_status st = kk__cpu_check_tensors_strided(
        p, t, 1u << KK__RKV_T_Q | 1u << KK__RKV_T_K | 1u << KK__RKV_T_V | 1u << KK__RKV_T_Q_OUT);
    if (st != KK_OK) return st;
    const int64_t B = p->i[KK__RKV_B], Hq = p->i[KK__RKV_HQ], Hkv = p->i[KK__RKV_HKV];
    const int64_t S = p->i[KK__RKV_S], smax = p->i[KK__RKV_SMAX], D = p->i[KK__RKV_D];
    const kk_dtype dt = (kk_dtype)p->i[KK__RKV_DTYPE];
    kk_op_params rope;
    kk__rope_kv_append_rope_params(p, &rope);
    const int64_t R = kk__rope_rotary_dim(&rope), half = R / 2;
    const int gptj = p->i[KK__RKV_STYLE] == KK__ROPE_GPTJ;
    if (D > KK__ROPE_MAX_D || R > D)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope_kv_append", "D",
                             "1..1024, rotary_dim <= D", "%lld", (long long)D);
    const size_t es = kk_dtype_bytes(dt, 1), slab = (size_t)(smax * D) * es;
    int k_same, v_same;
    const size_t cache = slab * (size_t)(B * Hkv);
    st = same_buffer(t[KK__RKV_T_KC_IN], t[KK__RKV_T_KC], "k_cache", cache, &k_same);
    if (st == KK_OK)
        st = same_buffer(t[KK__RKV_T_VC_IN], t[KK__RKV_T_VC], "v_cache", cache, &v_same);
    if (st != KK_OK) return st;
    const int32_t *lens = t[KK__RKV_T_LENS]->data;
    for (int64_t b = 0; b < B; b++)
        if ((st = kk__rope_kv_append_check_len(p, b, lens[b])) != KK_OK) return st;
    int64_t *pos = malloc((size_t)(B * S) * sizeof *pos); /* token (b, s) is table row b S + s */
    if (!pos)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "rope_kv_append",
                         "no host memory for %lld positions", (long long)(B * S));
    for (int64_t k = 0; k < B * S; k++) pos[k] = lens[k / S] + k % S;
    float *table;
    st = kk__rope_cpu_table(&rope, pos, B * S, &table);
    free(pos);
    if (st != KK_OK) return st;
    const float *cs = table, *sn = table + B * S * half;
    const kk__rope_row_fn rotate_row = kk__rope_cpu_row();
    const char *kin = t[KK__RKV_T_KC_IN]->data, *vin = t[KK__RKV_T_VC_IN]->data;
    char *kc = t[KK__RKV_T_KC]->data, *vc = t[KK__RKV_T_VC]->data;
    const kk_tensor *q = t[KK__RKV_T_Q], *k = t[KK__RKV_T_K], *v = t[KK__RKV_T_V];
    const kk_tensor *qo = t[KK__RKV_T_Q_OUT];
    const int stream_q = kk_tensor_is_contiguous(qo) && kk__row_streams(dt, B * Hq * S * D);
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        if (!k_same || !v_same) { /* the barrier after it: copies land before the appends */
#pragma omp for schedule(static)
            for (int64_t c = 0; c < B * Hkv; c++) {
                if (!k_same) memcpy(kc + (size_t)c * slab, kin + (size_t)c * slab, slab);
                if (!v_same) memcpy(vc + (size_t)c * slab, vin + (size_t)c * slab, slab);
            }
        }
#pragma omp for schedule(static) nowait
        for (int64_t row = 0; row < B * Hq * S; row++) {
            const int64_t b = row / (Hq * S), h = row / S % Hq, s = row % S;
            rotate_row(row_of(q, b, h, s, es), 0, row_of(qo, b, h, s, es), 0, dt, D, R,
                       cs + (b * S + s) * half, sn + (b * S + s) * half, gptj, stream_q);
        }
#pragma omp for schedule(static) nowait
        for (int64_t row = 0; row < B * Hkv * S; row++) {
            const int64_t s = row % S, c = row / S, b = c / Hkv, h = c % Hkv, at = b * S + s;
            const int64_t to = c * smax + lens[b] + s; /* the cache row it lands on */
            rotate_row(row_of(k, b, h, s, es), 0, kc, to, dt, D, R, cs + at * half, sn + at * half,
                       gptj, 0);
            memcpy(vc + (size_t)(to * D) * es, row_of(v, b, h, s, es), (size_t)D * es);
        }
        if (stream_q) kk__row_stream_fence(); /* each thread's own streaming stores */
    }
    free(table);
    return KK_OK;
}
