#pragma once

#include <string>

namespace recall {

// OpenBLAS 0.3.21 (Debian 12) does not recognise some CPUs (virtual Xeons among them) and falls
// back to its SSE3 "Prescott" kernels, several times slower than the machine allows. When that
// happened, and OPENBLAS_CORETYPE is unset, this re-executes the program with the core the CPU
// supports (SkylakeX with AVX-512, else Haswell with AVX2 and FMA); OpenBLAS reads it only when it
// loads. Returns normally when nothing needs doing or the re-execution fails.
void ensure_fast_blas(char** argv);

// The OpenBLAS core in use ("unknown" when the BLAS is not OpenBLAS).
const char* blas_core_name();

// The BLAS under LibTorch's own products (torch::mm): "OpenBLAS <core>" (Debian's LibTorch),
// "MKL" (PyPI's, which links it statically) or "unknown".
std::string torch_blas_name();

}  // namespace recall
