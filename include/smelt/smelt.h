// smelt/smelt.h — everything: tensors, ops, nn modules, safetensors I/O, compile.
#pragma once
#include "smelt/compile.h"
#include "smelt/io.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/tensor.h"
