// The profiler's recorder: spans nest on their thread and keep it, a span open across start() or
// stop() is left out, an off profiler records nothing, and every kernel call is an op span.
#include <doctest/doctest.h>

#include <thread>

#include "engine/cnn.h"
#include "engine/profiler.h"

using namespace cnn;
using profiler::Category;

namespace {
// The spans of `recording` named `name`.
std::vector<const profiler::Span*> named(const profiler::Recording& recording, const std::string& name) {
  std::vector<const profiler::Span*> found;
  for (const profiler::Span& s : recording.spans)
    if (s.name == name) found.push_back(&s);
  return found;
}

const profiler::Span& only(const profiler::Recording& recording, const std::string& name) {
  const std::vector<const profiler::Span*> found = named(recording, name);
  REQUIRE_MESSAGE(found.size() == 1, "spans named " << name << ": " << found.size());
  return *found[0];
}

bool within(const profiler::Span& child, const profiler::Span& parent) {
  return child.host_start_us >= parent.host_start_us && child.host_end_us <= parent.host_end_us;
}
}  // namespace

TEST_CASE("profiler: spans nest on their thread, and each keeps the thread that recorded it") {
  profiler::start();
  {
    const profiler::Scope outer("outer", Category::phase, Device::cpu());
    {
      const profiler::Scope inner("inner", Category::phase, Device::cpu());
      profiler::SpanHandle by_hand = profiler::begin("by hand", Category::phase, Device::cpu());
      profiler::end(by_hand);
    }
    // Another thread, while "outer" is open here: its span nests in nothing of this thread's.
    std::thread([] { const profiler::Scope on_thread("on thread", Category::phase, Device::cpu()); }).join();
  }
  const profiler::Scope after("after", Category::phase, Device::cpu());  // still open at stop(): left out
  const profiler::Recording recording = profiler::stop();

  REQUIRE(recording.spans.size() == 4);
  CHECK(recording.threads == 2);
  CHECK(named(recording, "after").empty());
  const profiler::Span& outer = only(recording, "outer");
  const profiler::Span& inner = only(recording, "inner");
  const profiler::Span& by_hand = only(recording, "by hand");
  const profiler::Span& on_thread = only(recording, "on thread");
  CHECK(outer.depth == 0);
  CHECK(outer.parent == -1);
  CHECK(inner.depth == 1);
  CHECK(&recording.spans.at(static_cast<size_t>(inner.parent)) == &outer);
  CHECK(by_hand.depth == 2);
  CHECK(&recording.spans.at(static_cast<size_t>(by_hand.parent)) == &inner);
  CHECK(within(inner, outer));
  CHECK(within(by_hand, inner));
  CHECK(inner.host_us() >= 0);
  CHECK(outer.thread == 0);
  CHECK(inner.thread == 0);
  CHECK(on_thread.thread == 1);
  CHECK(on_thread.depth == 0);
  CHECK(on_thread.parent == -1);
  CHECK(within(on_thread, outer));  // in time, though not its child
  CHECK(outer.device.is_cpu());
  CHECK(!outer.on_device());
  CHECK(outer.time_us() == outer.host_us());
}

TEST_CASE("profiler: off, nothing is recorded, a span opened before start() is not either") {
  CHECK(!profiler::enabled());
  const Tensor x = Tensor::randn({4, 8}, 1);
  {
    const profiler::Scope off("while off", Category::phase, Device::cpu());
    relu(x);  // a kernel call: an op span, were the profiler on
    profiler::SpanHandle handle = profiler::begin("by hand while off", Category::phase, Device::cpu());
    CHECK(!handle.open());
    profiler::start();
    CHECK(profiler::enabled());
  }  // "while off" closes during the recording
  const profiler::Recording recording = profiler::stop();
  CHECK(!profiler::enabled());
  CHECK(recording.spans.empty());
  CHECK(recording.threads == 0);
}

TEST_CASE("profiler: a cancelled span is left out, its children are kept without it") {
  profiler::start();
  profiler::SpanHandle step = profiler::begin("step", Category::phase, Device::cpu());
  { const profiler::Scope child("child", Category::phase, Device::cpu()); }
  profiler::cancel(step);
  CHECK(!step.open());
  const profiler::Recording recording = profiler::stop();
  REQUIRE(recording.spans.size() == 1);
  CHECK(recording.spans[0].name == "child");
  CHECK(recording.spans[0].parent == -1);  // its parent is not in the recording
}

TEST_CASE("profiler: every kernel call is an op span named after its kernel") {
  const Tensor x = Tensor::randn({4, 8}, 1);
  profiler::start();
  {
    const profiler::Scope phase("relu then sum", Category::phase, Device::cpu());
    sum(relu(x));
  }
  const profiler::Recording recording = profiler::stop();
  const profiler::Span& phase = only(recording, "relu then sum");
  const profiler::Span& relu_kernel = only(recording, "unary_forward");
  CHECK(relu_kernel.category == Category::op);
  CHECK(relu_kernel.depth == 1);
  CHECK(&recording.spans.at(static_cast<size_t>(relu_kernel.parent)) == &phase);
  CHECK(within(relu_kernel, phase));
  bool summed = false;
  for (const profiler::Span& s : recording.spans) summed = summed || (s.category == Category::op && s.name.find("sum") != std::string::npos);
  CHECK(summed);
}

TEST_CASE("profiler: start twice or stop without start is an error that says what to do") {
  profiler::start();
  CHECK_THROWS_WITH_AS(profiler::start(), doctest::Contains("call profiler::stop() first"), Error);
  profiler::stop();
  CHECK_THROWS_WITH_AS(profiler::stop(), doctest::Contains("call profiler::start() first"), Error);
}
