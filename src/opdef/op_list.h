/* The op table: one line per op, in listing order. Each op's row is
 * kk__op_<name>, defined in src/opdef/<name>.c; its CPU kernel is
 * kk__<name>_cpu (src/cpu/<name>_cpu.c), since every op has one. Included
 * with KK_OP(name) defined. */
KK_OP(gemm)
KK_OP(linear)
KK_OP(attention)
KK_OP(nvfp4_gemv)
KK_OP(convert)
KK_OP(fp8_gemm)
KK_OP(rmsnorm)
KK_OP(softmax)
KK_OP(layernorm)
KK_OP(rope)
KK_OP(nvfp4_gemm)
KK_OP(attention_varlen)
KK_OP(add_rmsnorm)
KK_OP(rmsnorm_fp8)
KK_OP(silu_mul)
KK_OP(rope_kv_append)
KK_OP(attention_backward)
KK_OP(fp8_linear)
KK_OP(attention_varlen_backward)
