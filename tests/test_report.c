/* labels: unit cpu */
/* kernelkit report's library part (include/kernelkit/report.h), on the
 * fixture results files of tests/data/results (data/results/fixtures.h):
 * the anchor convention, the markdown's executive summary and per-op tables
 * (ceilings, shares, ratios to anchors), the HTML page's structure (balanced
 * tags, the SVG charts and their roofs, no script or external resource), and
 * the escaping of names made of HTML and markdown syntax. Rendering itself was
 * checked by eye in headless Chromium; these tests keep the structure. */
#include "testutil.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/results/fixtures.h"
#include "kernelkit/bench.h"
#include "kernelkit/report.h"

#define FIXTURE(name) KK_TEST_DATA_DIR "/results/" name

static kk_bench_results *read_doc(const char *path) {
    kk_bench_results *r = NULL;
    kk_assert_ok(kk_bench_results_read_file(path, &r));
    return r;
}

static size_t count(const char *text, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Every tag opened is closed, in order; <x/> and <!...> stand alone. Returns
 * NULL or what went wrong. Attribute values hold no '>' (they are escaped). */
static const char *check_balanced(const char *html) {
    static char why[256];
    char stack[256][24];
    int depth = 0;
    for (const char *p = strchr(html, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        if (!end) return "a '<' without '>'";
        if (p[1] == '!') continue;
        int closing = p[1] == '/';
        const char *name = p + 1 + closing;
        size_t len = 0;
        while (isalnum((unsigned char)name[len])) len++;
        if (len == 0 || len >= sizeof stack[0]) return "a '<' that starts no tag (unescaped text?)";
        if (!closing && end[-1] == '/') continue;
        if (!closing) {
            if (depth == 256) return "nested too deep";
            memcpy(stack[depth], name, len);
            stack[depth++][len] = 0;
            continue;
        }
        if (depth == 0 || strlen(stack[depth - 1]) != len || strncmp(stack[depth - 1], name, len)) {
            snprintf(why, sizeof why, "</%.*s> closes <%s>", (int)len, name,
                     depth ? stack[depth - 1] : "(nothing)");
            return why;
        }
        depth--;
    }
    if (depth) {
        snprintf(why, sizeof why, "<%s> never closed", stack[depth - 1]);
        return why;
    }
    return NULL;
}

static void anchor_convention(void **state) {
    (void)state;
    kk_bench_entry e;
    char impl[64];
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "gemm/M=64");
    assert_int_equal(kk_bench_entry_anchor(&e, impl, sizeof impl), 0);
    assert_string_equal(impl, "kernelkit");
    snprintf(e.name, sizeof e.name, "anchor/cublas/gemm/M=64");
    assert_int_equal(kk_bench_entry_anchor(&e, impl, sizeof impl), 1);
    assert_string_equal(impl, "cublas");
    snprintf(e.name, sizeof e.name, "anchor/");
    assert_int_equal(kk_bench_entry_anchor(&e, impl, sizeof impl), 1);
    assert_string_equal(impl, "anchor");
    /* the parameter wins over the name, both ways */
    e.nparams = 1;
    snprintf(e.params[0].name, sizeof e.params[0].name, "implementation");
    e.params[0].kind = KK_BENCH_PARAM_STRING;
    snprintf(e.params[0].string, sizeof e.params[0].string, "kernelkit");
    assert_int_equal(kk_bench_entry_anchor(&e, impl, sizeof impl), 0);
    snprintf(e.name, sizeof e.name, "attention/S=512");
    snprintf(e.params[0].string, sizeof e.params[0].string, "torch_sdpa_flash");
    assert_int_equal(kk_bench_entry_anchor(&e, impl, 6), 1);
    assert_string_equal(impl, "torch"); /* truncated to the buffer */
    assert_int_equal(kk_bench_entry_anchor(&e, NULL, 0), 1);
    assert_int_equal(kk_bench_entry_anchor(NULL, impl, sizeof impl), 0);
}

static void markdown_summary_tables_anchors(void **state) {
    (void)state;
    kk_bench_results *docs[2] = {read_doc(FIXTURE("base.json")),
                                 read_doc(FIXTURE("base_h100.json"))};
    const char *labels[2] = {"base.json", "h100.json"};
    kk_bench_report_options o = {.title = "Nightly | H200", .labels = labels};
    char *md = NULL;
    kk_assert_ok(kk_bench_report_markdown((const kk_bench_results *const *)docs, 2, &o, &md));
    kk_assert_contains(md, "# Nightly \\| H200\n");
    kk_assert_contains(md, "## Executive summary");
    /* one row per file: device, backend, driver, CUDA, 8 benchmarks, 5 anchors */
    kk_assert_contains(md,
                       "| `base.json` | **NVIDIA H200** | cuda:0 | 580.159.04 | 13.0 | 8 | 5 |");
    kk_assert_contains(md, "| `h100.json` | **NVIDIA H100 80GB HBM3** | cuda:0 | 570.86.15 |");
    kk_assert_contains(md, "(8) |");
    kk_assert_contains(md, "bf16 801 TFLOP/s, fp8 1317 TFLOP/s, fp32 60.0 TFLOP/s, copy 4100 GB/s");
    kk_assert_contains(md, "## `base.json`: NVIDIA H200 (cuda:0)");
    kk_assert_contains(md, "### `gemm`");
    kk_assert_contains(md, "### `attention`");
    kk_assert_contains(md, "| benchmark | params | dtype | median | 95% CI | TFLOP/s | GB/s | "
                           "share of ceilings | vs anchors | n |");
    /* gemm 4096 runs at 700 of 801 TFLOP/s; cuBLAS's anchor at 760 */
    kk_assert_contains(md,
                       "| `" FX_FASTER "` | `M=4096 N=4096 K=4096` | bf16 | 196.5 \xc2\xb5s | ");
    kk_assert_contains(md,
                       "| 699 | 512 | 87.3% bf16, 11.9% read | 0.921\xc3\x97 vs `cublas` | 50 |");
    /* attention S=2048 at 450 TFLOP/s: flash 340, cuDNN 628 */
    kk_assert_contains(md,
                       "1.32\xc3\x97 vs `torch_sdpa_flash`, 0.716\xc3\x97 vs `torch_sdpa_cudnn`");
    kk_assert_contains(md, "| anchor `torch_sdpa_flash` |");
    kk_assert_contains(md, "| anchor `cublas` |"); /* found by its name alone */
    /* the implementation parameter is not shown among the params */
    assert_int_equal(count(md, "implementation="), 0);
    /* anchors match within a device: each file's rows name one flash ratio, not two */
    assert_int_equal(count(md, "1.32\xc3\x97 vs `torch_sdpa_flash`"), 2);
    free(md);
    kk_bench_results_free(docs[0]);
    kk_bench_results_free(docs[1]);
}

/* Anchors flushed otherwise than the KernelKit entry are still paired, and
 * say so; every document says how its samples were flushed. */
static void flush_modes_are_shown(void **state) {
    (void)state;
    kk_bench_results *doc = read_doc(FIXTURE("base.json"));
    char *md = NULL;
    kk_assert_ok(kk_bench_report_markdown((const kk_bench_results *const *)&doc, 1, NULL, &md));
    kk_assert_contains(md, "- samples: 13 cold (L2 flush: 13 write, 0 read), 0 hot");
    assert_int_equal(count(md, "L2 flush write vs read"), 0);
    free(md);
    for (size_t i = 0; i < doc->count; i++)
        if (kk_bench_entry_anchor(&doc->entries[i], NULL, 0))
            doc->entries[i].m.flush_mode = KK_BENCH_FLUSH_READ;
    kk_assert_ok(kk_bench_report_markdown((const kk_bench_results *const *)&doc, 1, NULL, &md));
    kk_assert_contains(md, "- samples: 13 cold (L2 flush: 8 write, 5 read), 0 hot");
    kk_assert_contains(md, "0.921\xc3\x97 vs `cublas` (L2 flush write vs read)");
    free(md);
    char *html = NULL;
    kk_assert_ok(kk_bench_report_html((const kk_bench_results *const *)&doc, 1, NULL, &html));
    kk_assert_contains(html, "13 cold (L2 flush: 8 write, 5 read), 0 hot");
    kk_assert_contains(html, "vs <code>cublas</code> (L2 flush write vs read)");
    free(html);
    kk_bench_results_free(doc);
}

static void html_structure(void **state) {
    (void)state;
    kk_bench_results *doc = read_doc(FIXTURE("base.json"));
    const kk_bench_results *docs[1] = {doc};
    char *html = NULL;
    kk_assert_ok(kk_bench_report_html(docs, 1, NULL, &html));
    assert_int_equal(strncmp(html, "<!DOCTYPE html>\n<html", 21), 0);
    assert_non_null(check_balanced("<p><b>x</p></b>")); /* the checker can fail */
    assert_non_null(check_balanced("<p>a < b</p>"));
    assert_null(check_balanced("<p><br/>x</p>"));
    const char *why = check_balanced(html);
    if (why) fail_msg("unbalanced HTML: %s", why);
    /* self-contained: no script, no external resource */
    assert_int_equal(count(html, "<script"), 0);
    assert_int_equal(count(html, "src="), 0);
    assert_int_equal(count(html, "href=\"http"), 0);
    assert_int_equal(count(html, "<link"), 0);
    /* one roofline and one throughput chart per op (gemm attention linear nvfp4_gemv) */
    assert_int_equal(count(html, "<svg "), 5);
    assert_int_equal(count(html, "</svg>"), 5);
    kk_assert_contains(html, "Roofline: NVIDIA H200</title>");
    kk_assert_contains(html, "gemm: throughput against work per run");
    kk_assert_contains(html, "arithmetic intensity (FLOP per byte, log scale)");
    /* the roofs: the read and copy slopes and three compute flats */
    kk_assert_contains(html, ">read 4300 GB/s</text>");
    kk_assert_contains(html, ">copy 4100 GB/s</text>");
    kk_assert_contains(html, ">bf16 801 TFLOP/s</text>");
    kk_assert_contains(html, ">fp8 1317 TFLOP/s</text>");
    kk_assert_contains(html, ">fp32 60.0 TFLOP/s</text>");
    assert_int_equal(count(html, "class=\"roof\""), 4);
    /* every benchmark is a point in the roofline and in its op's chart, each with a tooltip */
    assert_int_equal(count(html, "<g class=\"pt\">"), 2 * (int)doc->count);
    kk_assert_contains(html, "<title>" FX_FASTER
                             " (kernelkit bf16)\nmedian 196.5 \xc2\xb5s, 699 TFLOP/s");
    assert_true(count(html, "<polyline") >= 3); /* KernelKit gemm, attention, the flash anchor */
    kk_assert_contains(html, "<td class=\"num\">699</td>");
    kk_assert_contains(html, "<b>0.921\xc3\x97</b> vs <code>cublas</code>");
    kk_assert_contains(html, "<tr class=\"anchor\">");
    free(html);
    kk_bench_results_free(doc);
}

static void hostile_names_are_escaped(void **state) {
    (void)state;
    kk_bench_results *doc = read_doc(FIXTURE("hostile.json"));
    const kk_bench_results *docs[1] = {doc};
    const char *labels[1] = {"<b>file</b>.json"};
    kk_bench_report_options o = {.title = "<script>t</script>", .labels = labels};
    char *html = NULL, *md = NULL;
    kk_assert_ok(kk_bench_report_html(docs, 1, &o, &html));
    const char *why = check_balanced(html);
    if (why) fail_msg("unbalanced HTML: %s", why);
    assert_int_equal(count(html, "<script"), 0);
    assert_int_equal(count(html, "<img"), 0);
    assert_int_equal(count(html, "<i>"), 0);
    assert_int_equal(count(html, "<evil>"), 0);
    kk_assert_contains(html, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;|`pipe`");
    kk_assert_contains(html, "&lt;img src=x onerror=alert(1)&gt; &quot;GPU&quot; &amp; co");
    kk_assert_contains(html, "act=&lt;/code&gt;&lt;script&gt;");
    kk_assert_contains(html, "vs <code>&lt;evil&gt;&amp;amp;</code>"); /* anchor by name */
    kk_assert_contains(html, "&lt;b&gt;file&lt;/b&gt;.json");
    kk_assert_contains(html, "no ceilings in this results file");
    kk_assert_ok(kk_bench_report_markdown(docs, 1, &o, &md));
    /* markdown: names in code spans (| escaped, ` replaced), other text backslash-escaped */
    kk_assert_contains(md, "| `<script>alert(\"x\")</script>\\|'pipe'` |");
    kk_assert_contains(md, "\\<img src=x onerror=alert(1)\\> \"GPU\" \\& co");
    kk_assert_contains(md, "# \\<script\\>t\\</script\\>");
    kk_assert_contains(md, "none (run kernelkit calibrate)");
    /* no line gains a cell: every table row of the op table has 10 cells */
    const char *row = strstr(md, "| `<script>");
    assert_non_null(row);
    size_t bars = 0;
    for (const char *p = row; *p && *p != '\n'; p++)
        if (*p == '|' && (p == row || p[-1] != '\\')) bars++;
    assert_int_equal(bars, 11);
    free(html);
    free(md);
    kk_bench_results_free(doc);
}

static void bad_arguments(void **state) {
    (void)state;
    kk_bench_results *doc = read_doc(FIXTURE("base.json"));
    const kk_bench_results *docs[2] = {doc, NULL};
    char *text = NULL;
    kk_assert_status(kk_bench_report_markdown(docs, 0, NULL, &text), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_report_html(NULL, 1, NULL, &text), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_report_html(docs, 2, NULL, &text), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "docs[1]");
    kk_assert_status(kk_bench_report_markdown(docs, 1, NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    assert_null(text);
    /* a document with no benchmarks still makes a report */
    kk_bench_results *empty = NULL;
    kk_assert_ok(kk_bench_results_create(&doc->env, &empty));
    const kk_bench_results *one[1] = {empty};
    kk_assert_ok(kk_bench_report_html(one, 1, NULL, &text));
    kk_assert_contains(text, "No benchmarks.");
    assert_null(check_balanced(text));
    free(text);
    kk_bench_results_free(empty);
    kk_bench_results_free(doc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anchor_convention),
        cmocka_unit_test(markdown_summary_tables_anchors),
        cmocka_unit_test(flush_modes_are_shown),
        cmocka_unit_test(html_structure),
        cmocka_unit_test(hostile_names_are_escaped),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
