// rope's inverse frequencies on the device, shared by rope.cu and
// rope_kv_append.cu: kk__rope_inv_freq (src/opdef/rope.c) term for term in
// f64, pow and then HF's llama3 bands. Every operation but pow is correctly
// rounded on both sides; CUDA's f64 pow may differ from the host libm's in
// the last ulp, which rounding cos/sin to f32 almost always hides.
#ifndef KK_CUDA_KERNELS_ROPE_FREQ_CUH
#define KK_CUDA_KERNELS_ROPE_FREQ_CUH

#include <stdint.h>

namespace kk_rope {

// theta and rotary dim R; llama3 with factor, low, high and the old context.
struct Freq {
    double theta, factor, low, high, old;
    int64_t R;
    int llama3;
};

__device__ __forceinline__ double inv_freq(const Freq &f, int i) {
    double v = pow(f.theta, -2.0 * (double)i / (double)f.R);
    if (f.llama3) {
        const double wavelen = 2.0 * 3.14159265358979323846 / v;
        if (wavelen > f.old / f.low) {
            v /= f.factor;
        } else if (!(wavelen < f.old / f.high)) {
            const double smooth = (f.old / wavelen - f.low) / (f.high - f.low);
            v = (1.0 - smooth) * v / f.factor + smooth * v;
        }
    }
    return v;
}

} // namespace kk_rope

#endif
