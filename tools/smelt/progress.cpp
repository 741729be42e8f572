// The progress line of the long subcommands (see progress.h).
#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace smelt::cli {

namespace {
/// "41 s", "1m 03s", "2h 05m".
std::string duration_str(double s) {
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t < 60) return fmt::format("{} s", t);
  if (t < 3600) return fmt::format("{}m {:02}s", t / 60, t % 60);
  return fmt::format("{}h {:02}m", t / 3600, t % 3600 / 60);
}
}  // namespace

Progress::Progress(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      active_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string Progress::line(const std::string& label, const std::string& unit, int64_t total,
                           int64_t done, int64_t failed, double elapsed_s) {
  std::string s = fmt::format("{}: {}/{} {} ({}%), ", label, done, total, unit,
                              total > 0 ? done * 100 / total : 100);
  if (failed >= 0) s += fmt::format("{} failed, ", failed);
  s += fmt::format("{} elapsed", duration_str(elapsed_s));
  if (done > 0 && done < total)
    s += ", ETA " +
         duration_str(elapsed_s / static_cast<double>(done) * static_cast<double>(total - done));
  return s;
}

void Progress::update(int64_t done, int64_t failed) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool edge = !drawn_ || done >= total_;
  if (!edge && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::fputs(fmt::format("\r\033[K{}", line(label_, unit_, total_, done, failed, elapsed)).c_str(),
             stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::clear() {
  if (!active_ || !drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace smelt::cli
