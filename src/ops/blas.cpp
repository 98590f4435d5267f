#include "recall/ops/blas.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace recall {

const char* blas_core_name() {
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return fn ? fn() : "unknown";
}

std::string torch_blas_name() {
  if (dlsym(RTLD_DEFAULT, "openblas_get_corename"))
    return std::string("OpenBLAS ") + blas_core_name();
  if (dlsym(RTLD_DEFAULT, "MKL_Set_Dynamic")) return "MKL";
  return "unknown";
}

void ensure_fast_blas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  std::string core = blas_core_name();
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (core != "prescott") return;
  const char* want = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  if (!want) return;
  ::setenv("OPENBLAS_CORETYPE", want, 1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace recall
