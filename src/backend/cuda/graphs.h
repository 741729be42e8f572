// CUDA graphs: backend::Capture and backend::CapturedWork over the runtime
// API's stream capture (cudaStreamBeginCapture / cudaStreamEndCapture /
// cudaGraphInstantiate / cudaGraphLaunch). A recording runs on a new
// non-blocking stream made the calling thread's current stream (ops and
// driver-API kernel launches queue there and are recorded, not run), in
// cudaStreamCaptureModeThreadLocal: a call of this thread that may not be
// recorded (waiting for the device, an allocation outside the allocator's
// rules) fails. The stream lives as long as the recorded graph: the blocks
// allocated on it while recording are the graph's private pool in the
// caching allocator (allocator.h), returned when the graph is destroyed.
//
// Calls that would be recorded wrongly rather than fail — a copy from
// pageable host memory (the graph would read the host buffer at each replay,
// long after it is gone) — check capturing() first and raise.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/allocator.h"

namespace smelt::cuda::impl {

/// Starts a recording on device `device` (see the file comment).
std::unique_ptr<backend::Capture> begin_capture(CachingAllocator& allocator, int device);

/// True while the calling thread records a CUDA graph (begin_capture until
/// finish or discard).
bool capturing();

/// Raises smelt::Error when the calling thread records a CUDA graph: `what`
/// (e.g. "copy_to_host (a read of device values on the host)") cannot be
/// recorded.
void check_not_capturing(const char* what);

/// Keeps `keep` alive as long as the graph the calling thread records (host
/// memory a recorded copy reads at every replay). Internal error when no
/// recording is under way.
void keep_for_recording(std::shared_ptr<void> keep);

}  // namespace smelt::cuda::impl
