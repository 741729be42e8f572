// smelt/nn.h — neural-network modules with libtorch's shape:
//
//   #include <smelt/smelt.h>
//   namespace nn = smelt::nn;
//   auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512),
//                               nn::GELU(), nn::Linear(512, 10));
//   smelt::Tensor y = model(smelt::randn({256, 1024}));
//   model->load("weights.safetensors");   // PyTorch state_dict names: "0.weight", ...
//
// See nn/module.h (Module, ModuleHolder, state dicts), nn/modules.h (layers)
// and nn/init.h (initializers).
#pragma once
#include "smelt/nn/init.h"
#include "smelt/nn/module.h"
#include "smelt/nn/modules.h"
