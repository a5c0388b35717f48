#include <doctest/doctest.h>

#include "trainsim/sim/engine.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
using namespace trainsim::sim;

namespace {
constexpr Duration us(std::int64_t v) {
  return microseconds(v);
}
ComputeWork compute(std::int64_t micros) {
  return {us(micros)};
}
}  // namespace

TEST_CASE("tasks on one stream run one after another in issue order") {
  TaskGraph g;
  const auto s = g.add_stream({"compute", 0});
  const auto a = g.add_task("a", s, compute(3));
  const auto b = g.add_task("b", s, compute(4));
  const auto c = g.add_task("c", s, compute(5));
  const auto t = run(g);
  CHECK(t.tasks[a.index()].end == us(3));
  CHECK(t.tasks[b.index()].start == us(3));
  CHECK(t.tasks[c.index()].end == us(12));
  CHECK(t.makespan == us(12));
}

TEST_CASE("independent streams overlap; a dependency orders them") {
  TaskGraph g;
  const auto compute_stream = g.add_stream({"compute", 0});
  const auto comm_stream = g.add_stream({"comm", 0});
  const auto load = g.add_load({});
  const auto grads = g.add_task("backward", compute_stream, compute(10));
  const auto reduce = g.add_task("all-reduce", comm_stream, CommWork{us(1), us(6), load}, {&grads, 1});
  const auto other = g.add_task("next", compute_stream, compute(4));
  const auto t = run(g);
  CHECK(t.tasks[reduce.index()].start == us(10));
  CHECK(t.transfer_starts[g.transfer_index(reduce)] == us(11));
  CHECK(t.tasks[reduce.index()].end == us(17));
  CHECK(t.tasks[other.index()].end == us(14));  // overlapped with the reduction
  CHECK(t.makespan == us(17));
}

TEST_CASE("a collective starts when every participant reaches it") {
  TaskGraph g;
  const auto c0 = g.add_stream({"compute", 0});
  const auto c1 = g.add_stream({"compute", 1});
  const auto n0 = g.add_stream({"comm", 0});
  const auto n1 = g.add_stream({"comm", 1});
  const auto load = g.add_load({});
  const auto f0 = g.add_task("f", c0, compute(2));
  const auto f1 = g.add_task("f", c1, compute(7));
  const StreamId both[] = {n0, n1};
  const TaskId deps[] = {f0, f1};
  const auto ar = g.add_task("all-reduce", both, CommWork{Duration::zero(), us(3), load}, deps);
  const auto t = run(g);
  CHECK(t.tasks[ar.index()].start == us(7));
  CHECK(t.tasks[ar.index()].end == us(10));
}

TEST_CASE("two transfers through one link share it evenly") {
  TaskGraph g;
  const auto a = g.add_stream({"a", 0});
  const auto b = g.add_stream({"b", 1});
  const auto load = g.add_load({{7, 1.0}});
  const auto x = g.add_task("x", a, CommWork{us(1), us(10), load});
  const auto y = g.add_task("y", b, CommWork{us(1), us(10), load});
  const auto t = run(g);
  CHECK(t.tasks[x.index()].end == us(21));
  CHECK(t.tasks[y.index()].end == us(21));
}

TEST_CASE("max-min fairness: a transfer speeds up when its neighbour ends") {
  // A uses all of link 1; B half of link 1 and all of link 2. Progressive filling: both rise to
  // 2/3 when link 1 fills. A (2 µs of work) ends at 3 µs; B has done 2 of 4 µs and runs alone.
  TaskGraph g;
  const auto sa = g.add_stream({"a", 0});
  const auto sb = g.add_stream({"b", 0});
  const auto la = g.add_load({{1, 1.0}});
  const auto lb = g.add_load({{1, 0.5}, {2, 1.0}});
  const auto a = g.add_task("a", sa, CommWork{Duration::zero(), us(2), la});
  const auto b = g.add_task("b", sb, CommWork{Duration::zero(), us(4), lb});
  const auto t = run(g);
  CHECK(t.tasks[a.index()].end == us(3));
  CHECK(t.tasks[b.index()].end == us(5));
}

TEST_CASE("transfers on different links do not slow each other") {
  TaskGraph g;
  const auto sa = g.add_stream({"a", 0});
  const auto sb = g.add_stream({"b", 0});
  const auto a = g.add_task("a", sa, CommWork{Duration::zero(), us(5), g.add_load({{1, 1.0}})});
  const auto b = g.add_task("b", sb, CommWork{Duration::zero(), us(5), g.add_load({{2, 1.0}})});
  const auto t = run(g);
  CHECK(t.tasks[a.index()].end == us(5));
  CHECK(t.tasks[b.index()].end == us(5));
  CHECK(t.rate_updates == 0);  // alone on their links: the sharing solver never runs
}

TEST_CASE("a 4-stage 1F1B pipeline idles (p−1)/(m+p−1) of the step") {
  // F = 1 µs, B = 2 µs, free communication: each stage runs its 1F1B order; the step is
  // (m + p − 1)(F + B) and every stage is busy m(F + B) of it.
  const int p = 4, m = 8;
  TaskGraph g;
  std::vector<StreamId> stages;
  for (int s = 0; s < p; ++s) stages.push_back(g.add_stream({"compute", static_cast<std::uint32_t>(s)}));
  std::vector<std::vector<TaskId>> fwd(p, std::vector<TaskId>(m)), bwd(p, std::vector<TaskId>(m));
  // issue order per stage: warm-up forwards, then alternate, then cool-down backwards
  std::vector<std::vector<std::pair<char, int>>> order(p);
  for (int s = 0; s < p; ++s) {
    const int warm = std::min(p - s - 1, m);
    int f = 0, b = 0;
    for (; f < warm; ++f) order[s].push_back({'F', f});
    while (b < m) {
      if (f < m) order[s].push_back({'F', f++});
      order[s].push_back({'B', b++});
    }
  }
  // add tasks in a global order that respects dependencies: by time slot, stage
  std::vector<std::size_t> next(p, 0);
  bool progress = true;
  std::vector<std::vector<bool>> fdone(p, std::vector<bool>(m)), bdone(p, std::vector<bool>(m));
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      if (next[s] >= order[s].size()) continue;
      const auto [kind, mb] = order[s][next[s]];
      std::vector<TaskId> deps;
      if (kind == 'F') {
        if (s > 0 && !fdone[s - 1][mb]) continue;
        if (s > 0) deps.push_back(fwd[s - 1][mb]);
        fwd[s][mb] = g.add_task("F", stages[s], compute(1), deps);
        fdone[s][mb] = true;
      } else {
        if (s < p - 1 && !bdone[s + 1][mb]) continue;
        if (!fdone[s][mb]) continue;
        deps.push_back(fwd[s][mb]);
        if (s < p - 1) deps.push_back(bwd[s + 1][mb]);
        bwd[s][mb] = g.add_task("B", stages[s], compute(2), deps);
        bdone[s][mb] = true;
      }
      ++next[s];
      progress = true;
    }
  }
  const auto t = run(g);
  const double step = t.makespan.seconds();
  CHECK(step == doctest::Approx((m + p - 1) * 3e-6));
  const double idle = step - m * 3e-6;
  CHECK(idle / step == doctest::Approx(double(p - 1) / (m + p - 1)));
}

TEST_CASE("the memory peak is the timeline's, not a sum of maxima") {
  TaskGraph g;
  const auto s = g.add_stream({"compute", 0});
  const auto pool = g.add_pool({0, 100});
  const auto a = g.add_task("fwd 1", s, compute(1));
  g.add_memory(a, {pool, 50, true});
  const auto b = g.add_task("fwd 2", s, compute(1));
  g.add_memory(b, {pool, 30, true});
  const auto c = g.add_task("bwd 2", s, compute(1));
  g.add_memory(c, {pool, 20, false});  // workspace while it runs
  g.add_memory(c, {pool, -50, true});
  const auto d = g.add_task("bwd 1", s, compute(1));
  g.add_memory(d, {pool, -50, true});
  const auto t = run(g);
  CHECK(t.pools[pool.index()].peak == 200);
  CHECK(t.pools[pool.index()].peak_time == us(2));
  CHECK(t.pools[pool.index()].final == 100);
}

TEST_CASE("tasks that can never start are reported, not hung") {
  TaskGraph g;
  const auto s0 = g.add_stream({"a", 0});
  const auto s1 = g.add_stream({"b", 1});
  const auto first = g.add_task("first", s0, compute(1));
  g.add_task("second", s1, compute(1), {&first, 1});
  const auto third = g.add_task("third", s1, compute(1));
  g.add_dependency(first, third);  // first waits on third, behind second on s1, which waits on first
  CHECK_THROWS_WITH_AS(run(g), doctest::Contains("tasks that can never run"), InternalError);
}

TEST_CASE("collectives issued in different orders on two ranks deadlock, as NCCL would") {
  TaskGraph g;
  const auto s0 = g.add_stream({"comm", 0});
  const auto s1 = g.add_stream({"comm", 1});
  const auto load = g.add_load({});
  const auto a = g.add_task("a", s0, CommWork{Duration::zero(), us(1), load});
  const auto b = g.add_task("b", s1, CommWork{Duration::zero(), us(1), load});
  (void)a;
  (void)b;
  CHECK_NOTHROW(run(g));
  TaskGraph h;
  const auto h0 = h.add_stream({"comm", 0});
  const auto h1 = h.add_stream({"comm", 1});
  const auto hl = h.add_load({});
  const auto x = h.add_task("x", h0, CommWork{Duration::zero(), us(1), hl});
  const StreamId both[] = {h1, h0};
  h.add_task("y", both, CommWork{Duration::zero(), us(1), hl});
  const auto z = h.add_task("z", h1, CommWork{Duration::zero(), us(1), hl});
  h.add_dependency(x, z);  // rank 0 waits for z before x; rank 1 runs y (which needs rank 0) before z
  CHECK_THROWS_AS(run(h), InternalError);
}

TEST_CASE("the same graph gives the same timeline") {
  TaskGraph g;
  const auto a = g.add_stream({"a", 0});
  const auto b = g.add_stream({"b", 0});
  const auto c = g.add_stream({"c", 0});
  const auto l1 = g.add_load({{1, 0.7}, {2, 0.3}});
  const auto l2 = g.add_load({{2, 1.0}});
  for (int i = 0; i < 20; ++i) {
    g.add_task("x", a, CommWork{us(1), us(3 + i % 4), l1});
    g.add_task("y", b, CommWork{us(2), us(5), l2});
    g.add_task("z", c, compute(2 + i % 3));
  }
  const auto t1 = run(g);
  const auto t2 = run(g);
  REQUIRE(t1.tasks.size() == t2.tasks.size());
  for (std::size_t i = 0; i < t1.tasks.size(); ++i) CHECK(t1.tasks[i].end == t2.tasks[i].end);
}

TEST_CASE("compute slows while a collective of its process holds compute units, and only then") {
  // 10 us of compute; a collective holding a quarter of the units runs from 2 to 8 us on the same
  // process: 2 us at full rate, 6 us at 3/4 (4.5 us of work), then 3.5 us at full rate: ends at 11.5
  TaskGraph g;
  const auto compute_stream = g.add_stream({"compute", 0});
  const auto comm_stream = g.add_stream({"comm", 0});
  const auto other_process = g.add_stream({"compute", 1});
  const auto load = g.add_load({});
  const auto gate = g.add_task("gate", comm_stream, compute(2));
  const auto work = g.add_task("work", compute_stream, compute(10));
  const auto elsewhere = g.add_task("elsewhere", other_process, compute(10));
  CommWork held{us(0), us(6), load};
  held.compute_share = 0.25;
  g.add_task("collective", comm_stream, held, {&gate, 1});
  const auto t = run(g);
  CHECK(t.tasks[work.index()].end.ps == us(11).ps + 500'000);
  CHECK(t.tasks[elsewhere.index()].end == us(10));  // another process's compute is unaffected
}

TEST_CASE("compute streams that share the device split its units evenly while both run") {
  // 4 us and 10 us of compute on two sharing streams of one process, from 0: both at half rate
  // until the short one ends at 8 us (4 us of work done on each), then the long one alone at full
  // rate for its last 6 us: 14 us, the sum of the work (nothing is lost or created)
  TaskGraph g;
  const auto a = g.add_stream({.name = "compute", .process = 0, .shares_compute = true});
  const auto b = g.add_stream({.name = "compute-b", .process = 0, .shares_compute = true});
  const auto host = g.add_stream({.name = "host", .process = 0, .device = false});
  const auto plain = g.add_stream({.name = "copy", .process = 0});
  const auto shorter = g.add_task("short", a, compute(4));
  const auto longer = g.add_task("long", b, compute(10));
  const auto cpu = g.add_task("cpu", host, compute(5));
  const auto copy = g.add_task("copy", plain, compute(3));
  const auto t = run(g);
  CHECK(t.tasks[shorter.index()].end == us(8));
  CHECK(t.tasks[longer.index()].end == us(14));
  CHECK(t.tasks[cpu.index()].end == us(5));   // the host thread does not share the device's units
  CHECK(t.tasks[copy.index()].end == us(3));  // nor does a stream that is not a sharing one
  // one at a time they run at full rate
  TaskGraph serial;
  const auto s = serial.add_stream({.name = "compute", .process = 0, .shares_compute = true});
  const auto first = serial.add_task("first", s, compute(4));
  const auto second = serial.add_task("second", s, compute(10));
  const auto u = run(serial);
  CHECK(u.tasks[first.index()].end == us(4));
  CHECK(u.tasks[second.index()].end == us(14));
}

TEST_CASE("a stream's tasks in issue order, read again after the graph grew; fields read back as given") {
  TaskGraph g;
  const auto a = g.add_stream({"compute", 0});
  const auto b = g.add_stream({"comm", 1});
  const auto pool = g.add_pool({1, 100});
  const auto load = g.add_load({});
  const auto t0 = g.add_task({"F# L1", 7}, a, compute(1), {}, 9);
  const StreamId both[] = {b, a};
  const auto t1 = g.add_task("all-reduce", both, CommWork{us(2), us(3), load, 64}, {&t0, 1}, 255);
  CHECK(std::vector<TaskId>(g.stream_tasks(a).begin(), g.stream_tasks(a).end()) == std::vector{t0, t1});
  CHECK(std::vector<TaskId>(g.stream_tasks(b).begin(), g.stream_tasks(b).end()) == std::vector{t1});
  // a stream added and tasks issued after the first read are indexed on the next
  const auto c = g.add_stream({"host", 1});
  const auto t2 = g.add_task("b", c, compute(1));
  const auto t3 = g.add_task("c", b, compute(1), {&t2, 1});
  CHECK(std::vector<TaskId>(g.stream_tasks(b).begin(), g.stream_tasks(b).end()) == std::vector{t1, t3});
  CHECK(std::vector<TaskId>(g.stream_tasks(c).begin(), g.stream_tasks(c).end()) == std::vector{t2});
  CHECK(g.stream_tasks(a).size() == 2);
  // the packed record and memory effect give back what went in
  g.add_memory(t1, {pool, -(std::int64_t{1} << 40), true, 3});
  g.add_memory(t1, {pool, 5, false, 1});
  CHECK(g.name(t0) == "F7 L1");
  CHECK(g.category(t0) == 9);
  CHECK(g.category(t1) == 255);
  CHECK(g.number(t1) == -1);
  std::vector<MemoryEffect> effects;
  g.for_each_memory(t1, [&](const MemoryEffect& m) { effects.push_back(m); });
  REQUIRE(effects.size() == 2);
  CHECK(effects[0].pool == pool);
  CHECK(effects[0].bytes == -(std::int64_t{1} << 40));
  CHECK(effects[0].at_end);
  CHECK(effects[0].kind == 3);
  CHECK(effects[1].bytes == 5);
  CHECK_FALSE(effects[1].at_end);
  CHECK_THROWS(g.add_task("x", a, compute(1), {}, 256));
  // a label interned once names later tasks as the string would; an id never interned is refused
  const auto id = g.intern("F# L1");
  CHECK(id == g.label_id(t0));
  const auto t4 = g.add_task(TaskName::interned_label(id, 3), c, compute(1));
  CHECK(g.name(t4) == "F3 L1");
  CHECK(g.label_id(t4) == g.label_id(t0));
  CHECK_THROWS(g.add_task(TaskName::interned_label(1000, 3), c, compute(1)));
  const auto t = run(g);
  CHECK(t.tasks[t1.index()].start == us(1));
  CHECK(t.tasks[t3.index()].start == us(6));
}
