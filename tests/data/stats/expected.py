#!/usr/bin/env python3
"""Expected values hard-coded in tests/test_stats.c (the test itself needs no Python).

Produced with numpy 2.4.6 and scipy 1.17.1:
    python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy scipy
    /tmp/v/bin/python tests/data/stats/expected.py
Every number is printed with repr() so that it round-trips exactly."""
import numpy as np
import scipy.stats as st
from scipy.stats import binom

r = lambda v: repr(float(v))

# ---- one sample: summary statistics ----
D1 = [12.1, 11.8, 12.5, 13.0, 11.9, 12.2, 12.2, 14.1, 12.0, 11.7]  # even n, one tie
D2 = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3]                           # odd n
for name, d in [("D1", D1), ("D2", D2)]:
    a = np.array(d)
    print(name)
    print("  min", r(a.min()), "max", r(a.max()))
    print("  mean", r(np.mean(a)), "stdev", r(np.std(a, ddof=1)),
          "cv", r(np.std(a, ddof=1) / np.mean(a)))
    print("  median", r(np.median(a)),
          "p95", r(np.percentile(a, 95, method="linear")),
          "p99", r(np.percentile(a, 99, method="linear")))
    print("  mad", r(st.median_abs_deviation(a)))  # scale=1.0: unscaled
    for q in [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]:
        print("  quantile", q, r(np.quantile(np.sort(a), q, method="linear")))

# ---- one sample: the exact bootstrap distribution of the median (odd n) ----
# With n odd and k = (n-1)/2, a resample's median is <= the j-th smallest value
# (0-based) iff at least k+1 of its n draws are among the j+1 smallest values:
# P = P(Binomial(n, (j+1)/n) >= k+1). The bootstrap estimates this distribution
# by Monte Carlo; its exact standard deviation and percentiles are known here.
# n = 11 puts the steps of this distribution far (0.018) from 0.025 and 0.975, so the
# percentile interval of a 10,000-resample bootstrap lands on the exact points.
D5 = [50.01, 51.52, 48.65, 45.74, 47.78, 45.28, 50.3, 57.17, 47.6, 46.99, 52.51]
s = np.sort(D5)
n = len(s)
k = (n - 1) // 2
cdf = np.array([binom.sf(k, n, (j + 1) / n) for j in range(n)])  # P(median* <= s[j])
pmf = np.diff(np.concatenate([[0.0], cdf]))
mean = np.sum(pmf * s)
sd = np.sqrt(np.sum(pmf * (s - mean) ** 2))
print("D5 exact bootstrap of the median")
print("  median", r(np.median(s)), "sd", r(sd), "rse", r(sd / np.median(s)))
print("  cdf", [round(float(c), 4) for c in cdf])
lo = next(j for j in range(n) if cdf[j] > 0.025)
hi = next(j for j in range(n) if cdf[j] > 0.975)
print("  2.5%% point s[%d] = %s, 97.5%% point s[%d] = %s" % (lo, r(s[lo]), hi, r(s[hi])))

# ---- two samples: Mann-Whitney U (two-sided) and Cliff's delta ----
def mwu(name, x, y, methods):
    print(name)
    for m in methods:
        res = st.mannwhitneyu(x, y, alternative="two-sided", method=m, use_continuity=True)
        print("  ", m, "U", r(res.statistic), "p", r(res.pvalue))
    x, y = np.asarray(x), np.asarray(y)
    print("   cliffs_delta", r(np.mean(np.sign(x[:, None] - y[None, :]))))

# M1: the example of scipy's documentation (Shier 2004): U = 17, exact p = 1/9.
mwu("M1", [19, 22, 16, 29, 24], [20, 11, 17, 12], ["exact", "asymptotic"])
mwu("M2", [1.1, 2.3, 3.5, 4.2, 5.9], [2.0, 6.1, 7.3, 8.4, 9.0, 10.5], ["exact", "asymptotic"])
# M3: rounded values (many ties), as a coarse GPU timer gives: asymptotic only.
M3_X = [95.0, 100.0, 102.0, 100.0, 103.0, 109.0, 96.0, 103.0, 95.0, 101.0, 98.0, 104.0, 97.0,
        102.0, 96.0, 94.0, 101.0, 105.0, 102.0, 97.0, 101.0, 102.0, 104.0, 97.0, 102.0]
M3_Y = [103.0, 102.0, 102.0, 100.0, 100.0, 106.0, 103.0, 101.0, 95.0, 99.0, 100.0, 98.0, 98.0,
        104.0, 101.0, 97.0, 98.0, 101.0, 105.0, 97.0, 107.0, 101.0, 97.0, 104.0, 106.0]
mwu("M3", M3_X, M3_Y, ["asymptotic"])
# M4: 30 x 40 distinct values: exact (1200 pairs) and asymptotic.
M4_X = [9.778, 10.649, 9.682, 9.989, 11.665, 10.896, 8.797, 12.8, 8.979, 10.848, 10.498, 9.916,
        10.202, 9.836, 10.837, 9.288, 8.826, 10.475, 11.737, 9.863, 11.703, 9.912, 11.557, 10.963,
        10.523, 10.937, 9.163, 10.098, 8.429, 8.22]
M4_Y = [11.519, 10.451, 11.606, 10.731, 9.827, 13.494, 11.977, 10.771, 10.622, 12.253, 10.278,
        12.125, 11.255, 9.278, 11.343, 11.717, 11.146, 11.564, 11.975, 10.109, 12.854, 10.762,
        11.434, 9.02, 11.611, 11.322, 10.016, 11.283, 11.105, 11.601, 11.316, 10.046, 10.655,
        8.901, 10.621, 10.084, 11.669, 11.943, 11.241, 8.748]
mwu("M4", M4_X, M4_Y, ["exact", "asymptotic"])
# all values equal: no evidence either way
mwu("M5", [1.0, 1.0, 1.0], [1.0, 1.0], ["asymptotic"])

# ---- kk_stats_compare(base=M4_X, cand=M4_Y): U and delta are those of (cand, base) ----
res = st.mannwhitneyu(M4_Y, M4_X, alternative="two-sided", method="exact")
print("compare M4: ratio", r(np.median(M4_Y) / np.median(M4_X)),
      "median_base", r(np.median(M4_X)), "median_cand", r(np.median(M4_Y)),
      "U", r(res.statistic), "p", r(res.pvalue))

# ---- the generator: splitmix64 seeding of xoshiro256** (reference C code by
# Blackman and Vigna, transcribed), to pin the bootstrap's random stream ----
M = (1 << 64) - 1
def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return state, z ^ (z >> 31)
def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M
def xoshiro(seed, count):
    s, st_ = [], seed
    for _ in range(4):
        st_, v = splitmix64(st_)
        s.append(v)
    out = []
    for _ in range(count):
        out.append(rotl((s[1] * 5) & M, 7) * 9 & M)
        t = (s[1] << 17) & M
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out
for seed in (0, 12345):
    print("xoshiro256** seed", seed, [hex(v) for v in xoshiro(seed, 3)])
