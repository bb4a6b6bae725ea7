/* Internal: every op's header, for code that reads several ops' parameter
 * indices (the tests). */
#ifndef KK_OPDEF_ALL_OPS_H
#define KK_OPDEF_ALL_OPS_H

#include "opdef/add_rmsnorm.h"
#include "opdef/attention.h"
#include "opdef/attention_backward.h"
#include "opdef/attention_varlen.h"
#include "opdef/attention_varlen_backward.h"
#include "opdef/convert.h"
#include "opdef/fp8_gemm.h"
#include "opdef/fp8_linear.h"
#include "opdef/gemm.h"
#include "opdef/layernorm.h"
#include "opdef/linear.h"
#include "opdef/nvfp4_gemm.h"
#include "opdef/nvfp4_gemv.h"
#include "opdef/rmsnorm.h"
#include "opdef/rmsnorm_fp8.h"
#include "opdef/rope.h"
#include "opdef/rope_kv_append.h"
#include "opdef/silu_mul.h"
#include "opdef/softmax.h"

#endif
