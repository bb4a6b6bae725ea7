/* A case and its result as one JSON object: what `kernelkit check --json`
 * writes per case. Non-finite metrics (a NaN-rule failure makes them +inf)
 * are written as the strings "inf", "-inf", "nan", which JSON has no numbers
 * for; seeds are strings because JSON readers keep numbers in doubles, which
 * lose 64-bit seeds. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "kernelkit/cases.h"

static void add_number(cJSON *obj, const char *key, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(obj, key, v);
    else
        cJSON_AddStringToObject(obj, key, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

static cJSON *output_json(const kk_case_output *o) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", o->name);
    cJSON_AddStringToObject(x, "dtype", kk_dtype_name(o->dtype));
    cJSON_AddBoolToObject(x, "pass", o->check.pass && !o->unwritten);
    add_number(x, "max_abs_err", o->check.max_abs_err);
    add_number(x, "max_rel_err", o->check.max_rel_err);
    add_number(x, "rel_l2_err", o->check.rel_l2_err);
    cJSON_AddNumberToObject(x, "bad_count", (double)o->check.bad_count);
    cJSON_AddNumberToObject(x, "nonfinite_count", (double)o->check.nonfinite_count);
    cJSON_AddNumberToObject(x, "first_bad", (double)o->check.first_bad);
    cJSON_AddNumberToObject(x, "unwritten", (double)o->unwritten);
    cJSON_AddNumberToObject(x, "first_unwritten", (double)o->first_unwritten);
    return x;
}

static void add_case(cJSON *j, const kk_case *c) {
    char params[2048], seed[32]; /* attention_varlen: lists of lengths */
    kk_op_params_format(&c->params, params, sizeof params);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    cJSON_AddStringToObject(j, "name", c->name);
    cJSON_AddStringToObject(j, "op", c->params.op->name);
    cJSON_AddStringToObject(j, "params", params);
    cJSON_AddStringToObject(j, "dtype", kk_dtype_name(kk_case_dtype(&c->params)));
    cJSON_AddStringToObject(j, "seed", seed);
    cJSON_AddStringToObject(j, "dist", kk_input_dist_name(c->dist));
}

kk_status kk_case_result_json(const kk_case *c, const kk_case_result *r, char **json) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(r);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(json);
    if (st == KK_OK) st = kk_op_params_validate(&c->params);
    if (st != KK_OK) return st;
    cJSON *j = cJSON_CreateObject();
    add_case(j, c);
    cJSON_AddStringToObject(j, "status", kk_case_status_name(r->status));
    cJSON_AddStringToObject(j, "message", r->message);
    add_number(j, "max_abs_err", r->max_abs_err);
    add_number(j, "max_rel_err", r->max_rel_err);
    add_number(j, "rel_l2_err", r->rel_l2_err);
    cJSON_AddNumberToObject(j, "kernel_runs", r->kernel_runs);
    add_number(j, "kernel_ms", r->kernel_ms);
    add_number(j, "reference_ms", r->reference_ms);
    cJSON *outs = cJSON_AddArrayToObject(j, "outputs");
    for (int k = 0; k < r->noutputs; k++) cJSON_AddItemToArray(outs, output_json(&r->outputs[k]));
    *json = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return *json ? KK_OK : kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "no memory for the JSON text");
}
