// The mutation check's backend: a copy of examples/out_of_tree_backend (the "toy") in one file,
// compiled once per mutant with -DACCGRAPH_MUTANT=N. N = 0 is the baseline, which passes the
// conformance suite; every other N breaks exactly one rule of include/accgraph/spi/backend.hpp (the
// table in README.md), and the suite must fail on it naming that rule.
//
// Unlike the example, the baseline also forks captures across streams (multi_stream_capture)
// and honours every capture mode, so that no rule is skipped: a rule whose case is skipped could
// not show that its case catches a broken backend. It also logs a failure its stream never
// reported (failure.destroyed), which the example does not do. Mutants 8, 14 and 27 run each
// queue on a worker thread (TOY_ASYNC): their rules can only be broken by a queue that runs
// asynchronously to the thread that enqueues.
#include <accgraph/error.hpp>
#include <accgraph/spi/backend.hpp>
#include <accgraph/spi/clock_sampling.hpp>
#include <accgraph/spi/plugin.hpp>
#include <accgraph/spi/pool_table.hpp>
#include <accgraph/spi/steady_clock_markers.hpp>
#include <accgraph/spi/untimed_replay.hpp>
#include <accgraph/types.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef ACCGRAPH_MUTANT
#define ACCGRAPH_MUTANT 0
#endif

// One number per broken rule (README.md lists rule -> conformance case -> mutant).
#define M_STREAM_ORDER 1         // stream.order: fills run at synchronize(), copies at once
#define M_STREAM_CAPTURE 2       // stream.capture: a capturing stream also runs its work
#define M_STREAM_WRAP 3          // stream.wrap: wrap_stream makes a new queue
#define M_FAILURE_SYNCHRONIZE 4  // failure.synchronize: failures are dropped
#define M_FAILURE_ONCE 5         // failure.once: synchronize() does not clear the failure
#define M_FAILURE_REPLAY 6       // failure.replay: a replay stops at its first failed node
#define M_FAILURE_DESTROYED 7    // failure.destroyed: an unreported failure dies silently
#define M_FORK_JOIN_EAGER 8      // fork-join.eager: an eager wait_for does nothing (async)
#define M_FORK_JOIN_FORK 9       // fork-join.fork: waiting on a capture does not join it
#define M_FORK_JOIN_JOIN 10      // fork-join.join: a replay runs each stream's nodes in turn
#define M_FORK_JOIN_UNJOINED 11  // fork-join.unjoined: capture_end accepts unjoined work
#define M_FORK_JOIN_LEAVE 12     // fork-join.leave: only the origin leaves capture mode
#define M_REPLAY_NESTED 13       // replay.nested: a replay into a capture runs at once
#define M_GRAPH_SERIAL 14        // graph.serial: launches on two streams overlap (async)
#define M_GRAPH_RESET 15         // graph.reset: reset() leaves the stream capturing
#define M_GRAPH_KEEP_GRAPH 16    // graph.keep-graph: keep_graph instantiates nothing
#define M_GRAPH_POOL 17          // graph.pool: pool() forgets its id at reset
#define M_GRAPH_DEBUG_DUMP 18    // graph.debug-dump: the dump file stays empty
#define M_MODE_THREAD_LOCAL 19   // mode.thread-local: ThreadLocal refuses other threads
#define M_MODE_RELAXED 20        // mode.relaxed: Relaxed refuses the capturing thread
#define M_MARKER_SLOT 21         // marker.slot: the slot is chosen when record() is called
#define M_MARKER_BRANCHES 22     // marker.branches: the slot is tracked per stream
#define M_MARKER_COMPLETE 23     // marker.complete: is_complete() means "began"
#define M_MARKER_READ 24         // marker.read: times in microseconds
#define M_MARKER_OPTIONS 25      // marker.options: the requested ring depth is ignored
#define M_LIFE_STREAM 26         // life.stream: replays go to the (dead) capture stream
#define M_LIFE_ENQUEUED 27       // life.enqueued: a replay reads the graph's executable late
#define M_CAPS_HONEST 28         // caps.honest: delay() returns at once
#define M_MODE_HONOURED 29       // mode.honoured: Relaxed is listed but refused
#define M_CLOCK_SAMPLE 30        // clock.sample: sample_clock reads another clock (CLOCK_REALTIME)
#define M_UNTIMED_SAME_WORK 31   // untimed.same-work: replay_untimed runs the markers too

#define MUTANT(name) (ACCGRAPH_MUTANT == M_##name)
#define TOY_ASYNC (MUTANT(FORK_JOIN_EAGER) || MUTANT(GRAPH_SERIAL) || MUTANT(LIFE_ENQUEUED))

namespace toy {

using accgraph::CaptureMode;
using accgraph::ErrorCode;
using accgraph::PoolId;

inline constexpr const char* kBackendName = "toy_mutant";
inline constexpr const char* kMarkerStrategy = "steady_clock_sync";
inline constexpr size_t kDefaultRingDepth = 4;
inline constexpr size_t kMaxRingDepth = 1024;

[[noreturn]] void fail(ErrorCode code, const std::string& message) {
  throw accgraph::Error(code, message, kBackendName);
}

struct Operation {
  std::string name;
  std::function<void()> run;
  bool is_fill = false;  // for M_STREAM_ORDER only
  bool marker = false;   // enqueued by the marker set: left out of untimed replays
};

class ToyQueue;

// --- capture modes (what the mode mutants wrongly enforce) ---------------------------------------

struct ActiveCapture {
  CaptureMode mode;
  std::thread::id thread;
};

std::mutex active_captures_mutex;
std::map<const void*, ActiveCapture> active_captures;  // graph -> its capture

void refuse_if_captures_forbid(const char* operation) {
#if MUTANT(MODE_THREAD_LOCAL) || MUTANT(MODE_RELAXED)
  std::lock_guard<std::mutex> lock(active_captures_mutex);
  for (const auto& [graph, capture] : active_captures) {
#if MUTANT(MODE_THREAD_LOCAL)
    const bool forbidden = capture.mode != CaptureMode::Relaxed;  // ThreadLocal as Global
    (void)graph;
#else
    const bool forbidden = capture.thread == std::this_thread::get_id();  // Relaxed as ThreadLocal
    (void)graph;
#endif
    if (forbidden)
      fail(ErrorCode::InvalidState,
           std::string(operation) + ": not allowed while a capture is in progress");
  }
#else
  (void)operation;
#endif
}

// --- recordings (fork/join) ----------------------------------------------------------------------

/// The operations captured from one or more queues, in the order they were enqueued (a valid
/// serialisation: a stream can only wait for work already enqueued). Each queue keeps a vector
/// clock of how much of every other queue's recorded work it is ordered after.
class Recording {
 public:
  struct Node {
    Operation op;
    uint64_t stream = 0;
  };

  Recording(const std::shared_ptr<ToyQueue>& origin, uint64_t origin_id) : origin_(origin_id) {
    attach(origin, origin_id);
  }
  uint64_t origin() const { return origin_; }

  void attach(const std::shared_ptr<ToyQueue>& queue, uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    Clock& c = clocks_[id];
    c.queue = queue;
  }
  void append(uint64_t stream, Operation op) {
    std::lock_guard<std::mutex> lock(mutex_);
    Clock& c = clocks_.at(stream);
    c.seen[stream] = ++c.recorded;
    nodes_.push_back(Node{std::move(op), stream});
  }
  void merge(uint64_t waiter, uint64_t waited) {
    std::lock_guard<std::mutex> lock(mutex_);
    Clock& w = clocks_.at(waiter);
    const Clock& y = clocks_.at(waited);
    for (const auto& [id, count] : y.seen) w.seen[id] = std::max(w.seen[id], count);
  }
  std::vector<std::shared_ptr<ToyQueue>> queues() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<ToyQueue>> out;
    for (auto& [id, c] : clocks_)
      if (auto q = c.queue.lock()) out.push_back(std::move(q));
    return out;
  }
  std::string unjoined() {
    std::lock_guard<std::mutex> lock(mutex_);
    const Clock& origin = clocks_.at(origin_);
    std::string text;
    for (const auto& [id, c] : clocks_) {
      if (id == origin_) continue;
      auto seen = origin.seen.find(id);
      const size_t joined = seen == origin.seen.end() ? 0 : seen->second;
      if (c.recorded > joined)
        text += (text.empty() ? "" : ", ") + std::string("stream ") + std::to_string(id);
    }
    return text;
  }
  std::vector<Node> take_nodes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(nodes_);
  }

 private:
  struct Clock {
    std::weak_ptr<ToyQueue> queue;
    size_t recorded = 0;
    std::map<uint64_t, size_t> seen;
  };
  std::mutex mutex_;
  const uint64_t origin_;
  std::vector<Node> nodes_;
  std::map<uint64_t, Clock> clocks_;
};

// --- queues --------------------------------------------------------------------------------------

std::atomic<uint64_t> next_queue_id{1};

/// The toy's native queue: runs each operation on the calling thread when it is enqueued
/// (Note [Synchronous streams] of the example), or, with TOY_ASYNC, on a worker thread; while a
/// capture is attached, appends it to the capture instead.
class ToyQueue {
 public:
  ToyQueue() : id_(next_queue_id.fetch_add(1)) {
#if TOY_ASYNC
    worker_ = std::thread([this] { run_worker(); });
#endif
  }

  ~ToyQueue() {
#if TOY_ASYNC
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    if (worker_.get_id() == std::this_thread::get_id())
      worker_.detach();
    else if (worker_.joinable())
      worker_.join();
#endif
#if !MUTANT(FAILURE_DESTROYED)
    if (!failed_operation_.empty())
      accgraph::log(
          accgraph::LogLevel::Warning,
          std::string("toy_mutant: a stream was destroyed with an unreported failure of '") +
              failed_operation_ + "': " + failure_message_);
#endif
  }

  uint64_t id() const { return id_; }

  void submit(Operation op) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (capture_) {
        std::shared_ptr<Recording> recording = capture_;
        lock.unlock();
#if MUTANT(STREAM_CAPTURE)
        run(op);  // also runs what it records
#endif
        recording->append(id_, std::move(op));
        return;
      }
#if TOY_ASYNC
      pending_.push_back(std::move(op));
      ++submitted_;
      work_cv_.notify_one();
      return;
#endif
#if MUTANT(STREAM_ORDER)
      if (op.is_fill) {  // "another engine": runs at synchronize(), unordered with the rest
        deferred_.push_back(std::move(op));
        return;
      }
#endif
    }
    run(op);
  }

  void synchronize() {
#if TOY_ASYNC
    wait_until(submitted());
#endif
#if MUTANT(STREAM_ORDER)
    std::vector<Operation> deferred;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      deferred.swap(deferred_);
    }
    for (Operation& op : deferred) run(op);
#endif
    std::string operation, message;
    {
      std::lock_guard<std::mutex> lock(mutex_);
#if MUTANT(FAILURE_ONCE)
      operation = failed_operation_;
      message = failure_message_;
#else
      operation.swap(failed_operation_);
      message.swap(failure_message_);
#endif
    }
    if (!operation.empty())
      fail(ErrorCode::BackendError, "synchronize: the operation '" + operation + "' failed: " +
                                        message + " (the stream has run everything else enqueued)");
  }

#if TOY_ASYNC
  uint64_t submitted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return submitted_;
  }
  void wait_until(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return completed_ >= ticket; });
  }
#endif

  bool is_capturing() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return capture_ != nullptr;
  }
  void set_capture(std::shared_ptr<Recording> recording) {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_ = std::move(recording);
  }
  std::shared_ptr<Recording> capture() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return capture_;
  }

 private:
  void run(Operation& op) {
    std::string failure;
    try {
      std::lock_guard<std::recursive_mutex> running(run_mutex_);
      op.run();
      return;
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "a non-standard exception";
    }
#if !MUTANT(FAILURE_SYNCHRONIZE)
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_operation_.empty()) {
      failed_operation_ = op.name;
      failure_message_ = failure;
    }
#endif
  }

#if TOY_ASYNC
  void run_worker() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and everything enqueued has run
      Operation op = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      run(op);
      op = Operation{};  // may release another queue: not under our lock
      lock.lock();
      ++completed_;
      done_cv_.notify_all();
    }
  }
#endif

  const uint64_t id_;
  std::recursive_mutex run_mutex_;
  mutable std::mutex mutex_;
  std::shared_ptr<Recording> capture_;
  std::string failed_operation_;
  std::string failure_message_;
#if MUTANT(STREAM_ORDER)
  std::vector<Operation> deferred_;
#endif
#if TOY_ASYNC
  std::condition_variable work_cv_, done_cv_;
  std::deque<Operation> pending_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;
#endif
};

// --- streams -------------------------------------------------------------------------------------

class ToyStream final : public accgraph::StreamImpl {
 public:
  explicit ToyStream(std::shared_ptr<ToyQueue> queue) : queue_(std::move(queue)) {}

  int device() const override { return 0; }
  void* native_handle() const override { return queue_.get(); }
  void copy(void* dst, const void* src, size_t bytes) override {
    queue_->submit({"copy " + std::to_string(bytes) + " bytes",
                    [dst, src, bytes] { std::memmove(dst, src, bytes); }});
  }
  void fill(void* dst, uint8_t value, size_t bytes) override {
    queue_->submit({"fill " + std::to_string(bytes) + " bytes",
                    [dst, value, bytes] { std::memset(dst, value, bytes); }, true});
  }
  void host_call(std::function<void()> fn) override {
    queue_->submit({"host_call", std::move(fn)});
  }
  void delay(std::chrono::nanoseconds duration) override {
    queue_->submit({"delay " + std::to_string(duration.count()) + " ns", [duration] {
#if !MUTANT(CAPS_HONEST)
                      using clock = std::chrono::steady_clock;
                      constexpr auto kSpinTail = std::chrono::microseconds(200);
                      const auto deadline = clock::now() + duration;
                      if (duration > kSpinTail) std::this_thread::sleep_until(deadline - kSpinTail);
                      while (clock::now() < deadline) {
                      }
#else
                      (void)duration;
#endif
                    }});
  }
  void wait_for(accgraph::StreamImpl& other_impl) override;
  void synchronize() override {
    refuse_if_captures_forbid("synchronize");
    queue_->synchronize();
  }
  bool is_capturing() const override { return queue_->is_capturing(); }

  ToyQueue& queue() const noexcept { return *queue_; }
  const std::shared_ptr<ToyQueue>& shared_queue() const noexcept { return queue_; }

 private:
  std::shared_ptr<ToyQueue> queue_;
};

ToyStream& as_toy_stream(accgraph::StreamImpl& stream, const char* operation) {
  auto* toy_stream = dynamic_cast<ToyStream*>(&stream);
  if (toy_stream == nullptr)
    fail(ErrorCode::InvalidArgument,
         std::string(operation) + ": the stream is not a toy_mutant stream");
  return *toy_stream;
}

void ToyStream::wait_for(accgraph::StreamImpl& other_impl) {
  ToyStream& other = as_toy_stream(other_impl, "wait_for");
  if (other.queue_ == queue_) return;  // a wrapper of the same queue: already in order
  std::shared_ptr<Recording> other_capture = other.queue_->capture();
  std::shared_ptr<Recording> own_capture = queue_->capture();
  if (other_capture) {
    if (own_capture && own_capture != other_capture)
      fail(ErrorCode::InvalidState, "wait_for: one capture cannot depend on another");
#if MUTANT(FORK_JOIN_FORK)
    if (!own_capture) return;  // forgets to join the capture
#endif
    if (!own_capture) {
      other_capture->attach(queue_, queue_->id());
      queue_->set_capture(other_capture);
    }
    other_capture->merge(queue_->id(), other.queue_->id());
    return;
  }
  if (own_capture) fail(ErrorCode::InvalidState, "wait_for: a graph cannot wait for eager work");
#if TOY_ASYNC && !MUTANT(FORK_JOIN_EAGER)
  const uint64_t ticket = other.queue_->submitted();
  queue_->submit({"wait", [waited = other.queue_, ticket] { waited->wait_until(ticket); }});
#endif
  // Synchronous: everything enqueued on `other` has run already.
}

class ToyBuffer final : public accgraph::BufferImpl {
 public:
  ToyBuffer(size_t bytes, accgraph::MemoryKind kind)
      : data_(new unsigned char[bytes]()), bytes_(bytes), kind_(kind) {}
  void* data() const override { return data_.get(); }
  size_t size() const override { return bytes_; }
  accgraph::MemoryKind kind() const override { return kind_; }

 private:
  std::unique_ptr<unsigned char[]> data_;
  size_t bytes_;
  accgraph::MemoryKind kind_;
};

// --- graphs --------------------------------------------------------------------------------------

struct Pool {
  PoolId id;
};
inline constexpr uint64_t kPoolTag = 0x746f79;
using Pools = accgraph::PoolTable<Pool>;

/// A one-shot signal between launches on different workers (TOY_ASYNC only).
class Completion {
 public:
  void signal() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

std::atomic<uint64_t> next_graph_number{1};

class ToyGraph final : public accgraph::GraphImplInterface, public accgraph::UntimedReplay {
 public:
  ToyGraph(Pools& pools, const accgraph::GraphArgs& args)
      : pools_(pools), args_(args), number_(next_graph_number.fetch_add(1)) {}
  ~ToyGraph() override { detach_capture(); }

  void capture_begin(accgraph::StreamImpl& stream_impl, PoolId pool, CaptureMode mode) override {
    ToyStream& stream = as_toy_stream(stream_impl, "capture_begin");
#if MUTANT(MODE_HONOURED)
    if (mode == CaptureMode::Relaxed)
      fail(ErrorCode::Unsupported, "capture_begin: Relaxed is not really supported");
#endif
    std::shared_ptr<Pool> acquired = pools_.acquire(pool, [](PoolId id) {
      auto created = std::make_shared<Pool>();
      created->id = id;
      return created;
    });
    recording_ = std::make_shared<Recording>(stream.shared_queue(), stream.queue().id());
    capture_queue_ = stream.shared_queue();
    capture_queue_->set_capture(recording_);
    pool_ = std::move(acquired);
    last_pool_id_ = pool_->id;
    std::lock_guard<std::mutex> lock(active_captures_mutex);
    active_captures[this] = ActiveCapture{mode, std::this_thread::get_id()};
  }

  void capture_end() override {
    std::shared_ptr<Recording> recording = recording_;
    detach_capture();
#if !MUTANT(FORK_JOIN_UNJOINED)
    const std::string unjoined = recording->unjoined();
    if (!unjoined.empty()) {
      reset();
      fail(ErrorCode::InvalidState,
           "capture_end: unjoined work on " + unjoined +
               ": every stream forked into the capture must be joined back; call "
               "origin.wait(forked) before capture_end (the graph was reset)");
    }
#endif
    nodes_ = recording->take_nodes();
#if MUTANT(FORK_JOIN_JOIN)
    // Each stream's operations in turn, the origin's first: the recorded order is lost.
    const uint64_t origin = recording->origin();
    std::stable_sort(nodes_.begin(), nodes_.end(),
                     [origin](const Recording::Node& a, const Recording::Node& b) {
                       return (a.stream != origin) < (b.stream != origin);
                     });
#endif
    node_count_ = nodes_.size();
    if (debug_) {
      dump_names_.clear();
      for (const Recording::Node& node : nodes_)
        dump_names_.push_back(node.op.name + " (stream " + std::to_string(node.stream) + ")");
    }
  }

  void instantiate() override {
    auto ops = std::make_shared<std::vector<Operation>>();
#if MUTANT(GRAPH_KEEP_GRAPH)
    if (!args_.keep_graph)
#endif
      for (Recording::Node& node : nodes_)
        ops->push_back(args_.keep_graph ? node.op : std::move(node.op));
    if (!args_.keep_graph) nodes_.clear();
    auto untimed = std::make_shared<std::vector<Operation>>();
    for (const Operation& op : *ops)
#if !MUTANT(UNTIMED_SAME_WORK)
      if (!op.marker)
#endif
        untimed->push_back(op);
    untimed_ = std::move(untimed);
    executable_ = std::move(ops);
    ++instantiations_;
  }

  bool can_replay_untimed(const accgraph::StreamImpl&) const noexcept override {
#if MUTANT(LIFE_ENQUEUED)
    // Its launches read the executable when they run, so an untimed launch could run the timed
    // one's markers and hang the sampled case: this mutant breaks life.enqueued, not sampling.
    return false;
#else
    return untimed_ != nullptr;
#endif
  }

  void replay_untimed(accgraph::StreamImpl& stream_impl) override {
    std::shared_ptr<const std::vector<Operation>> timed = executable_;
    executable_ = untimed_;
    struct Restore {
      ToyGraph& graph;
      std::shared_ptr<const std::vector<Operation>> timed;
      ~Restore() { graph.executable_ = std::move(timed); }
    } restore{*this, std::move(timed)};
    replay(stream_impl);
  }

  void replay(accgraph::StreamImpl& stream_impl) override {
    ToyStream& given = as_toy_stream(stream_impl, "replay");
    ToyQueue* target = &given.queue();
#if MUTANT(LIFE_STREAM)
    // Launches where the capture ran, as long as that queue lives.
    std::shared_ptr<ToyQueue> capture_queue = launch_queue_.lock();
    if (!capture_queue)
      fail(ErrorCode::InvalidState, "replay: the stream this graph was captured on is gone");
    target = capture_queue.get();
#endif
    if (!executable_) fail(ErrorCode::InvalidState, "replay: instantiate first");
    const std::string name = "replay of toy graph " + std::to_string(number_);
#if MUTANT(LIFE_ENQUEUED)
    // Reads the executable when the launch runs, through the graph's slot: reset() may have
    // emptied it by then.
    {
      std::lock_guard<std::mutex> lock(slot_->mutex);
      slot_->ops = executable_;
    }
    auto run_all = [slot = slot_, name] {
      for (size_t i = 0;; ++i) {
        std::shared_ptr<const std::vector<Operation>> ops;
        {
          std::lock_guard<std::mutex> lock(slot->mutex);
          ops = slot->ops;
        }
        if (!ops) throw std::runtime_error(name + ": the executable is gone");
        if (i >= ops->size()) return;
        (*ops)[i].run();
      }
    };
#else
    auto run_all = [ops = executable_, name] {
      std::string first_failure;
      for (size_t i = 0; i < ops->size(); ++i) {
        try {
          (*ops)[i].run();
        } catch (const std::exception& e) {
          if (first_failure.empty())
            first_failure =
                (*ops)[i].name + " (node " + std::to_string(i) + " of a " + name + "): " + e.what();
#if MUTANT(FAILURE_REPLAY)
          break;  // the nodes after it never run
#endif
        }
      }
      if (!first_failure.empty()) throw std::runtime_error(first_failure);
    };
#endif
    if (target->is_capturing()) {
#if MUTANT(REPLAY_NESTED)
      run_all();  // runs now instead of being recorded
      return;
#endif
      target->submit({name, std::move(run_all)});
      return;
    }
#if TOY_ASYNC && !MUTANT(GRAPH_SERIAL)
    // Each launch waits for the previous launch of this graph, wherever that runs.
    auto previous = last_launch_;
    auto launch = std::make_shared<Completion>();
    target->submit({name, [run_all = std::move(run_all), previous, launch] {
                      if (previous) previous->wait();
                      struct SignalOnExit {
                        Completion& done;
                        ~SignalOnExit() { done.signal(); }
                      } signal{*launch};
                      run_all();
                    }});
    last_launch_ = std::move(launch);
#else
    target->submit({name, std::move(run_all)});
#endif
  }

  void reset() override {
#if !MUTANT(GRAPH_RESET)
    detach_capture();
#else
    forget_capture();
#endif
    recording_.reset();
    nodes_.clear();
    executable_.reset();
    untimed_.reset();
#if MUTANT(LIFE_ENQUEUED)
    {
      std::lock_guard<std::mutex> lock(slot_->mutex);
      slot_->ops.reset();
    }
#endif
    dump_names_.clear();
    pool_.reset();
#if MUTANT(GRAPH_POOL)
    last_pool_id_ = PoolId{};
#endif
    node_count_ = 0;
  }

  PoolId pool() const override { return pool_ ? pool_->id : last_pool_id_; }
  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    if (!debug_ || node_count_ != dump_names_.size())
      fail(ErrorCode::InvalidState,
           "debug_dump: the toy graph kept no operation names: call enable_debug_mode() before "
           "capture_begin");
    std::ofstream out(path);
    if (!out)
      throw accgraph::Error(
          ErrorCode::BackendError,
          "debug_dump: cannot open '" + path + "' for writing: " + std::strerror(errno),
          kBackendName, "std::ofstream");
#if !MUTANT(GRAPH_DEBUG_DUMP)
    out << "toy graph " << number_ << ": " << dump_names_.size() << " operations\n";
    for (size_t i = 0; i < dump_names_.size(); ++i)
      out << "  " << i << ": " << dump_names_[i] << "\n";
#endif
  }

  accgraph::GraphStats stats() const override {
    accgraph::GraphStats s;
    s.nodes = node_count_;
    s.instantiations = instantiations_;
    return s;
  }

 private:
  void forget_capture() noexcept {
    if (capture_queue_) launch_queue_ = capture_queue_;
    capture_queue_.reset();
    std::lock_guard<std::mutex> lock(active_captures_mutex);
    active_captures.erase(this);
  }

  // Every queue that joined the capture leaves it (fork-join.leave).
  void detach_capture() noexcept {
    if (recording_ && capture_queue_) {
#if MUTANT(FORK_JOIN_LEAVE)
      if (capture_queue_->capture() == recording_) capture_queue_->set_capture(nullptr);
#else
      for (const std::shared_ptr<ToyQueue>& queue : recording_->queues())
        if (queue->capture() == recording_) queue->set_capture(nullptr);
#endif
    }
    forget_capture();
  }

  Pools& pools_;
  accgraph::GraphArgs args_;
  const uint64_t number_;
  bool debug_ = false;
  std::shared_ptr<ToyQueue> capture_queue_;  // while capturing
  std::weak_ptr<ToyQueue> launch_queue_;     // M_LIFE_STREAM only
  std::shared_ptr<Recording> recording_;     // while capturing
  std::vector<Recording::Node> nodes_;       // after capture_end, until instantiate
  std::shared_ptr<const std::vector<Operation>> executable_;
  std::shared_ptr<const std::vector<Operation>> untimed_;  // executable_ without the markers
  std::shared_ptr<Completion> last_launch_;  // TOY_ASYNC: orders launches
  struct ExecutableSlot {
    std::mutex mutex;
    std::shared_ptr<const std::vector<Operation>> ops;
  };
  std::shared_ptr<ExecutableSlot> slot_ = std::make_shared<ExecutableSlot>();  // M_LIFE_ENQUEUED
  std::vector<std::string> dump_names_;
  std::shared_ptr<Pool> pool_;
  PoolId last_pool_id_;
  uint64_t node_count_ = 0;
  uint64_t instantiations_ = 0;
};

// --- markers -------------------------------------------------------------------------------------

uint64_t now_ns() {
  const auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
#if MUTANT(MARKER_READ)
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(since_epoch).count());
#else
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count());
#endif
}

struct MarkerRing {
  explicit MarkerRing(size_t depth) : depth(depth), slots(depth) {}
  const size_t depth;
  std::mutex mutex;
  std::condition_variable finished_cv;
  std::vector<std::vector<uint64_t>> slots;
  uint64_t started = 0;
  uint64_t current = 0;
  uint64_t finished = 0;
  std::map<uint64_t, uint64_t> current_by_queue;  // M_MARKER_BRANCHES only
};

class SteadyClockSyncMarkers final : public accgraph::TimestampMarkers {
 public:
  explicit SteadyClockSyncMarkers(size_t depth) : ring_(std::make_shared<MarkerRing>(depth)) {}

  std::string strategy() const override { return kMarkerStrategy; }
  size_t ring_depth() const override { return ring_->depth; }
  uint64_t resolution_ns() const override { return 1; }

  void begin_sequence(accgraph::StreamImpl& stream) override {
    ToyQueue& queue = as_toy_stream(stream, "begin_sequence").queue();
    queue.submit({"marker begin_sequence", [ring = ring_, id = queue.id()] {
                    std::lock_guard<std::mutex> lock(ring->mutex);
                    ring->current = ring->started++;
                    ring->current_by_queue[id] = ring->current;
                  },
                  false, true});
  }

  void record(accgraph::StreamImpl& stream, uint32_t marker) override {
    ToyQueue& queue = as_toy_stream(stream, "record").queue();
    uint64_t slot_now = 0;
    {
      std::lock_guard<std::mutex> lock(ring_->mutex);
      for (std::vector<uint64_t>& slot : ring_->slots)
        if (slot.size() <= marker) slot.resize(marker + 1);
      slot_now = ring_->started % ring_->depth;
    }
    (void)slot_now;
    queue.submit(
        {"marker " + std::to_string(marker), [ring = ring_, marker, slot_now, id = queue.id()] {
           const uint64_t time = now_ns();
           std::lock_guard<std::mutex> lock(ring->mutex);
#if MUTANT(MARKER_SLOT)
           const uint64_t slot = slot_now;  // chosen at record(), i.e. at capture time
           (void)id;
#elif MUTANT(MARKER_BRANCHES)
                    const uint64_t slot = ring->current_by_queue[id] % ring->depth;
                    (void)slot_now;
#else
                    const uint64_t slot = ring->current % ring->depth;
                    (void)slot_now;
                    (void)id;
#endif
           ring->slots[slot][marker] = time;
         },
         false, true});
  }

  void end_sequence(accgraph::StreamImpl& stream) override {
    as_toy_stream(stream, "end_sequence").queue().submit({"marker end_sequence", [ring = ring_] {
                                                            {
                                                              std::lock_guard<std::mutex> lock(
                                                                  ring->mutex);
                                                              ring->finished = ring->current + 1;
                                                            }
                                                            ring->finished_cv.notify_all();
                                                          },
                                                          false, true});
  }

  bool is_complete(uint64_t sequence) override {
    std::lock_guard<std::mutex> lock(ring_->mutex);
#if MUTANT(MARKER_COMPLETE)
    return ring_->started > sequence;
#else
    return ring_->finished > sequence;
#endif
  }

  void wait(uint64_t sequence) override {
    std::unique_lock<std::mutex> lock(ring_->mutex);
    ring_->finished_cv.wait(lock, [&] { return ring_->finished > sequence; });
  }

  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    std::lock_guard<std::mutex> lock(ring_->mutex);
    if (ring_->finished <= sequence)
      fail(ErrorCode::InvalidState,
           "read: marker sequence " + std::to_string(sequence) + " has not finished");
    const std::vector<uint64_t>& slot = ring_->slots[sequence % ring_->depth];
    if (count > slot.size())
      fail(ErrorCode::InvalidArgument, "read: more markers asked for than were recorded");
    std::copy(slot.begin(), slot.begin() + static_cast<std::ptrdiff_t>(count), times);
  }

 private:
  std::shared_ptr<MarkerRing> ring_;
};

// --- the backend ---------------------------------------------------------------------------------

class ToyBackend final : public accgraph::Backend, public accgraph::ClockSampling {
 public:
  std::string name() const override { return kBackendName; }
  std::vector<accgraph::DeviceInfo> devices() const override {
    return {accgraph::DeviceInfo{0, "toy_mutant device"}};
  }

  accgraph::Capabilities capabilities(int) const override {
    accgraph::Capabilities caps;
    caps.capture_modes = {CaptureMode::Global, CaptureMode::ThreadLocal, CaptureMode::Relaxed};
    caps.multi_stream_capture = true;
    caps.host_calls = true;
    caps.timed_delay = true;
    caps.graph_update = false;
    caps.pool_sharing = true;
    caps.marker_strategies = {kMarkerStrategy};
    caps.marker_ring_depth = kDefaultRingDepth;
    caps.timer_resolution_ns = 1;
    return caps;
  }

  std::unique_ptr<accgraph::StreamImpl> create_stream(int) override {
    auto queue = std::make_shared<ToyQueue>();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = queues_.begin(); it != queues_.end();)
      it = it->second.expired() ? queues_.erase(it) : std::next(it);
    queues_[queue.get()] = queue;
    return std::make_unique<ToyStream>(std::move(queue));
  }

  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int, void* native_handle) override {
    std::shared_ptr<ToyQueue> queue;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = queues_.find(native_handle);
      if (it != queues_.end()) queue = it->second.lock();
    }
    if (!queue)
      fail(ErrorCode::InvalidArgument, "wrap_stream: the handle is not a live toy_mutant queue");
#if MUTANT(STREAM_WRAP)
    return create_stream(0);  // a new queue, not the one behind the handle
#else
    return std::make_unique<ToyStream>(std::move(queue));
#endif
  }

  std::unique_ptr<accgraph::BufferImpl> allocate(int, size_t bytes,
                                                 accgraph::MemoryKind kind) override {
    refuse_if_captures_forbid("allocate");
    return std::make_unique<ToyBuffer>(bytes, kind);
  }

  std::unique_ptr<accgraph::GraphImplInterface> create_graph(
      const accgraph::GraphArgs& args) override {
    return std::make_unique<ToyGraph>(pools_, args);
  }

  std::unique_ptr<accgraph::TimestampMarkers> create_markers(
      int, const accgraph::MarkerOptions& options) override {
    options.resolve_strategy({kMarkerStrategy}, kBackendName);
#if MUTANT(MARKER_OPTIONS)
    return std::make_unique<SteadyClockSyncMarkers>(kDefaultRingDepth);
#else
    return std::make_unique<SteadyClockSyncMarkers>(
        options.resolve_ring_depth(kDefaultRingDepth, kMaxRingDepth, kBackendName));
#endif
  }

  void sample_clock(int, accgraph::timing::ClockSample* samples, size_t count) override {
#if MUTANT(CLOCK_SAMPLE)
    for (size_t i = 0; i < count; ++i) {  // the host's wall clock, not steady_clock
      const auto now =
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
      samples[i] = {now, now, now};
    }
#else
    accgraph::sample_steady_clock(samples, count);
#endif
  }

 private:
  std::mutex mutex_;
  std::map<void*, std::weak_ptr<ToyQueue>> queues_;
  Pools pools_{kBackendName, kPoolTag};
};

}  // namespace toy

// Priority -10: below every built-in backend, so loading a mutant never changes the default.
#define TOY_TEXT2(x) #x
#define TOY_TEXT(x) TOY_TEXT2(x)
ACCGRAPH_DEFINE_PLUGIN("toy_mutant", -10, "mutant " TOY_TEXT(ACCGRAPH_MUTANT),
                       std::make_unique<toy::ToyBackend>())
