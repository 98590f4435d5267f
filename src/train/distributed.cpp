// The c10d process group and the bucketed gradient all-reduce (see recall/train/distributed.h).
#include "recall/train/distributed.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <vector>

#include "c10d.h"
#include "recall/core/error.h"
#include "recall/core/threads.h"
#include "recall/train/data_parallel.h"

namespace recall {
namespace {

// A bucket is all-reduced as one flat tensor once it holds this many bytes of gradients (the last
// may hold less): large enough that per-collective latency is small, small enough that the first
// buckets start while backward is still running.
constexpr int64_t kBucketBytes = 1 << 20;

// A rank that launch_local started ends with its launcher, even one killed outright (SIGKILL), as
// a SIGTERM: a stop request.
void follow_launcher() {
  const char* launcher = std::getenv(kLauncherPidEnv);
  if (!launcher || !*launcher) return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (std::to_string(::getppid()) != launcher) std::_Exit(128 + SIGTERM);  // it ended before that
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || errno != 0 || x < lo || x > hi)
    throw UsageError(fmt::format("{}={}: must be an integer in [{}, {}]", name, v, lo, hi));
  return static_cast<int>(x);
}

bool is_loopback(const std::string& addr) {
  return addr.rfind("127.", 0) == 0 || addr == "localhost" || addr == "::1";
}

// "rank 3", "ranks 1, 4-6": the ranks in `ranks` (ascending), runs of them as ranges.
std::string name_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + out;
}

// The store's key that rank r saw a collective fail (set after the failure, so that the ranks
// without one are the ones that died or hung).
std::string fault_key(int r) {
  return "recall/fault/" + std::to_string(r);
}

// How long a rank that saw a collective fail waits for the others' word before it names the
// silent ones: the survivors of a dead rank notice within a few ms of each other, those of a hung
// rank within the same timeout.
constexpr std::chrono::milliseconds kFaultGrace{2000};

}  // namespace

std::string joined_key(int rank) {
  return "recall/joined/" + std::to_string(rank);
}

DistEnv dist_env_from_environment() {
  DistEnv e;
  e.world_size = env_int("WORLD_SIZE", 1, 1, 1 << 16);
  if (e.world_size == 1) return e;
  if (!std::getenv("RANK"))
    throw UsageError(fmt::format("WORLD_SIZE={} but RANK is not set; set RANK to 0..{}",
                                 e.world_size, e.world_size - 1));
  e.rank = env_int("RANK", 0, 0, e.world_size - 1);
  // Without LOCAL_WORLD_SIZE, LOCAL_RANK cannot be checked nor the cores shared out, and no
  // default fits every host; both unset is one process on this host (the README's example).
  const char* lr = std::getenv("LOCAL_RANK");
  const char* lws = std::getenv("LOCAL_WORLD_SIZE");
  if ((lr && *lr) != (lws && *lws))
    throw UsageError(fmt::format(
        "{} is set but {} is not: set both (as torchrun does: this host's number of processes "
        "and this one's index among them) or neither (one process on this host)",
        lr && *lr ? "LOCAL_RANK" : "LOCAL_WORLD_SIZE",
        lr && *lr ? "LOCAL_WORLD_SIZE" : "LOCAL_RANK"));
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", 1, 1, e.world_size);
  e.local_rank = env_int("LOCAL_RANK", 0, 0, e.local_world_size - 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  e.master_port = env_int("MASTER_PORT", 29500, 1, 65535);
  return e;
}

std::pair<int64_t, int64_t> batch_rows(int64_t B, int rank, int world) {
  return {B * rank / world, B * (rank + 1) / world};
}

int threads_per_local_rank() {
  const int local = env_int("LOCAL_WORLD_SIZE", 1, 1, 1 << 16);
  if (local <= 1 || std::getenv("OMP_NUM_THREADS")) return 0;  // the default decides
  return std::max(1, default_threads() / local);
}

// The process group and the gradient buckets.
class DataParallelGroup::Impl {
 public:
#ifdef RECALL_HAVE_C10D
#if TORCH_VERSION_MAJOR >= 2
  using Group = c10d::Backend;  // LibTorch 2 splits the group (dispatch) from its backends
#else
  using Group = c10d::ProcessGroup;
#endif
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Group> group;
  c10::intrusive_ptr<c10d::Work> all_reduce(torch::Tensor t) {
    std::vector<at::Tensor> tensors{std::move(t)};
    return group->allreduce(tensors);  // a sum
  }
  void wait(const c10::intrusive_ptr<c10d::Work>& work) {
    work->wait(timeout);
  }
  // After a failed collective c10d's threads may still be blocked on a peer: the group and the
  // store are left to the process's exit rather than joined.
  void abandon() {
    if (group) group.release();
    if (store) store.release();
  }
  // Meeting, step 1: rank 0 serves the TCP store (unless torchrun's agent or recall's launcher
  // does), the others connect to it. `where` names this rank in messages.
  void open_store(const DistEnv& env, const std::string& where) {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(env.master_port);
    // torchrun's agent (and --nproc, RunStore) serve the store themselves and say so
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    so.isServer = env.rank == 0 && !(agent && std::string(agent) == "True");
    so.numWorkers = static_cast<std::size_t>(env.world_size);
    so.waitWorkers = false;  // the ranks meet below, where the missing ones can be named
    so.timeout = timeout;    // a client's connect retries until then
#if TORCH_VERSION_MAJOR >= 2
    so.useLibUV = false;  // the classic server: the same one in every LibTorch
#endif
    try {
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    } catch (const std::exception& e) {
      if (env.rank == 0) throw;  // it serves the store: the port is taken, say
      std::string msg = e.what();
      if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
      throw DistributedError(fmt::format(
          "{}: rank 0 did not come within {} s (its store cannot be reached: {}); check that it "
          "is started with the same MASTER_ADDR:MASTER_PORT",
          where, timeout.count() / 1000.0, msg));
    }
  }

  // Step 2: every rank marks itself present and waits for all others' marks until the deadline.
  void wait_for_ranks(const DistEnv& env, std::chrono::steady_clock::time_point deadline,
                      const std::string& where) {
    store->set(joined_key(env.rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r = 0; r < env.world_size; ++r) keys.push_back(joined_key(r));
    while (!store->check(keys)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::vector<int> missing;
        for (int r = 0; r < env.world_size; ++r)
          if (!store->check({joined_key(r)})) missing.push_back(r);
        throw DistributedError(fmt::format(
            "{}: {} did not join within {} s; check that all {} are started with the same "
            "MASTER_ADDR:MASTER_PORT",
            where, name_ranks(missing), timeout.count() / 1000.0, env.world_size));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // After a failed collective: which ranks died or hung. This rank leaves word in the store and
  // waits up to kFaultGrace for every other rank's; the silent ones are named. A store that cannot
  // be reached names whoever serves it: rank 0, or the launcher.
  std::string silent_ranks(const DistEnv& env) {
    try {
      store->setTimeout(kFaultGrace);
      store->set(fault_key(env.rank), std::vector<uint8_t>{1});
      const auto deadline = std::chrono::steady_clock::now() + kFaultGrace;
      std::vector<int> silent;
      for (;;) {
        silent.clear();
        for (int r = 0; r < env.world_size; ++r)
          if (!store->check({fault_key(r)})) silent.push_back(r);
        if (silent.empty() || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (silent.empty()) return "every rank saw it fail: the network between them failed";
      return fmt::format("{} died or hung (no word from {} within {} s of the failure)",
                         name_ranks(silent), silent.size() == 1 ? "it" : "them",
                         kFaultGrace.count() / 1000.0);
    } catch (const std::exception&) {
      const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
      return agent && std::string(agent) == "True"
                 ? "the launcher that serves the store died or hung (it cannot be reached)"
                 : "rank 0 died or hung (the store it serves cannot be reached)";
    }
  }

  // Step 3: the process group over the store, NCCL for a CUDA device and Gloo for the CPU.
  void open_group(const DistEnv& env, const torch::Device& device) {
    if (device.is_cuda()) {
#ifdef RECALL_HAVE_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, opts);
#else
      throw UsageError(
          "distributed training on CUDA needs a build with CUDA and NCCL; this one has neither");
#endif
    } else {
#ifdef RECALL_HAVE_GLOO
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      opts->devices.push_back(ifname && *ifname
                                  ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                              : is_loopback(env.master_addr)
                                  ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
      group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
#else
      throw UsageError(
          "distributed training on the CPU needs Gloo; this build has none (install "
          "libgloo-dev and rebuild)");
#endif
    }
  }
#endif
  std::chrono::milliseconds timeout{0};
  bool failed = false;

  struct Bucket {
    std::vector<size_t> params;   // indices into model->parameters()
    std::vector<int64_t> offset;  // of each in flat
    torch::Tensor flat;           // (numel,)
    size_t pending = 0;           // gradients not yet copied in this step
#ifdef RECALL_HAVE_C10D
    c10::intrusive_ptr<c10d::Work> work;
#endif
  };
  std::vector<torch::Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of, slot_of;
  std::vector<char> have;  // param i got a gradient this step
  size_t next = 0;         // the first bucket not launched

  void build(const std::vector<torch::Tensor>& ps) {
    params = ps;
    bucket_of.assign(ps.size(), 0);
    slot_of.assign(ps.size(), 0);
    Bucket b;
    int64_t bytes = 0;
    auto close = [&] {
      if (b.params.empty()) return;
      const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
      b.flat = torch::zeros({n}, ps[b.params[0]].options());
      buckets.push_back(std::move(b));
      b = Bucket{};
      bytes = 0;
    };
    for (size_t k = ps.size(); k-- > 0;) {  // backward produces the last layers' gradients first
      check_arg(ps[k].scalar_type() == torch::kFloat,
                "distributed training: parameters must be float32");
      bucket_of[k] = buckets.size();
      slot_of[k] = b.params.size();
      b.params.push_back(k);
      b.offset.push_back(bytes / static_cast<int64_t>(sizeof(float)));
      bytes += ps[k].numel() * static_cast<int64_t>(sizeof(float));
      if (bytes >= kBucketBytes) close();
    }
    close();
  }

  void begin() {
    have.assign(params.size(), 0);
    for (auto& b : buckets) b.pending = b.params.size();
    next = 0;
  }

  void ready(size_t i, const torch::Tensor& g) {
    torch::NoGradGuard no_grad;
    Bucket& b = buckets[bucket_of[i]];
    const int64_t at = b.offset[slot_of[i]];
    b.flat.slice(0, at, at + g.numel()).copy_(g.reshape({-1}));
    have[i] = 1;
    --b.pending;
    launch_ready();
  }

  // In bucket order, so every rank issues the same collectives in the same order.
  void launch_ready() {
    while (next < buckets.size() && buckets[next].pending == 0) launch(buckets[next++]);
  }

  void launch(Bucket& b) {
#ifdef RECALL_HAVE_C10D
    b.work = all_reduce(b.flat);
#endif
  }
};

DataParallelGroup::DataParallelGroup(const DistEnv& env, std::chrono::milliseconds timeout,
                                     torch::Device device)
    : env_(env) {
  follow_launcher();
  if (env.world_size <= 1) return;
  impl_ = std::make_unique<Impl>();
  impl_->timeout = timeout;
#ifndef RECALL_HAVE_C10D
  (void)device;
  throw UsageError(fmt::format(
      "WORLD_SIZE={}: this build of recall has no c10d backend (Gloo's headers, Debian's "
      "libgloo-dev, were missing when it was configured); install it and rebuild, or run one "
      "process",
      env.world_size));
#else
  const std::string where = fmt::format("rank {} of {} (store {}:{})", env.rank, env.world_size,
                                        env.master_addr, env.master_port);
  // One deadline for the whole meeting: c10d's own waits (the store's wait for its workers, then
  // Gloo's rendezvous) each take the full timeout, so a rank that never comes held the others
  // for twice it.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // c10d logs a failed meeting (a client's connect timing out) on stderr beside the one line of
  // the error below that says it: quiet (fatal only) while the ranks meet.
  struct QuietC10d {
    int saved = FLAGS_caffe2_log_level;
    QuietC10d() { FLAGS_caffe2_log_level = 3; }
    ~QuietC10d() { FLAGS_caffe2_log_level = saved; }
  } quiet;
  try {
    impl_->open_store(env, where);
    impl_->wait_for_ranks(env, deadline, where);
    impl_->open_group(env, device);
  } catch (const std::invalid_argument&) {
    impl_->abandon();
    throw;
  } catch (const DistributedError&) {
    impl_->abandon();
    throw;
  } catch (const std::exception& e) {
    impl_->abandon();
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    throw DistributedError(fmt::format(
        "{}: the ranks did not meet within {} s ({}); check that all {} are started with the "
        "same MASTER_ADDR:MASTER_PORT",
        where, timeout.count() / 1000.0, msg, env.world_size));
  }
#endif
}

DataParallelGroup::~DataParallelGroup() {
#ifdef RECALL_HAVE_C10D
  if (impl_ && impl_->failed) impl_->abandon();
#endif
}

double DataParallelGroup::backward(Transformer& model, const Batch& global, int workers, int stop,
                                   StepProfile* profile) {
  if (!distributed()) {
    agreed_stop_ = stop;
    return data_parallel_backward(model, global, workers, 0, {}, profile);
  }
  check_arg(global.x.size(0) >= env_.world_size,
            fmt::format("batch_size = {}: must be at least the number of processes ({})",
                        global.x.size(0), env_.world_size));
  Impl& im = *impl_;
  if (im.params.empty()) im.build(model->parameters());
  const int64_t scored = global.mask.sum().item<int64_t>();
  const auto rows = batch_rows(global.x.size(0), env_.rank, env_.world_size);  // [first, last)
  auto slice = [&](const torch::Tensor& t) { return t.slice(0, rows.first, rows.second); };
  const Batch mine{slice(global.x), slice(global.y), slice(global.mask)};
  im.begin();
  const double loss = data_parallel_backward(
      model, mine, workers, scored, [&im](size_t i, const torch::Tensor& g) { im.ready(i, g); },
      profile);
#ifdef RECALL_HAVE_C10D
  try {
    // Parameters without a gradient (unused by this model) are all-reduced as zeros, and left
    // without one below, as in one process.
    for (size_t k = im.next; k < im.buckets.size(); ++k) {
      auto& b = im.buckets[k];
      for (size_t s = 0; s < b.params.size(); ++s)
        if (!im.have[b.params[s]]) {
          const int64_t at = b.offset[s];
          b.flat.slice(0, at, at + im.params[b.params[s]].numel()).zero_();
          b.pending = 0;
        }
    }
    im.launch_ready();
    // The loss and every rank's stop request, summed: slot 1 + r holds rank r's.
    auto small = torch::zeros({1 + env_.world_size}, torch::kDouble);
    small[0] = loss;
    small[1 + env_.rank] = stop;
    if (model->parameters()[0].is_cuda()) small = small.to(torch::kFloat).cuda();
    auto small_work = im.all_reduce(small);
    for (auto& b : im.buckets) im.wait(b.work);
    im.wait(small_work);
    small = small.to(torch::kCPU, torch::kDouble);
    agreed_stop_ = 0;
    for (int r = 0; r < env_.world_size && agreed_stop_ == 0; ++r)
      agreed_stop_ = static_cast<int>(small[1 + r].item<double>());
    torch::NoGradGuard no_grad;
    for (auto& b : im.buckets)
      for (size_t s = 0; s < b.params.size(); ++s) {
        const size_t i = b.params[s];
        if (!im.have[i]) continue;
        auto& p = im.params[i];
        p.mutable_grad() = b.flat.slice(0, b.offset[s], b.offset[s] + p.numel()).view_as(p);
      }
    return small[0].item<double>();
  } catch (const std::exception& e) {
    im.failed = true;
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    throw DistributedError(fmt::format(
        "rank {} of {}: {}: the gradient all-reduce failed ({}; --dist-timeout {} s)", env_.rank,
        env_.world_size, im.silent_ranks(env_), msg, im.timeout.count() / 1000.0));
  }
#else
  return loss;
#endif
}

}  // namespace recall
