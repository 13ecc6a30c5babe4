// shared_batch LLM.kiln [REQUESTS]: one kiln::llm::BatchRunner, one worker thread calling
// step() and 8 client threads submitting REQUESTS requests in all (batch_runner.h, Threads),
// cancelling some at random (before or after they start), waiting for their own answers.
// Every answer not cancelled equals the one the same prompt gives alone (greedy), a cancelled
// one is a prefix of it, and at the end no request is queued or running. Built with
// ThreadSanitizer by tests/test_sanitizers.py.
#include <kiln/kiln.h>
#include <kiln/llm.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kClients = 8;
const char* const kPrompts[] = {"The sea", "Once upon a time", "A cat", "Numbers: 1 2 3", "Why is the sky"};

struct Answer {
  std::vector<int32_t> tokens;
  std::string reason;
  bool done = false;
};

bool is_prefix(const std::vector<int32_t>& part, const std::vector<int32_t>& whole) {
  return part.size() <= whole.size() && std::equal(part.begin(), part.end(), whole.begin());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LLM.kiln [REQUESTS]\n", argv[0]);
    return 2;
  }
  const int requests = argc > 2 ? std::atoi(argv[2]) : 64;
  kiln::llm::BatchOptions load;
  load.slots = 4;
  auto batch = kiln::llm::BatchRunner::load(argv[1], load);
  if (!batch.ok()) {
    std::fprintf(stderr, "%s\n", batch.status().to_string().c_str());
    return 1;
  }
  kiln::llm::RequestOptions options;
  options.generate.max_new_tokens = 6;
  options.generate.sampling.temperature = 0;
  options.generate.ignore_eos = true;

  // What each prompt gives alone: one request at a time.
  std::vector<std::vector<int32_t>> alone;
  for (const char* p : kPrompts) {
    auto id = batch->submit(batch->tokenizer().encode(p), options);
    std::vector<int32_t> tokens;
    std::vector<kiln::llm::TokenEvent> events;
    while (batch->active() + batch->queued() > 0) {
      events.clear();
      if (!batch->step(&events).is_ok()) return 1;
      for (auto& e : events)
        if (e.request == id.value() && e.token >= 0) tokens.push_back(e.token);
    }
    alone.push_back(tokens);
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::map<uint64_t, Answer> answers;
  std::atomic<bool> clients_done{false};
  std::thread worker([&] {
    std::vector<kiln::llm::TokenEvent> events;
    while (!clients_done.load() || batch->active() + batch->queued() > 0) {
      events.clear();
      if (!batch->step(&events).is_ok()) std::abort();
      if (events.empty()) std::this_thread::yield();
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& e : events) {
        Answer& a = answers[e.request];
        if (e.token >= 0) a.tokens.push_back(e.token);
        if (e.finished) a.done = true, a.reason = e.stats.finish_reason;
      }
      changed.notify_all();
    }
  });

  std::atomic<int> mismatches{0}, errors{0}, cancelled{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(static_cast<uint32_t>(c));
      for (int i = c; i < requests; i += kClients) {
        const size_t p = rng() % (sizeof(kPrompts) / sizeof(kPrompts[0]));
        auto id = batch->submit(batch->tokenizer().encode(kPrompts[p]), options);
        if (!id.ok()) {
          ++errors;
          continue;
        }
        const bool cancel = rng() % 4 == 0;
        if (cancel && rng() % 2 == 0) batch->cancel(id.value());  // at once: maybe still queued
        std::unique_lock<std::mutex> lock(mutex);
        if (cancel && !answers[id.value()].done) {
          lock.unlock();
          std::this_thread::yield();
          batch->cancel(id.value());
          lock.lock();
        }
        changed.wait(lock, [&] { return answers[id.value()].done; });
        const Answer& a = answers[id.value()];
        if (a.reason == "cancelled") {
          ++cancelled;
          if (!is_prefix(a.tokens, alone[p])) ++mismatches;
        } else if (a.reason != "max_new_tokens" || a.tokens != alone[p]) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  clients_done = true;
  worker.join();
  const bool empty = batch->active() == 0 && batch->queued() == 0;
  std::printf("%d requests, %d cancelled, %d mismatches, %d errors, %s\n", requests, cancelled.load(),
              mismatches.load(), errors.load(), empty ? "every slot free" : "requests left over");
  return mismatches == 0 && errors == 0 && empty ? 0 : 1;
}
