/* The decoder's profiling pass: a call over the caller's hidden states in
 * which the executor (decoder_run.c) hands each step of layer 0, before it
 * runs, to the benchmark sampler; the medians are the measured side of the
 * cost model (cost_model.c). The call's output is discarded and the cache
 * length restored, so a profile can precede the real call it describes. */
#include <string.h>

#include "core/error.h"
#include "kernelkit/model_cost.h"
#include "kernelkit/op.h"
#include "model/decoder_internal.h"

struct kk__dprofile {
    kk_decoder_cost *cost;
    kk_bench_options opt;
};

void kk_decoder_profile_options(kk_bench_options *o, double budget_s) {
    if (!o) return;
    kk_bench_options_default(o);
    o->rse_target = 0.01;
    o->min_samples = 5;
    o->max_samples = 1000;
    o->min_time_s = 0.01;
    o->time_budget_s = budget_s > 0 ? budget_s : 0.5;
    o->warmup_runs = 2;
    o->warmup_time_s = 0.005;
    o->batch = 1;           /* as the executor issues it: no graph */
    o->blocking_kernel = 0; /* launch included; a step that falls back to the CPU is timed too */
    o->cold = -1;           /* GPU: flushed (weights from memory); CPU: warm */
    /* keep samples taken at a lowered SM clock: a decoder at full load runs at
     * the clock its power cap allows (an H100 at B=16 S=2048 had every sample of
     * a step under the 75% default), and that is the time it takes */
    o->throttle_fraction = 0;
}

kk_status kk__dprofile_step(struct kk__dprofile *p, const kk_decoder *d, int i, int64_t B,
                            int64_t S, int64_t L, kk_bench_fn fn, void *fn_ctx) {
    (void)B, (void)S, (void)L;
    if (i >= p->cost->nsteps || p->cost->steps[i].calls == 0) return KK_OK; /* nothing runs */
    kk_step_cost *s = &p->cost->steps[i];
    /* the steps before ran on the default stream; the sampler's stream is not
     * ordered after it: wait, so this step neither overlaps them nor reads
     * what they have not written yet */
    kk_status st = kk_op_synchronize(d->device, NULL);
    if (!st) st = kk_bench_measure(d->device, fn, fn_ctx, &p->opt, &s->m);
    if (st) return st;
    kk_stats_summary sum;
    st = kk_stats_summarize(s->m.samples, s->m.n, KK_STATS_DEFAULT_SEED, KK_STATS_MIN_RESAMPLES,
                            &sum);
    if (!st) s->measured_s = sum.median;
    return st;
}

kk_status kk_decoder_profile(kk_decoder *d, const kk_tensor *hidden_in,
                             const kk_bench_ceilings *ceilings, double launch_floor_s,
                             const kk_bench_options *opt, kk_decoder_cost *out) {
    kk_status st = KK__CHECK_NOT_NULL(d);
    if (!st) st = KK__CHECK_NOT_NULL(hidden_in);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    if (hidden_in->ndim != 3)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "hidden_in", "[B,S,hidden]",
                             "a tensor of %d dims", hidden_in->ndim);
    if ((st = kk_decoder_predict(d, hidden_in->shape[0], hidden_in->shape[1], d->length, ceilings,
                                 launch_floor_s, out)))
        return st;
    struct kk__dprofile p = {.cost = out};
    if (opt)
        p.opt = *opt;
    else
        kk_decoder_profile_options(&p.opt, 0);
    kk_tensor *scratch = NULL;
    st = kk_tensor_create(d->device, hidden_in->dtype, 3, hidden_in->shape, &scratch);
    const int64_t length = d->length, batch = d->batch;
    if (!st) {
        d->profile = &p;
        st = kk__decoder_run(__func__, d, hidden_in, scratch);
        d->profile = NULL;
        d->length = length, d->batch = batch; /* the rows written stay unread */
    }
    kk_tensor_destroy(scratch);
    if (st) {
        kk_decoder_cost_free(out);
        return st;
    }
    out->measured_s = 0;
    for (int i = 0; i < out->nsteps; i++)
        if (out->steps[i].measured_s > 0)
            out->measured_s += out->steps[i].measured_s * (double)out->layers;
    return KK_OK;
}

/* The floor's work: one row of 32 normalized. */
typedef struct floor_job {
    kk_tensor *x, *w, *y;
} floor_job;

static kk_status floor_run(void *ctx, kk_stream stream) {
    floor_job *j = ctx;
    return kk_rmsnorm(j->x, j->w, j->y, 1e-6, stream);
}

kk_status kk_decoder_launch_floor(const kk_decoder *d, const kk_bench_options *opt,
                                  double *seconds) {
    kk_status st = KK__CHECK_NOT_NULL(d);
    if (!st) st = KK__CHECK_NOT_NULL(seconds);
    if (st) return st;
    *seconds = 0;
    kk_bench_options o;
    if (opt)
        o = *opt;
    else
        kk_decoder_profile_options(&o, 0);
    floor_job j = {0};
    const int64_t row[2] = {1, 32};
    kk_tensor *hw = NULL;
    st = kk_tensor_create(d->device, d->dtype, 2, row, &j.x);
    if (!st) st = kk_tensor_create(d->device, d->dtype, 2, row, &j.y);
    if (!st) st = kk_tensor_create(d->device, d->dtype, 1, row + 1, &j.w);
    if (!st) st = kk_tensor_create("cpu", d->dtype, 2, row, &hw);
    if (!st) memset(hw->data, 0, kk_tensor_nbytes(hw)); /* zeros: a valid row in every dtype */
    if (!st) st = kk_tensor_copy(j.x, hw);
    kk_tensor *hw1 = NULL;
    if (!st) st = kk_tensor_slice(hw, 0, 0, 1, 1, &hw1);
    kk_tensor *w1 = NULL;
    if (!st) st = kk_tensor_reshape(hw1, 1, row + 1, &w1);
    if (!st) st = kk_tensor_copy(j.w, w1);
    kk_bench_measurement m;
    memset(&m, 0, sizeof m);
    if (!st) st = kk_bench_measure(d->device, floor_run, &j, &o, &m);
    kk_stats_summary sum;
    if (!st)
        st =
            kk_stats_summarize(m.samples, m.n, KK_STATS_DEFAULT_SEED, KK_STATS_MIN_RESAMPLES, &sum);
    if (!st) *seconds = sum.median;
    kk_bench_measurement_free(&m);
    kk_tensor_destroy(w1), kk_tensor_destroy(hw1), kk_tensor_destroy(hw);
    kk_tensor_destroy(j.x), kk_tensor_destroy(j.y), kk_tensor_destroy(j.w);
    return st;
}

void kk_decoder_cost_free(kk_decoder_cost *c) {
    if (!c) return;
    for (int i = 0; i < KK_DECODER_MAX_STEPS; i++) kk_bench_measurement_free(&c->steps[i].m);
    memset(c, 0, sizeof *c);
}
