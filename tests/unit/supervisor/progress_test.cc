// Hang-detection arithmetic on simulated time.
#include "daemon/supervisor/progress.h"

#include <catch2/catch.hpp>

namespace tpud {
namespace {

const SteadyTime kStart = SteadyTime{} + std::chrono::hours(1);

SteadyTime At(double seconds) {
  return kStart + std::chrono::duration_cast<SteadyTime::duration>(Seconds(seconds));
}

// Seconds from kStart to the deadline; -1 when there is none.
double DeadlineAfterStart(const ProgressTracker& t) {
  std::optional<SteadyTime> d = t.Deadline();
  return d ? Seconds(*d - kStart).count() : -1;
}

ProgressSpec Spec(std::string regex = "", double grace = 900, double timeout = 600) {
  ProgressSpec spec;
  spec.configured = true;
  spec.regex = std::move(regex);
  spec.startup_grace_seconds = grace;
  spec.timeout_seconds = timeout;
  return spec;
}

ProgressTracker Make(const ProgressSpec& spec) {
  absl::StatusOr<ProgressTracker> t = ProgressTracker::Create(spec, kStart);
  REQUIRE(t.ok());
  return std::move(*t);
}

TEST_CASE("Progress: no progress section means no deadline and no progress", "[progress]") {
  ProgressSpec spec = Spec();
  spec.configured = false;
  ProgressTracker t = Make(spec);
  CHECK_FALSE(t.Deadline().has_value());
  CHECK_FALSE(t.OnOutputLine("step 1", At(5)));
  t.OnHeartbeat(At(6));
  CHECK_FALSE(t.Deadline().has_value());
  CHECK_FALSE(t.last_progress().has_value());
  CHECK(t.effective_timeout() == Seconds(0));
}

TEST_CASE("Progress: timeout 0 without learning turns hang detection off", "[progress]") {
  ProgressTracker t = Make(Spec("", 900, 0));
  CHECK_FALSE(t.Deadline().has_value());
  CHECK(t.OnOutputLine("anything", At(1)));
  CHECK_FALSE(t.Deadline().has_value());
}

TEST_CASE("Progress: before the first progress the deadline is start + max(grace, timeout)", "[progress]") {
  struct Case {
    double grace, timeout, expected;
  };
  const Case cases[] = {{900, 600, 900}, {60, 600, 600}, {0, 30, 30}, {900, 0, -1}};
  for (const Case& c : cases) {
    CAPTURE(c.grace, c.timeout);
    CHECK(DeadlineAfterStart(Make(Spec("", c.grace, c.timeout))) == Approx(c.expected));
  }
}

TEST_CASE("Progress: after progress at t the deadline is t + timeout", "[progress]") {
  ProgressTracker t = Make(Spec("", 900, 600));
  CHECK(t.OnOutputLine("compiling", At(30)));
  CHECK(DeadlineAfterStart(t) == Approx(630));
  CHECK(t.OnOutputLine("more", At(700)));
  CHECK(DeadlineAfterStart(t) == Approx(1300));
  REQUIRE(t.last_progress().has_value());
  CHECK(*t.last_progress() == At(700));
}

TEST_CASE("Progress: a regex without a group counts matching lines only", "[progress]") {
  ProgressTracker t = Make(Spec("loss=", 900, 100));
  CHECK_FALSE(t.OnOutputLine("WARNING: retrying", At(10)));
  CHECK(DeadlineAfterStart(t) == Approx(900));
  CHECK(t.OnOutputLine("iter 3 loss=0.5", At(20)));
  CHECK(DeadlineAfterStart(t) == Approx(120));
  CHECK_FALSE(t.last_step().has_value());
}

TEST_CASE("Progress: a regex group records the step", "[progress]") {
  ProgressTracker t = Make(Spec(R"(step[ =](\d+))", 900, 100));
  CHECK(t.OnOutputLine("train step=41 loss 1.0", At(10)));
  REQUIRE(t.last_step().has_value());
  CHECK(*t.last_step() == 41);
  CHECK(t.OnOutputLine("step 42", At(11)));
  CHECK(*t.last_step() == 42);
  CHECK_FALSE(t.OnOutputLine("no steps here", At(12)));
  CHECK(*t.last_step() == 42);
}

TEST_CASE("Progress: a group that does not parse is progress without a step", "[progress]") {
  ProgressTracker t = Make(Spec(R"(epoch (\w+))", 900, 100));
  CHECK(t.OnOutputLine("epoch one", At(10)));
  CHECK_FALSE(t.last_step().has_value());
  CHECK(DeadlineAfterStart(t) == Approx(110));
  CHECK(t.OnOutputLine("epoch 99999999999999999999", At(11)));  // Overflows int64.
  CHECK_FALSE(t.last_step().has_value());
}

TEST_CASE("Progress: with a heartbeat file and no regex only heartbeats count", "[progress]") {
  ProgressSpec spec = Spec("", 900, 60);
  spec.heartbeat_file = "/tmp/hb";
  ProgressTracker t = Make(spec);
  CHECK_FALSE(t.OnOutputLine("still printing warnings", At(10)));
  CHECK(DeadlineAfterStart(t) == Approx(900));
  t.OnHeartbeat(At(100));
  CHECK(DeadlineAfterStart(t) == Approx(160));
}

TEST_CASE("Progress: heartbeats and regex lines both extend the deadline", "[progress]") {
  ProgressSpec spec = Spec(R"(step (\d+))", 900, 60);
  spec.heartbeat_file = "/tmp/hb";
  ProgressTracker t = Make(spec);
  CHECK(t.OnOutputLine("step 1", At(10)));
  t.OnHeartbeat(At(50));
  CHECK(DeadlineAfterStart(t) == Approx(110));
  t.OnHeartbeat(At(40));  // An out-of-order report never moves the deadline back.
  CHECK(DeadlineAfterStart(t) == Approx(110));
}

ProgressSpec LearningSpec(int min_steps, double timeout = 600) {
  ProgressSpec spec = Spec(R"(step (\d+))", 900, timeout);
  spec.learn_timeout = true;
  spec.safety_factor = 5;
  spec.min_steps = min_steps;
  return spec;
}

// Prints "step N" every `interval` seconds starting at `from`; returns the time of the last.
double Steps(ProgressTracker& t, int first, int count, double from, double interval) {
  double now = from;
  for (int i = 0; i < count; ++i, now += interval)
    t.OnOutputLine("step " + std::to_string(first + i), At(now));
  return now - interval;
}

TEST_CASE("Progress: the learned timeout applies only after min_steps intervals", "[progress]") {
  ProgressTracker t = Make(LearningSpec(3));
  double last = Steps(t, 1, 3, 300, 4);  // Ticks at 300, 304, 308: two intervals.
  CHECK(t.intervals_observed() == 2);
  CHECK_FALSE(t.learned_timeout().has_value());
  CHECK(t.effective_timeout().count() == Approx(600));
  CHECK(DeadlineAfterStart(t) == Approx(last + 600));

  last = Steps(t, 4, 1, 314, 0);  // A third interval, of 6 s: 5 x 6 = 30 s.
  REQUIRE(t.learned_timeout().has_value());
  CHECK(t.learned_timeout()->count() == Approx(30));
  CHECK(DeadlineAfterStart(t) == Approx(last + 30));
}

TEST_CASE("Progress: the startup interval is not learned from", "[progress]") {
  ProgressTracker t = Make(LearningSpec(1));
  Steps(t, 1, 1, 500, 0);  // 500 s of compilation before step 1.
  CHECK(t.intervals_observed() == 0);
  Steps(t, 2, 1, 504, 0);
  REQUIRE(t.learned_timeout().has_value());
  CHECK(t.learned_timeout()->count() == Approx(20));
}

TEST_CASE("Progress: repeated step numbers are not new intervals", "[progress]") {
  ProgressTracker t = Make(LearningSpec(2));
  t.OnOutputLine("step 1 loss", At(10));
  t.OnOutputLine("step 1 lr", At(10.1));
  t.OnOutputLine("step 2", At(14));
  CHECK(t.intervals_observed() == 1);
  CHECK(DeadlineAfterStart(t) == Approx(614));
}

TEST_CASE("Progress: the learned timeout is clamped to [10 s, timeout_seconds]", "[progress]") {
  SECTION("fast steps get the floor") {
    ProgressTracker t = Make(LearningSpec(5));
    Steps(t, 1, 6, 100, 0.1);
    CHECK(t.learned_timeout()->count() == Approx(kMinLearnedTimeout.count()));
  }
  SECTION("slow steps never exceed the configured timeout") {
    ProgressTracker t = Make(LearningSpec(2, 600));
    Steps(t, 1, 3, 100, 200);  // 5 x 200 = 1000 > 600.
    CHECK(t.learned_timeout()->count() == Approx(600));
  }
  SECTION("timeout 0 leaves the learned value unbounded above") {
    ProgressTracker t = Make(LearningSpec(2, 0));
    CHECK(DeadlineAfterStart(t) == Approx(900));  // The grace still bounds startup.
    Steps(t, 1, 2, 100, 200);
    CHECK_FALSE(t.Deadline().has_value());  // Progress seen, nothing learned yet.
    Steps(t, 3, 1, 500, 0);
    CHECK(t.learned_timeout()->count() == Approx(1000));
    CHECK(DeadlineAfterStart(t) == Approx(1500));
  }
}

TEST_CASE("Progress: a longer interval after learning raises the learned timeout", "[progress]") {
  ProgressTracker t = Make(LearningSpec(2));
  Steps(t, 1, 3, 100, 5);  // Learned 25 s.
  CHECK(t.learned_timeout()->count() == Approx(25));
  Steps(t, 4, 1, 120, 0);  // A 10 s interval (say, an eval) that did not time out.
  CHECK(t.learned_timeout()->count() == Approx(50));
}

TEST_CASE("Progress: heartbeats are the ticks when there is no regex", "[progress]") {
  ProgressSpec spec = Spec("", 900, 600);
  spec.heartbeat_file = "/tmp/hb";
  spec.learn_timeout = true;
  spec.min_steps = 2;
  ProgressTracker t = Make(spec);
  t.OnHeartbeat(At(100));
  t.OnHeartbeat(At(103));
  t.OnHeartbeat(At(106));
  REQUIRE(t.learned_timeout().has_value());
  CHECK(t.learned_timeout()->count() == Approx(15));
  CHECK(DeadlineAfterStart(t) == Approx(121));
}

TEST_CASE("Progress: invalid specs are rejected with the key named", "[progress]") {
  struct Case {
    const char* name;
    std::function<void(ProgressSpec&)> edit;
    const char* key;
  };
  const Case cases[] = {
      {"bad regex", [](ProgressSpec& s) { s.regex = "step (\\d+"; }, "progress.regex"},
      {"negative grace", [](ProgressSpec& s) { s.startup_grace_seconds = -1; },
       "progress.startup_grace_seconds"},
      {"negative timeout", [](ProgressSpec& s) { s.timeout_seconds = -5; }, "progress.timeout_seconds"},
      {"learning without a signal", [](ProgressSpec& s) { s.learn_timeout = true; },
       "progress.learn_timeout"},
      {"safety factor < 1",
       [](ProgressSpec& s) { s.learn_timeout = true, s.regex = "x", s.safety_factor = 0.5; },
       "progress.safety_factor"},
      {"min_steps 0", [](ProgressSpec& s) { s.learn_timeout = true, s.regex = "x", s.min_steps = 0; },
       "progress.min_steps"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    ProgressSpec spec = Spec();
    c.edit(spec);
    absl::StatusOr<ProgressTracker> t = ProgressTracker::Create(spec, kStart);
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(t.status().message()), Catch::StartsWith(c.key));
  }
  CHECK(ValidateProgressSpec(Spec(R"(step (\d+))")).ok());
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Progress: a block of lines counts when any line in it matches, with its last step",
          "[progress]") {
  ProgressTracker t = Make(Spec(R"(^step=(\d+))", 900, 60));
  CHECK_FALSE(t.OnOutputLines("loading data\nwarming up\n", At(1)));
  CHECK_FALSE(t.last_progress().has_value());
  // ^ anchors at each line start inside the block, as it does per line.
  CHECK_FALSE(t.OnOutputLines("note: step=5 is not a progress line\n", At(2)));
  REQUIRE(t.OnOutputLines("noise\nstep=10 loss=1.0\nnoise\nstep=20 loss=0.9\nnoise\n", At(3)));
  CHECK(t.last_step() == 20);
  CHECK(DeadlineAfterStart(t) == Approx(3 + 60));
}

TEST_CASE("Progress: without a regex any block of output counts, with only a heartbeat none does",
          "[progress]") {
  ProgressTracker any = Make(Spec("", 900, 60));
  CHECK(any.OnOutputLines("anything\n", At(5)));
  CHECK(DeadlineAfterStart(any) == Approx(5 + 60));
  ProgressSpec heartbeat_only = Spec("", 900, 60);
  heartbeat_only.heartbeat_file = "/tmp/heartbeat";
  ProgressTracker t = Make(heartbeat_only);
  CHECK_FALSE(t.OnOutputLines("anything\n", At(5)));
}

TEST_CASE("Progress: a regex anchored to the text's ends is checked line by line in a block",
          "[progress]") {
  ProgressTracker t = Make(Spec(R"(\Astep=(\d+)\z)", 900, 60));
  REQUIRE(t.OnOutputLines("x\nstep=7\ny\n", At(1)));
  CHECK(t.last_step() == 7);
}

}  // namespace
}  // namespace tpud
