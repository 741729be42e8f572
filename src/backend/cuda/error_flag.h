// Device-side error flags: how a CUDA kernel reports a failed runtime check
// (an integer division by zero) without the launching op waiting for it.
// Each device has one int in mapped, page-locked host memory; a kernel whose
// check fails stores the code of the launch's message there (a plain store:
// any one failing launch's code is enough). The host reads the flag at the
// next synchronization point of that device, when every store of the work it
// waited for is visible, and raises the message as smelt::Error. Messages are
// interned: one code per distinct message (op, dtype and shape), not per launch.
// Compiled kernels, whose code is fixed when they are generated, store the
// runtime check's code in a slot of their own instead (arm_error_slot).
#pragma once
#include <string>
#include <vector>

namespace smelt::cuda::impl {

/// The device pointer of device `device`'s flag, for a checked launch whose
/// failure raises `message`; `*code` receives the value the kernel stores.
int* arm_error_flag(int device, const std::string& message, int* code);

/// After a synchronization with device work: raises smelt::Error with the
/// message of a flagged launch (clearing that device's flag) when a kernel of
/// any device has set its flag; nothing (and no CUDA call) otherwise.
void raise_device_errors();

/// A flag of its own, in the same mapped memory, for one launch of generated
/// code (smelt::compile): its kernel stores a runtime check's code c > 0 there,
/// and the next synchronization raises `messages[c - 1]`. Slots live as long as
/// the process (a compiled graph may be replayed from a CUDA graph at any time);
/// at most 65,536 are armed, after which this raises smelt::Error.
int* arm_error_slot(std::vector<std::string> messages);

}  // namespace smelt::cuda::impl
