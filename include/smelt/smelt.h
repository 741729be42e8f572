// smelt/smelt.h — everything: tensors, ops, autograd, optimizers, nn modules (BERT and
// sentence embeddings included), tokenizers, safetensors I/O, compile, CUDA devices.
#pragma once
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/cuda.h"
#include "smelt/io.h"
#include "smelt/memory.h"
#include "smelt/nn.h"
#include "smelt/nn/bert.h"
#include "smelt/nn/sentence_encoder.h"
#include "smelt/ops.h"
#include "smelt/optim.h"
#include "smelt/tensor.h"
#include "smelt/text/wordpiece.h"
