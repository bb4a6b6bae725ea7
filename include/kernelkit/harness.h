/* The harness API: what proves KernelKit's kernels correct and fast, apart
 * from the library a user calls (kernelkit/kernelkit.h). The kernelkit CLI is
 * built on it; so can a CI job or another benchmark driver be.
 *   check.h        the checker: outputs against float64 references
 *   cases.h  cases, suites, fuzzing, running a case
 *   bench.h        the benchmark sampler and results
 *   stats.h        benchmark statistics
 *   compare.h      the regression gate
 *   report.h       markdown and HTML reports
 *   calibrate.h    the device's measured ceilings
 *   model_cost.h   the decoder's cost model and per-step profile */
#ifndef KERNELKIT_HARNESS_H
#define KERNELKIT_HARNESS_H

#include "kernelkit/kernelkit.h"

#include "kernelkit/bench.h"
#include "kernelkit/calibrate.h"
#include "kernelkit/check.h"
#include "kernelkit/compare.h"
#include "kernelkit/model_cost.h"
#include "kernelkit/cases.h"
#include "kernelkit/report.h"
#include "kernelkit/stats.h"

#endif
