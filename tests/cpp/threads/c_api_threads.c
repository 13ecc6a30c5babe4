/* c_api_threads: one kiln_method shared by several threads through the C API. Every thread runs
   its own inputs (kiln-allocated outputs, or its own output tensors), and provokes errors of its
   own between calls: each must read its own outputs and its own error messages (statuses are
   values, there is no global last error), and the shared program loads methods concurrently.

     c_api_threads program.kiln [calls per thread]

   program.kiln's "forward" takes one float32 input and has no state. Prints "<n> calls,
   <m> mismatches, <e> errors"; exits 1 unless both are 0. C99 with POSIX threads, also valid C++
   (tests/test_sanitizers.py builds it as C++ under ThreadSanitizer). */
#include <kiln/c_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4

static const kiln_api* api;
static const kiln_program* program;
static kiln_method* shared;
static kiln_tensor_spec input_spec;
static size_t num_outputs;
static int calls_per_thread;

struct worker {
  int index;
  int calls, mismatches, errors;
};

static int failed(struct worker* w, kiln_status* st) {
  if (st == NULL) return 0;
  ++w->errors;
  fprintf(stderr, "thread %d: %s\n", w->index, api->status_message(st));
  api->status_free(st);
  return 1;
}

/* The outputs of `method` for an input filled with `value`, into new kiln tensors. */
static int run_with(struct worker* w, kiln_method* method, float value, kiln_tensor** outputs) {
  kiln_tensor* input = NULL;
  float* data;
  size_t i, nbytes;
  int bad;
  if (failed(w, api->tensor_create(KILN_DTYPE_FLOAT32, input_spec.max_sizes, (size_t)input_spec.ndim, &input))) {
    return 1;
  }
  if (failed(w, api->tensor_data(input, (void**)&data, &nbytes))) return 1;
  for (i = 0; i < nbytes / sizeof(float); ++i) data[i] = value + (float)(i % 7) * 0.25f;
  bad = failed(w, api->method_run(method, (const kiln_tensor* const*)&input, 1, outputs, num_outputs));
  api->tensor_free(input);
  return bad;
}

static int same(const kiln_tensor* a, const kiln_tensor* b) {
  void *pa, *pb;
  size_t na, nb;
  if (api->tensor_data(a, &pa, &na) != NULL || api->tensor_data(b, &pb, &nb) != NULL) return 0;
  return na == nb && memcmp(pa, pb, na) == 0;
}

static void free_all(kiln_tensor** t, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    api->tensor_free(t[i]);
    t[i] = NULL;
  }
}

static void* work(void* arg) {
  struct worker* w = (struct worker*)arg;
  kiln_tensor* want[8] = {NULL};
  kiln_tensor* got[8] = {NULL};
  kiln_method* own = NULL;
  const float value = 1.0f + (float)w->index;
  char expected[64];
  int c;
  /* The reference: this thread's input on a method of its own. */
  if (failed(w, api->program_load_method(program, "forward", &own)) || run_with(w, own, value, want)) return NULL;
  snprintf(expected, sizeof(expected), "method %d of", 1000 + w->index);
  for (c = 0; c < calls_per_thread; ++c) {
    const char* name;
    kiln_status* st;
    size_t i;
    ++w->calls;
    if (run_with(w, shared, value, got)) break;
    for (i = 0; i < num_outputs; ++i) w->mismatches += !same(got[i], want[i]);
    if (c % 2) free_all(got, num_outputs); /* else the next call writes into these tensors */
    /* An error of this thread's own: its message names this thread's index, whatever the others do. */
    st = api->program_method_name(program, (size_t)(1000 + w->index), &name);
    if (st == NULL || strstr(api->status_message(st), expected) == NULL) ++w->mismatches;
    api->status_free(st);
  }
  free_all(got, num_outputs);
  free_all(want, num_outputs);
  api->method_free(own);
  return NULL;
}

int main(int argc, char** argv) {
  pthread_t threads[THREADS];
  struct worker workers[THREADS];
  kiln_program* p = NULL;
  int t, calls = 0, mismatches = 0, errors = 0;
  kiln_status* st;
  api = kiln_get_api_base()->get_api(KILN_C_API_VERSION, NULL);
  if (api == NULL || argc < 2) {
    fprintf(stderr, "usage: c_api_threads program.kiln [calls per thread]\n");
    return 2;
  }
  calls_per_thread = argc > 2 ? atoi(argv[2]) : 50;
  st = api->program_load(argv[1], NULL, &p);
  if (st == NULL) st = api->program_load_method(p, "forward", &shared);
  input_spec.struct_size = sizeof(input_spec);
  if (st == NULL) st = api->method_tensor_spec(shared, KILN_SPEC_INPUT, 0, &input_spec);
  if (st == NULL) st = api->method_tensor_count(shared, KILN_SPEC_OUTPUT, &num_outputs);
  if (st != NULL || input_spec.dtype != KILN_DTYPE_FLOAT32 || num_outputs > 8) {
    fprintf(stderr, "error: %s\n", st ? api->status_message(st) : "forward must take one f32 input, <= 8 outputs");
    return 2;
  }
  program = p;
  for (t = 0; t < THREADS; ++t) {
    memset(&workers[t], 0, sizeof(workers[t]));
    workers[t].index = t;
    pthread_create(&threads[t], NULL, work, &workers[t]);
  }
  for (t = 0; t < THREADS; ++t) {
    pthread_join(threads[t], NULL);
    calls += workers[t].calls;
    mismatches += workers[t].mismatches;
    errors += workers[t].errors;
  }
  api->method_free(shared);
  api->program_free(p);
  printf("%d calls, %d mismatches, %d errors\n", calls, mismatches, errors);
  return mismatches == 0 && errors == 0 && calls == THREADS * calls_per_thread ? 0 : 1;
}
