#!/usr/bin/env python3
"""Regenerate the .npy fixtures of tests/test_npy.c.

Needs numpy and ml_dtypes (pip install numpy ml_dtypes); the tests themselves
do not need Python. Run from anywhere:

    python3 tests/data/npy/make_fixtures.py

The values follow simple formulas of the flat index i = 0..5 that test_npy.c
repeats, so a change here must be mirrored there. Last generated with numpy
2.4.6 and ml_dtypes 0.6.0 (float4_e2m1fn needs ml_dtypes >= 0.5).
"""
import os

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
I = np.arange(6)


def values(code):
    """The 6 values of a (2, 3) fixture of numpy type `code` (e.g. 'i4')."""
    kind, size = code[0], int(code[1:])
    if kind == "b":
        return I % 3 == 0
    if kind == "i":
        mul = {1: 50, 2: 10007, 4: 700000001, 8: 3000000000000000001}[size]
        return (I - 2) * mul
    if kind == "u":
        mul = {1: 50, 2: 10007, 4: 700000001, 8: 3000000000000000001}[size]
        return I.astype(np.uint64) * np.uint64(mul)
    if kind == "f":
        return (I - 2) * 1.5 + 0.25
    if kind == "c":
        return ((I - 2) * 1.5) + 1j * (I * 0.25)
    raise ValueError(code)


def save(name, arr, version=None):
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=True)


def save_named(name, arr, descr):
    """Our convention for ml_dtypes arrays: the ml_dtypes name as descr."""
    arr = np.ascontiguousarray(arr)
    with open(os.path.join(HERE, name), "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": descr, "fortran_order": False, "shape": arr.shape})
        f.write(arr.tobytes())


def main():
    codes = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
    for code in codes:
        a = values(code).astype(("|" if code in ("b1", "i1", "u1") else "<") + code).reshape(2, 3)
        save("le_%s.npy" % code, a)
        if int(code[1:]) > 1:
            save("be_%s.npy" % code, a.astype(">" + code))

    f4 = values("f4").astype("<f4").reshape(2, 3)
    save("v2_f4.npy", f4, version=(2, 0))
    save("v3_f4.npy", f4, version=(3, 0))
    save("scalar_f8.npy", np.array(3.5, dtype="<f8"))
    save("empty_0x3_f4.npy", np.zeros((0, 3), dtype="<f4"))
    save("empty_2x0x4_i2.npy", np.zeros((2, 0, 4), dtype="<i2"))
    save("dims8_u1.npy", np.arange(8, dtype="|u1").reshape(1, 2, 1, 2, 1, 1, 1, 2))
    save("fortran_f4.npy", np.asfortranarray(f4))
    save("unicode_U3.npy", np.array(["ab", "cde"], dtype="<U3"))
    save("object.npy", np.array([1, "x"], dtype=object))
    save("structured.npy", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))

    # ml_dtypes. np.save loses the type: bfloat16 -> '<V2', float8_e4m3fn and
    # float4_e2m1fn -> '<V1', float8_e5m2 -> '<f1' (which np.load rejects).
    ml = {
        "bf16": (ml_dtypes.bfloat16, [1, -2, 0.5, 3, 1.5, -0.25], "bfloat16"),
        "e4m3": (ml_dtypes.float8_e4m3fn, [1, -2, 0.5, 3, 448, -0.0625], "float8_e4m3fn"),
        "e5m2": (ml_dtypes.float8_e5m2, [1, -2, 0.5, 3, 57344, -0.0625], "float8_e5m2"),
        "e2m1_unpacked": (ml_dtypes.float4_e2m1fn, [0.5, -1, 6, 0, 1.5, -6], "float4_e2m1fn"),
    }
    for tag, (dt, vals, name) in ml.items():
        a = np.array(vals, dtype=np.float32).astype(dt).reshape(2, 3)
        save("npsave_%s.npy" % tag, a)
        save_named("named_%s.npy" % tag, a, name)

    # Packed e2m1 (KernelKit's layout): uint8, two elements per byte, low
    # nibble first; logical shape (2, 6) is stored as (2, 3).
    x = np.array([[0.5, -1, 6, 0, 1.5, -6], [1, 2, 3, 4, -0.5, -3]], dtype=np.float32)
    c = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0x0F
    save("e2m1_packed.npy", (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8))


if __name__ == "__main__":
    main()
