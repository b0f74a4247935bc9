// A launcher whose attempts the test ends by hand; records what was launched
// and which signals were sent.
#pragma once

#include <memory>
#include <vector>

#include "daemon/launch/launcher.h"

namespace tpud::testing {

class FakeLauncher final : public Launcher {
 public:
  struct Launched {
    LaunchSpec spec;
    AttemptObserver* observer = nullptr;
    std::vector<int> signals;  // Sent to the group, in order.
    bool alive = true;
  };

  absl::StatusOr<std::unique_ptr<Attempt>> Launch(const LaunchSpec& spec,
                                                  AttemptObserver* observer) override {
    if (!next_error.ok()) return std::exchange(next_error, absl::OkStatus());
    auto record = std::make_shared<Launched>();
    record->spec = spec;
    record->observer = observer;
    launched.push_back(record);
    return std::unique_ptr<Attempt>(new FakeAttempt(record, 1000 + static_cast<int>(launched.size())));
  }

  // Ends the newest attempt with an exit code or signal.
  void Exit(int code) { End(ExitStatus{code, 0, false, {}}); }
  void Kill(int signal) { End(ExitStatus{-1, signal, false, {}}); }
  void End(const ExitStatus& status) {
    Launched& last = *launched.back();
    last.alive = false;
    last.observer->OnExit(status);
  }
  Launched& last() { return *launched.back(); }
  // The newest attempt prints `line`.
  void Print(std::string_view line) { launched.back()->observer->OnOutputLine(line); }
  // Several lines ending in '\n', delivered as one block (as launchers do).
  void PrintBlock(std::string_view lines) { launched.back()->observer->OnOutputLines(lines); }

  std::vector<std::shared_ptr<Launched>> launched;
  absl::Status next_error = absl::OkStatus();  // Returned by the next Launch().

 private:
  class FakeAttempt final : public Attempt {
   public:
    FakeAttempt(std::shared_ptr<Launched> record, int pid) : record_(std::move(record)), pid_(pid) {}
    int pid() const override { return pid_; }
    absl::Status SignalGroup(int signal) override {
      record_->signals.push_back(signal);
      return absl::OkStatus();
    }

   private:
    std::shared_ptr<Launched> record_;
    int pid_;
  };
};

}  // namespace tpud::testing
