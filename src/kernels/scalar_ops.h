// smelt/kernels/scalar_ops.h — the scalar math of every pointwise op, written once.
// Included by the eager CPU kernels and embedded verbatim into JIT-generated code.
#pragma once
#include "smelt/half.h"
