"""Fortran symbols in function profiles.  gfortran names a module procedure's symbol
``__<module>_MOD_<procedure>`` (CloverLeaf's PdV kernel: ``__pdv_kernel_module_MOD_pdv_kernel``,
``nm clover_leaf``); valgrind and perf demangle C++ and Rust, not Fortran, so `kernels` and `view`
listed CloverLeaf's kernels by their symbols.  They now read ``module::procedure``, the name the
source gives (and gdb shows).  Truth: the mangling rule and the counts written into the file."""

from pathlib import Path

import perfcast
from perfcast.io import perf as perf_io

CG = """events: Ir
fl=pdv_kernel.f90
fn=__pdv_kernel_module_MOD_pdv_kernel
10 700
fn=__advec_mom_kernel_mod_MOD_advec_mom_kernel
20 200
fl=hydro.f90
fn=hydro_
5 50
fl=???
fn=__memcpy_avx_unaligned_erms
1 30
fn=_gfortran_st_write
1 20
summary: 1000
"""


def test_cachegrind_names_gfortran_module_procedures_as_the_source_does(tmp_path: Path):
    f = tmp_path / "cachegrind.out.rank0"
    f.write_text(CG)
    exp = perfcast.io.load([f])
    df = exp.to_pandas()
    got = dict(zip(df["callpath"].astype(str), df["value"]))
    assert got == {"app->pdv_kernel_module::pdv_kernel": 700, "app->advec_mom_kernel_mod::advec_mom_kernel": 200,
                   "app->hydro_": 50, "app->__memcpy_avx_unaligned_erms": 30, "app->_gfortran_st_write": 20}


def test_perf_frames_name_gfortran_module_procedures_as_the_source_does():
    frames, _ = perf_io.fold([("__pdv_kernel_module_MOD_pdv_kernel", "/tmp/clover_leaf"),
                              ("hydro_", "/tmp/clover_leaf"), ("main", "/tmp/clover_leaf")])
    assert frames == ["main", "hydro_", "pdv_kernel_module::pdv_kernel"]
