/* Small pieces of the runner's API: names, the tally
 * of a run and the exit status `kernelkit check` derives from it. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/cases.h"

const char *kk_case_status_name(kk_case_status status) {
    static const char *const names[] = {"PASS", "FAIL", "ERROR", "SKIP"};
    return (int)status >= 0 && status <= KK_CASE_SKIP ? names[status] : "?";
}

void kk_check_tally_add(kk_check_tally *t, kk_case_status status) {
    if (!t) return;
    if (status == KK_CASE_PASS)
        t->passed++;
    else if (status == KK_CASE_SKIP)
        t->skipped++;
    else
        t->failed++;
}

int kk_check_tally_exit_code(const kk_check_tally *t) {
    if (!t) return 2;
    if (t->failed > 0) return 1;
    return t->passed > 0 ? 0 : 2;
}
