// The thread-local grad mode (smelt/autograd.h): on by default in every thread;
// NoGradGuard turns it off for a scope. Core holds it so that every layer can
// ask, and ops record nothing while it is off.
#include "smelt/autograd.h"

namespace smelt {

namespace {
thread_local bool g_grad_enabled = true;
}  // namespace

bool GradMode::is_enabled() { return g_grad_enabled; }
void GradMode::set_enabled(bool enabled) { g_grad_enabled = enabled; }

}  // namespace smelt
