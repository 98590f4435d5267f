// The parts of LibTorch recall uses: tensors and their ops, autograd, modules (Linear, Embedding,
// ModuleList), the AdamW optimizer, archives, CUDA queries and torch's thread pool. Every file
// includes this rather than <torch/torch.h>: GCC re-instantiates a header's pending templates in
// each file that includes it, precompiled or not, and torch.h's (its data loaders, every nn
// module and optimizer) cost about 3 s per file, a third of a build.
#pragma once
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/cuda.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>
