/* Internal: the suite directories, shared by suite_locate.c and case_suite.c. */
#ifndef KK_HARNESS_SUITE_INTERNAL_H
#define KK_HARNESS_SUITE_INTERNAL_H

/* Called with each suite directory in search order; non-zero stops. */
typedef int (*kk__suite_dir_fn)(const char *dir, void *ctx);
void kk__suite_each_dir(kk__suite_dir_fn fn, void *ctx);

/* Non-zero when kk_suite_locate takes the text as a path, not a name. */
int kk__suite_is_path(const char *name_or_path);

#endif
