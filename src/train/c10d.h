// Which c10d backends this build has (RECALL_HAVE_GLOO, RECALL_HAVE_NCCL, RECALL_HAVE_C10D for
// either), and their headers: private to the train layer's distributed code.
#pragma once
#include <torch/version.h>

// LibTorch's CMake target defines USE_C10D_GLOO (and USE_C10D_NCCL in a CUDA build) when its c10d
// has the backend; the headers of Gloo (Debian: libgloo-dev) and NCCL must be at hand as well.
#if defined(USE_C10D_GLOO) && __has_include(<gloo/algorithm.h>)
#define RECALL_HAVE_GLOO 1
#endif
#if defined(USE_C10D_NCCL) && __has_include(<nccl.h>) && __has_include(<cuda_runtime_api.h>)
#define RECALL_HAVE_NCCL 1
#endif
#if defined(RECALL_HAVE_GLOO) || defined(RECALL_HAVE_NCCL)
#define RECALL_HAVE_C10D 1
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#ifdef RECALL_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef RECALL_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
