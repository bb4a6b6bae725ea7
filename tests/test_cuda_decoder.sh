#!/usr/bin/env bash
# labels: gpu
# tests/test_decoder.c with its decoders on cuda:0: the same float64
# reference, bounds and cache checks on a GPU. KK_TF32=0: f32 GEMMs on CUDA
# follow hardware.nvidia.tf32_allowed (exact FMA when off), and the f32 bound
# (1e-5) is for f32 arithmetic. Skipped (77) without a usable GPU.
set -uo pipefail
KK_TF32=0 KK_TEST_DEVICE=cuda:0 exec "$3/tests/test_decoder"
