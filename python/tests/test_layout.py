"""The ctypes mirrors of the C structs (kernelkit/_lib.py) against the C
compiler's own sizes and offsets: a small C program including the public
headers prints sizeof and offsetof of every field. Skipped when no C compiler
or no headers are found (an installed wheel without the source tree)."""

import os
import shutil
import subprocess

import pytest

from kernelkit import _lib

STRUCTS = [
    (_lib.ErrorInfo, "kk_error_info"),
    (_lib.Tensor, "kk_tensor"),
    (_lib.AttentionOptions, "kk_attention_options"),
    (_lib.RopeOptions, "kk_rope_options"),
    (_lib.QTensor, "kk_qtensor"),
    (_lib.QuantOptions, "kk_quant_options"),
    (_lib.DeviceInfo, "kk_device_info"),
    (_lib.GpuTelemetry, "kk_gpu_telemetry"),
    (_lib.OpParam, "kk_op_param"),
    (_lib.OpParams, "kk_op_params"),
    (_lib.OpTensor, "kk_op_tensor"),
    (_lib.Tolerance, "kk_tolerance"),
    (_lib.CheckResult, "kk_check_result"),
    (_lib.Case, "kk_case"),
    (_lib.CaseOutput, "kk_case_output"),
    (_lib.CaseResult, "kk_case_result"),
    (_lib.RunOptions, "kk_run_options"),
    (_lib.BenchOptions, "kk_bench_options"),
    (_lib.BenchMeasurement, "kk_bench_measurement"),
    (_lib.BenchSwitch, "kk_bench_switch"),
    (_lib.BenchEnvironment, "kk_bench_environment"),
]
# kk_bench_spec: the Python mirror names its params pointer c_void_p; same layout.
STRUCTS.append((_lib.BenchSpec, "kk_bench_spec"))

RENAMED = {"pass_": "pass", "def_": "def"}


def _include_dirs():
    here = os.path.dirname(os.path.abspath(__file__))
    repo_inc = os.path.normpath(os.path.join(here, "..", "..", "include"))
    libdir = os.path.dirname(os.path.abspath(_lib.library_path()))
    dirs = []
    for d in (repo_inc, os.path.join(libdir, "include"), os.path.join(libdir, "..", "include")):
        if os.path.isdir(os.path.join(d, "kernelkit")):
            dirs.append(os.path.normpath(d))
    have_public = any(os.path.exists(os.path.join(d, "kernelkit", "ops.h")) for d in dirs)
    have_version = any(os.path.exists(os.path.join(d, "kernelkit", "version.h")) for d in dirs)
    return dirs if have_public and have_version else None


def test_struct_layouts(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler")
    incs = _include_dirs()
    if not incs:
        pytest.skip("the public headers (with version.h) are not found")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "kernelkit/harness.h"',
             "int main(void) {"]
    for cls, cname in STRUCTS:
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        for f in cls._fields_:
            fname = RENAMED.get(f[0], f[0])
            lines.append(f'printf("{cname}.{fname} %zu\\n", offsetof({cname}, {fname}));')
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    cmd = [cc, "-std=c11", "-o", str(exe), str(src)] + [f"-I{d}" for d in incs]
    subprocess.run(cmd, check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    c = dict(line.rsplit(" ", 1) for line in out.splitlines())
    bad = []
    for cls, cname in STRUCTS:
        if int(c[cname]) != _lib.ctypes.sizeof(cls):
            bad.append(f"sizeof({cname}) = {c[cname]}, ctypes {_lib.ctypes.sizeof(cls)}")
        for f in cls._fields_:
            fname = RENAMED.get(f[0], f[0])
            off = getattr(cls, f[0]).offset
            if int(c[f"{cname}.{fname}"]) != off:
                bad.append(f"offsetof({cname}, {fname}) = {c[cname + '.' + fname]}, ctypes {off}")
    assert not bad, "\n".join(bad)
