// A one-line progress display on stderr for the long subcommands (`smelt golden`,
// `smelt fuzz`): "smelt fuzz: 1234/3120 cases (39%), 3 failed, 41 s elapsed, ETA 1m 03s".
// It is drawn only when stderr is a terminal (isatty), so logs and pipes get
// none of it; it is redrawn at most five times a second (the first and the
// last update always), and erased before other output and at the end.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace smelt::cli {

class Progress {
 public:
  /// `label`: what runs ("smelt fuzz"); `total`: how many items; `unit`: their name.
  Progress(std::string label, int64_t total, std::string unit = "cases");
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// `done` of the items finished, `failed` of them failed (negative: items
  /// cannot fail, and the line does not count failures). One thread at a time.
  void update(int64_t done, int64_t failed);
  /// Erases the line (before other output is printed, and at the end).
  void clear();
  /// Whether anything is drawn (stderr is a terminal).
  bool active() const { return active_; }

  /// The line for `done`/`failed` after `elapsed_s` seconds (no escape codes).
  static std::string line(const std::string& label, const std::string& unit, int64_t total,
                          int64_t done, int64_t failed, double elapsed_s);

 private:
  std::string label_, unit_;
  int64_t total_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace smelt::cli
