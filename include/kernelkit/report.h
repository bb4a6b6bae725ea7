/* Reports from benchmark results documents: the text behind `kernelkit report`.
 *
 *   const kk_bench_results *docs[2] = {h200, h100};   // kk_bench_results_read_file
 *   const char *labels[2] = {"h200.json", "h100.json"};
 *   kk_bench_report_options o = {.title = NULL, .labels = labels};
 *   char *md, *html;
 *   kk_bench_report_markdown(docs, 2, &o, &md);
 *   kk_bench_report_html(docs, 2, &o, &html);        // free() both
 *
 * The markdown has an executive summary (one row per document: device,
 * driver, CUDA, benchmarks, geometric-mean throughput, speedup over anchors,
 * ceilings) and, per document and op, a table of every benchmark: parameters,
 * median, 95% CI, TFLOP/s, GB/s, share of the ceilings, ratio to anchors.
 * The HTML page holds the same tables and SVG charts (throughput against work
 * per op, and a roofline per document); it is self-contained (no script, no
 * external style sheet or font) and every string from a document is escaped.
 *
 * Anchors (reference implementations measured for comparison, e.g. PyTorch's
 * SDPA) follow the convention of kk_bench_entry_anchor below, documented in
 * docs/harness.md ("kernelkit report"). Nothing here prints. */
#ifndef KERNELKIT_REPORT_H
#define KERNELKIT_REPORT_H

#include <stddef.h>

#include "kernelkit/bench.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The parameter that names an entry's implementation, and its value for
 * KernelKit's own kernels. */
#define KK_BENCH_IMPL_PARAM "implementation"
#define KK_BENCH_IMPL_SELF "kernelkit"
/* Name prefix that marks an anchor: "anchor/<implementation>/<anything>". */
#define KK_BENCH_ANCHOR_PREFIX "anchor/"

/* 1 when `e` is an anchor, filling `impl` (may be NULL) with its
 * implementation; 0 for KernelKit's own entries (impl = "kernelkit").
 * An entry is an anchor when its string parameter "implementation" is present
 * and not "kernelkit", or else when its name starts with "anchor/"; the
 * implementation is then the parameter's value, or the name's second
 * component ("anchor/torch_sdpa_flash/..." -> "torch_sdpa_flash").
 * An anchor is compared with the KernelKit entries of the same op, dtype and
 * parameters ("implementation" aside), measured on a device of the same name. */
KK_API int kk_bench_entry_anchor(const kk_bench_entry *e, char *impl, size_t size);

typedef struct kk_bench_report_options {
    const char *title;         /* NULL: "KernelKit benchmark report" */
    const char *const *labels; /* one per document (file names), or NULL */
} kk_bench_report_options;

/* opt may be NULL. ndocs >= 1; every docs[i] non-NULL. The text is
 * malloc'd; release with free(). Errors: KK_ERR_INVALID_ARGUMENT,
 * KK_ERR_OUT_OF_MEMORY. */
KK_API kk_status kk_bench_report_markdown(const kk_bench_results *const *docs, size_t ndocs,
                                          const kk_bench_report_options *opt, char **text);
KK_API kk_status kk_bench_report_html(const kk_bench_results *const *docs, size_t ndocs,
                                      const kk_bench_report_options *opt, char **text);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_REPORT_H */
