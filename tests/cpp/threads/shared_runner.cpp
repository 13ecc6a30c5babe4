// shared_runner LLM.kiln OTHER.kiln [CALLS]: one kiln::llm::Runner and one
// kiln::Method (OTHER's forward, float inputs) shared by 8 threads for CALLS calls
// in all (runner.h and program.h, Threads). Threads generate holding the Runner
// (std::lock_guard), generate without holding it (done, or refused with Busy),
// stream pull-style letting go of the Runner between steps (superseded by
// another generation, or done), cancel and reset at random, and call the Method
// with their own inputs. Every answer is compared with the one the same prompt
// and seed give alone: equal, or a prefix of it when cancelled or superseded.
// Built with ThreadSanitizer by tests/test_sanitizers.py.
#include <kiln/kiln.h>
#include <kiln/llm.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 8;

struct Job {
  std::vector<int32_t> prompt;
  kiln::llm::GenerateOptions options;
  std::string text;             // alone
  std::vector<int32_t> tokens;  // alone
};

bool is_prefix(const std::string& part, const std::string& whole) {
  return part.size() <= whole.size() && whole.compare(0, part.size(), part) == 0;
}

bool is_prefix(const std::vector<int32_t>& part, const std::vector<int32_t>& whole) {
  return part.size() <= whole.size() && std::equal(part.begin(), part.end(), whole.begin());
}

std::atomic<int> mismatches{0}, errors{0}, busy{0}, superseded{0}, cancelled{0};
std::mutex print_mutex;

void report(std::atomic<int>& counter, const std::string& what) {
  ++counter;
  std::lock_guard<std::mutex> lock(print_mutex);
  std::fprintf(stderr, "%s\n", what.c_str());
}

std::vector<unsigned char> bytes_of(const kiln::Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data());
  return std::vector<unsigned char>(p, p + t.nbytes());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LLM.kiln OTHER.kiln [CALLS]\n", argv[0]);
    return 2;
  }
  const int calls = argc > 3 ? std::atoi(argv[3]) : 2000;
  auto loaded = kiln::llm::Runner::load(argv[1]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().to_string().c_str());
    return 1;
  }
  kiln::llm::Runner& runner = loaded.value();
  auto program = kiln::Program::load(argv[2]);
  if (!program.ok()) {
    std::fprintf(stderr, "%s\n", program.status().to_string().c_str());
    return 1;
  }
  auto loaded_method = program->load_method("forward");
  if (!loaded_method.ok()) {
    std::fprintf(stderr, "%s\n", loaded_method.status().to_string().c_str());
    return 1;
  }
  kiln::Method& method = loaded_method.value();

  // The jobs and their answers alone (a fresh cache each).
  std::vector<Job> jobs;
  for (const char* text : {"The sea", "Once upon a time", "A cat", "Why is the sky"}) {
    for (int64_t seed : {-2, 5, 6}) {
      Job job;
      job.prompt = runner.tokenizer().encode(text);
      job.options.max_new_tokens = 3;
      job.options.ignore_eos = true;
      if (seed == -2) {
        job.options.sampling.temperature = 0;
      } else {
        job.options.sampling = {2.0f, 0, 1.0f, 0.0f, 1.0f, seed};
      }
      runner.reset();
      auto answer = runner.generate_from_tokens(job.prompt, job.options);
      if (!answer.ok()) {
        std::fprintf(stderr, "alone: %s\n", answer.status().to_string().c_str());
        return 1;
      }
      job.text = answer.value();
      job.tokens = runner.generated_tokens();
      jobs.push_back(std::move(job));
    }
  }
  // Inputs of the Method and its outputs alone.
  const kiln::TensorSpec& in = method.spec().inputs.at(0);
  size_t n = 1;
  for (int64_t d : in.sizes) n *= static_cast<size_t>(d);
  std::vector<std::vector<float>> inputs(kThreads, std::vector<float>(n));
  std::vector<std::vector<unsigned char>> outputs_alone;
  for (int t = 0; t < kThreads; ++t) {
    for (size_t k = 0; k < n; ++k) inputs[t][k] = static_cast<float>(((k + 31 * t) * 7919) % 1000) / 500.0f - 1.0f;
    auto out = method.run({kiln::Tensor::view(inputs[t].data(), in.sizes)});
    if (!out.ok()) {
      std::fprintf(stderr, "method alone: %s\n", out.status().to_string().c_str());
      return 1;
    }
    outputs_alone.push_back(bytes_of(out.value()[0]));
  }

  std::atomic<int> done{0};
  auto worker = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    std::string piece;
    while (done.fetch_add(1) < calls) {
      const int op = static_cast<int>(rng() % 100);
      const Job& job = jobs[rng() % jobs.size()];
      if (op < 35) {  // the Method, holding it
        std::lock_guard<kiln::Method> turn(method);
        auto out = method.run({kiln::Tensor::view(inputs[t].data(), in.sizes)});
        if (!out.ok())
          report(errors, "method: " + out.status().to_string());
        else if (bytes_of(out.value()[0]) != outputs_alone[t])
          report(mismatches, "method: another caller's outputs");
      } else if (op < 40) {  // the Method without holding it: runs or is refused
        auto out = method.run({kiln::Tensor::view(inputs[t].data(), in.sizes)});
        if (!out.ok() && out.status().code() != kiln::Error::Busy)
          report(errors, "method: " + out.status().to_string());
        if (out.ok()) ++busy;  // ran: its outputs may be overwritten once the call returned, so they are not read
      } else if (op < 65) {    // generate holding the Runner
        std::lock_guard<kiln::llm::Runner> turn(runner);
        auto text = runner.generate_from_tokens(job.prompt, job.options);
        if (!text.ok()) {
          report(errors, "generate: " + text.status().to_string());
          continue;
        }
        const bool was_cancelled = runner.stats().finish_reason == "cancelled";
        if (was_cancelled) ++cancelled;
        if (was_cancelled ? !is_prefix(runner.generated_tokens(), job.tokens) || !is_prefix(text.value(), job.text)
                          : runner.generated_tokens() != job.tokens || text.value() != job.text) {
          report(mismatches, "generate: another answer than alone");
        }
      } else if (op < 75) {  // generate without holding it: its own answer, or Busy
        auto text = runner.generate_from_tokens(job.prompt, job.options, [&](std::string_view) {
          // A call from inside the call is refused, never run.
          kiln::Status inner = runner.begin(job.prompt, job.options);
          if (inner.code() != kiln::Error::Busy)
            report(errors, "a reentrant begin() was not refused: " + inner.to_string());
          return true;
        });
        if (!text.ok()) {
          if (text.status().code() == kiln::Error::Busy)
            ++busy;
          else
            report(errors, "unheld generate: " + text.status().to_string());
        } else if (!is_prefix(text.value(), job.text)) {
          report(mismatches, "unheld generate: another answer than alone");
        }
      } else if (op < 92) {  // pull-style, letting go of the Runner between steps
        uint64_t id;
        {
          std::lock_guard<kiln::llm::Runner> turn(runner);
          kiln::Status st = runner.begin(job.prompt, job.options);
          if (!st.is_ok()) {
            report(errors, "begin: " + st.to_string());
            continue;
          }
          id = runner.generation();
        }
        std::string text;
        bool more = true;
        while (more) {
          std::lock_guard<kiln::llm::Runner> turn(runner);
          if (runner.generation() != id) {
            ++superseded;
            break;
          }
          auto step = runner.next(&piece);
          if (!step.ok()) {
            report(errors, "next: " + step.status().to_string());
            break;
          }
          text += piece;
          more = step.value();
        }
        if (!is_prefix(text, job.text)) report(mismatches, "stream: another text than alone");
      } else if (op < 96) {
        runner.cancel();
      } else {
        runner.reset();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  std::printf(
      "%d calls (%d superseded streams, %d cancelled, %d unheld calls run or refused), %d mismatches, "
      "%d errors\n",
      calls, superseded.load(), cancelled.load(), busy.load(), mismatches.load(), errors.load());
  return mismatches.load() == 0 && errors.load() == 0 ? 0 : 1;
}
