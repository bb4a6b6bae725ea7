#include "kernelkit/kernelkit.h"

const char *kk_version(void) { return KK_VERSION_STRING; }
const char *kk_git_commit(void) { return KK_GIT_COMMIT; }

int kk_built_with_cuda(void) {
#ifdef KK_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}
