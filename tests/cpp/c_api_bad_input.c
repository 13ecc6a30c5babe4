/* c_api_bad_input: every kind of bad input through the C API must give a status with the expected
   code, never a crash: null, wrong-kind and freed handles, wrong counts, sizes and dtypes, output
   buffers too small, unknown names, a future API version, and truncated and corrupted copies of a
   program file.

     c_api_bad_input program.kiln [corrupt copies]

   program.kiln is a valid program whose "forward" method takes one float32 input and has one
   output. Prints one line per case that did not give its expected code and a summary
   ("N cases, 0 unexpected"); exits 1 if any case was unexpected.

   C99 that is also valid C++: tests/test_c_api.py compiles it as C against the installed wheel,
   and the sanitized builds of tests/test_sanitizers.py (which configure only a C++ compiler)
   compile it as C++, linked with the runtime's objects, under ASan and UBSan. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign in C99 */

#include <kiln/c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kiln_api* api;
static int cases, unexpected;

/* Checks that `status` has the code `want` (and, when `fragment` is not NULL, a message containing it). */
static void expect(const char* what, kiln_status* status, kiln_code want, const char* fragment) {
  kiln_code got = api->status_code(status);
  const char* message = api->status_message(status);
  ++cases;
  if (got != want || (fragment != NULL && strstr(message, fragment) == NULL)) {
    ++unexpected;
    printf("UNEXPECTED %s: %s (%s), want %s%s%s\n", what, api->code_name(got), message, api->code_name(want),
           fragment ? " with " : "", fragment ? fragment : "");
  }
  api->status_free(status);
}

/* Records a case whose outcome is wrong in a way expect() cannot see (a value, not a code). */
static void wrong(const char* what) {
  ++cases;
  ++unexpected;
  printf("UNEXPECTED %s\n", what);
}

static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  unsigned char* data = NULL;
  long n;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
    data = (unsigned char*)malloc((size_t)n);
    if (data != NULL && fread(data, 1, (size_t)n, f) != (size_t)n) {
      free(data);
      data = NULL;
    }
    *size = (size_t)n;
  }
  fclose(f);
  return data;
}

static void library_and_options(void) {
  kiln_load_options* options = NULL;
  kiln_program* program = NULL;
  kiln_status* st = NULL;
  int32_t threads;
  expect("get_api(99)", (kiln_get_api_base()->get_api(99, &st) == NULL ? st : NULL), KILN_ERROR_ABI_MISMATCH,
         "version 99 was asked for");
  expect("get_api(0)", (kiln_get_api_base()->get_api(0, &st) == NULL ? st : NULL), KILN_ERROR_ABI_MISMATCH, NULL);
  expect("build_info(NULL)", api->build_info(NULL), KILN_ERROR_INVALID_ARGUMENT, NULL);
  expect("num_threads(NULL)", api->num_threads(NULL), KILN_ERROR_INVALID_ARGUMENT, NULL);
  expect("num_threads", api->num_threads(&threads), KILN_OK, NULL);
  expect("set_num_threads(1 << 20)", api->set_num_threads(1 << 20), KILN_ERROR_INVALID_ARGUMENT, "at most");
  expect("load_library(NULL)", api->load_library(NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT, NULL);
  expect("load_library(missing)", api->load_library("/nonexistent/libnothing.so", NULL, NULL), KILN_ERROR_NOT_FOUND,
         NULL);
  expect("program_load(NULL)", api->program_load(NULL, NULL, &program), KILN_ERROR_INVALID_ARGUMENT,
         "program_load: path is NULL");
  expect("program_load(missing)", api->program_load("/nonexistent/model.kiln", NULL, &program), KILN_ERROR_NOT_FOUND,
         NULL);
  expect("program_load(no out)", api->program_load("x.kiln", NULL, NULL), KILN_ERROR_INVALID_ARGUMENT, "out");
  expect("program_load_from_copy(NULL, 10)", api->program_load_from_copy(NULL, 10, NULL, &program),
         KILN_ERROR_INVALID_ARGUMENT, NULL);
  expect("program_load_from_copy(empty)", api->program_load_from_copy("", 0, NULL, &program),
         KILN_ERROR_INVALID_PROGRAM, NULL);
  expect("load_options_set_kernels(NULL)", api->load_options_set_kernels(NULL, "portable"), KILN_ERROR_INVALID_ARGUMENT,
         "load_options_set_kernels: options is NULL");
  expect("load_options_create", api->load_options_create(&options), KILN_OK, NULL);
  expect("options as a program", api->program_method_count((const kiln_program*)(const void*)options, NULL),
         KILN_ERROR_INVALID_ARGUMENT, "not a kiln_program");
  api->load_options_free(options);
  expect("freed options", api->load_options_set_isa(options, "avx2"), KILN_ERROR_INVALID_ARGUMENT, "already freed");
  api->load_options_free(options); /* a second free is a no-op */
  api->program_free(NULL);
  api->method_free(NULL);
  api->tensor_free(NULL);
  api->status_free(NULL);
}

static void tensors(void) {
  float buffer[12];
  int64_t sizes[KILN_MAX_DIMS + 1] = {3, 4, 1, 1, 1, 1, 1, 1, 1};
  int64_t negative[2] = {3, -4};
  int64_t huge[4] = {1 << 30, 1 << 30, 1 << 30, 1 << 30};
  int64_t got[1];
  size_t ndim = 0;
  kiln_tensor* t = NULL;
  void* data;
  expect("view: capacity too small", api->tensor_create_view(buffer, 8, KILN_DTYPE_FLOAT32, sizes, 2, &t),
         KILN_ERROR_INVALID_ARGUMENT, "48 bytes");
  expect("view: bad dtype", api->tensor_create_view(buffer, sizeof(buffer), 42, sizes, 2, &t),
         KILN_ERROR_INVALID_ARGUMENT, "dtype 42");
  expect("view: 9 dims", api->tensor_create_view(buffer, sizeof(buffer), KILN_DTYPE_FLOAT32, sizes, 9, &t),
         KILN_ERROR_INVALID_ARGUMENT, "at most 8");
  expect("view: negative size", api->tensor_create_view(buffer, sizeof(buffer), KILN_DTYPE_FLOAT32, negative, 2, &t),
         KILN_ERROR_INVALID_ARGUMENT, "negative");
  expect("view: NULL sizes", api->tensor_create_view(buffer, sizeof(buffer), KILN_DTYPE_FLOAT32, NULL, 2, &t),
         KILN_ERROR_INVALID_ARGUMENT, "sizes");
  expect("view: NULL data", api->tensor_create_view(NULL, 48, KILN_DTYPE_FLOAT32, sizes, 2, &t),
         KILN_ERROR_INVALID_ARGUMENT, "data");
  expect("create: overflow", api->tensor_create(KILN_DTYPE_FLOAT64, huge, 4, &t), KILN_ERROR_INVALID_ARGUMENT,
         "overflow");
  expect("create: no out", api->tensor_create(KILN_DTYPE_FLOAT32, sizes, 2, NULL), KILN_ERROR_INVALID_ARGUMENT, NULL);
  expect("create", api->tensor_create(KILN_DTYPE_FLOAT32, sizes, 2, &t), KILN_OK, NULL);
  expect("sizes: one slot of two", api->tensor_sizes(t, got, 1, &ndim), KILN_OK, NULL);
  if (ndim != 2 || got[0] != 3) wrong("tensor_sizes gave the wrong rank or size");
  expect("data: NULL out", api->tensor_data(t, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT, NULL);
  api->tensor_free(t);
  expect("freed tensor", api->tensor_data(t, &data, NULL), KILN_ERROR_INVALID_ARGUMENT, "already freed");
  api->tensor_free(t);
}

static void runs(const kiln_program* program) {
  kiln_method* method = NULL;
  kiln_tensor* input = NULL;
  kiln_tensor* wrong_dtype = NULL;
  kiln_tensor* wrong_sizes = NULL;
  kiln_tensor* small = NULL;
  kiln_tensor* outputs[8] = {NULL};
  size_t num_outputs = 0;
  const kiln_tensor* inputs[2];
  kiln_tensor_spec spec;
  int64_t one = 1;
  int64_t bigger[KILN_MAX_DIMS];
  size_t n, i;
  const char* name;

  expect("program_method_name out of range", api->program_method_name(program, 1000, &name),
         KILN_ERROR_INVALID_ARGUMENT, "method 1000");
  expect("load_method(missing)", api->program_load_method(program, "no_such_method", &method), KILN_ERROR_NOT_FOUND,
         NULL);
  expect("load_method(NULL name)", api->program_load_method(program, NULL, &method), KILN_ERROR_INVALID_ARGUMENT, NULL);
  expect("load_method", api->program_load_method(program, "forward", &method), KILN_OK, NULL);
  if (method == NULL) return;
  expect("tensor_count: bad kind", api->method_tensor_count(method, 7, &n), KILN_ERROR_INVALID_ARGUMENT,
         "method_tensor_count: kind 7");
  expect("output count", api->method_tensor_count(method, KILN_SPEC_OUTPUT, &num_outputs), KILN_OK, NULL);
  if (num_outputs < 1 || num_outputs > 8) {
    wrong("the program should have 1 to 8 outputs");
    api->method_free(method);
    return;
  }
  spec.struct_size = 0;
  expect("spec: struct_size unset", api->method_tensor_spec(method, KILN_SPEC_INPUT, 0, &spec),
         KILN_ERROR_INVALID_ARGUMENT, "struct_size");
  spec.struct_size = sizeof(spec);
  expect("spec: index", api->method_tensor_spec(method, KILN_SPEC_INPUT, 5, &spec), KILN_ERROR_INVALID_ARGUMENT,
         "tensor 5");
  /* A caller whose struct is shorter (an older header) gets only what fits. */
  spec.struct_size = offsetof(kiln_tensor_spec, dtype);
  spec.dtype = -7;
  expect("spec: short struct", api->method_tensor_spec(method, KILN_SPEC_INPUT, 0, &spec), KILN_OK, NULL);
  if (spec.dtype != -7) wrong("method_tensor_spec wrote past struct_size");
  spec.struct_size = sizeof(spec);
  expect("spec", api->method_tensor_spec(method, KILN_SPEC_INPUT, 0, &spec), KILN_OK, NULL);

  expect("input", api->tensor_create(spec.dtype, spec.max_sizes, (size_t)spec.ndim, &input), KILN_OK, NULL);
  expect("i32 input", api->tensor_create(KILN_DTYPE_INT32, spec.max_sizes, (size_t)spec.ndim, &wrong_dtype), KILN_OK,
         NULL);
  memcpy(bigger, spec.max_sizes, (size_t)spec.ndim * sizeof(int64_t));
  bigger[0] += 1;
  expect("bigger input", api->tensor_create(spec.dtype, bigger, (size_t)spec.ndim, &wrong_sizes), KILN_OK, NULL);
  expect("one-element output", api->tensor_create(KILN_DTYPE_FLOAT32, &one, 1, &small), KILN_OK, NULL);

  inputs[0] = input;
  inputs[1] = input;
  expect("run: NULL method", api->method_run(NULL, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT, NULL);
  expect("run: two inputs", api->method_run(method, inputs, 2, outputs, num_outputs), KILN_ERROR_INVALID_INPUT,
         "got 2");
  expect("run: no outputs", api->method_run(method, inputs, 1, outputs, 0), KILN_ERROR_INVALID_ARGUMENT, "slots");
  expect("run: NULL inputs", api->method_run(method, NULL, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT,
         "inputs");
  inputs[0] = NULL;
  expect("run: NULL input", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT,
         "method_run: input 0 is NULL");
  inputs[0] = (const kiln_tensor*)(const void*)method;
  expect("run: method as input", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT,
         "not a kiln_tensor");
  inputs[0] = wrong_dtype;
  expect("run: i32 input", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_INPUT, "i32");
  inputs[0] = wrong_sizes;
  expect("run: too big an input", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_INPUT,
         NULL);
  inputs[0] = input;
  outputs[0] = small;
  expect("run: output too small", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT,
         "holds 64");
  outputs[0] = wrong_dtype;
  expect("run: i32 output", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT,
         "i32");
  outputs[0] = NULL;
  expect("run", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_OK, NULL);
  expect("reset_state", api->method_reset_state(method), KILN_OK, NULL);
  for (i = 0; i < num_outputs; ++i) {
    api->tensor_free(outputs[i]);
    outputs[i] = NULL;
  }
  /* Freed handles used again: the input, then the method itself. */
  api->tensor_free(wrong_sizes);
  inputs[0] = wrong_sizes;
  expect("run: freed input", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT,
         "already freed");
  api->method_free(method);
  inputs[0] = input;
  expect("run: freed method", api->method_run(method, inputs, 1, outputs, num_outputs), KILN_ERROR_INVALID_ARGUMENT,
         "already freed");
  expect("reset_state: freed method", api->method_reset_state(method), KILN_ERROR_INVALID_ARGUMENT, "already freed");
  for (i = 0; i < num_outputs; ++i) api->tensor_free(outputs[i]);
  api->tensor_free(input);
  api->tensor_free(wrong_dtype);
  api->tensor_free(small);
}

/* Load options the program cannot meet: a memory limit below its plan, an unknown ISA level. */
static void limits(const unsigned char* data, size_t size) {
  kiln_load_options* options = NULL;
  kiln_program* program = NULL;
  kiln_method* method = NULL;
  kiln_status* st;
  expect("load_options_create", api->load_options_create(&options), KILN_OK, NULL);
  expect("set_max_memory", api->load_options_set_max_memory(options, 1), KILN_OK, NULL);
  st = api->program_load_from_copy(data, size, options, &program);
  if (st == NULL) st = api->program_load_method(program, "forward", &method);
  expect("a memory limit of 1 byte", st, KILN_ERROR_OUT_OF_MEMORY, "limit of 1 bytes");
  api->method_free(method);
  api->program_free(program);
  program = NULL;
  method = NULL;
  expect("set_max_memory", api->load_options_set_max_memory(options, (uint64_t)1 << 32), KILN_OK, NULL);
  expect("set_isa", api->load_options_set_isa(options, "nonsense"), KILN_OK, NULL);
  st = api->program_load_from_copy(data, size, options, &program);
  if (st == NULL) st = api->program_load_method(program, "forward", &method);
  expect("an unknown ISA level", st, KILN_ERROR_INVALID_ARGUMENT, "nonsense");
  api->method_free(method);
  api->program_free(program);
  api->load_options_free(options);
}

/* Caller bytes borrowed in place (64-byte aligned) or copied (not aligned): both load and serve a
   method, and the borrowed ones are only freed after the program. */
static void caller_bytes(const unsigned char* data, size_t size) {
  void* aligned = NULL;
  unsigned char* shifted = (unsigned char*)malloc(size + 1);
  int pass;
  if (posix_memalign(&aligned, 64, size) != 0 || shifted == NULL) {
    wrong("no memory for the copies of the program");
    free(shifted);
    return;
  }
  memcpy(aligned, data, size);
  memcpy(shifted + 1, data, size);
  for (pass = 0; pass < 2; ++pass) {
    kiln_program* program = NULL;
    kiln_method* method = NULL;
    kiln_status* st = api->program_load_from_buffer(pass ? (const void*)(shifted + 1) : aligned, size, NULL, &program);
    if (st == NULL) st = api->program_load_method(program, "forward", &method);
    expect(pass ? "load_from_buffer (misaligned: copied)" : "load_from_buffer (aligned: borrowed)", st, KILN_OK, NULL);
    api->method_free(method);
    api->program_free(program);
  }
  free(aligned);
  free(shifted);
}

/* Truncated and corrupted copies: each must load and run, or be refused, never crash. */
static void hostile_copies(const unsigned char* data, size_t size, int copies) {
  unsigned char* copy = (unsigned char*)malloc(size);
  unsigned seed = 12345;
  int c, loaded = 0, refused = 0;
  size_t n;
  if (copy == NULL) return;
  for (n = 0; n < size; n += size / 50 + 1) {
    kiln_program* program = NULL;
    kiln_status* st = api->program_load_from_copy(data, n, NULL, &program);
    ++cases;
    if (st == NULL || program != NULL) {
      ++unexpected;
      printf("UNEXPECTED a copy truncated to %zu of %zu bytes loaded\n", n, size);
    }
    api->program_free(program);
    api->status_free(st);
  }
  for (c = 0; c < copies; ++c) {
    kiln_program* program = NULL;
    kiln_method* method = NULL;
    kiln_status* st;
    int flips;
    memcpy(copy, data, size);
    for (flips = 0; flips < 1 + c % 4; ++flips) {
      seed = seed * 1103515245u + 12345u;
      copy[(seed >> 8) % (c % 3 ? (size < 4096 ? size : 4096) : size)] ^= (unsigned char)(1 + (seed >> 24) % 255);
    }
    st = api->program_load_from_copy(copy, size, NULL, &program);
    if (st == NULL) st = api->program_load_method(program, "forward", &method);
    if (st == NULL) {
      /* Run on kiln-allocated zero inputs of the largest sizes. */
      size_t count = 0, i;
      kiln_tensor* inputs[8] = {NULL};
      kiln_tensor* outputs[8] = {NULL};
      size_t num_outputs = 0;
      st = api->method_tensor_count(method, KILN_SPEC_INPUT, &count);
      if (st == NULL) st = api->method_tensor_count(method, KILN_SPEC_OUTPUT, &num_outputs);
      int small = 1;
      for (i = 0; st == NULL && small && i < count && i < 8; ++i) {
        kiln_tensor_spec spec;
        double bytes = 8;
        int32_t d;
        spec.struct_size = sizeof(spec);
        st = api->method_tensor_spec(method, KILN_SPEC_INPUT, i, &spec);
        for (d = 0; st == NULL && d < spec.ndim; ++d) bytes *= (double)spec.max_sizes[d];
        small = bytes <= (double)(64 << 20); /* a corrupted size may be huge: the file's claim, not ours */
        if (st == NULL && small) st = api->tensor_create(spec.dtype, spec.max_sizes, (size_t)spec.ndim, &inputs[i]);
      }
      if (st == NULL && small && count <= 8 && num_outputs <= 8) {
        st = api->method_run(method, (const kiln_tensor* const*)inputs, count, outputs, num_outputs);
      }
      for (i = 0; i < 8; ++i) {
        api->tensor_free(inputs[i]);
        api->tensor_free(outputs[i]);
      }
    }
    if (st == NULL)
      ++loaded;
    else
      ++refused;
    api->status_free(st);
    api->method_free(method);
    api->program_free(program);
  }
  cases += copies;
  printf("%d corrupted copies: %d ran, %d refused\n", copies, loaded, refused);
  free(copy);
}

int main(int argc, char** argv) {
  unsigned char* data;
  size_t size = 0;
  kiln_program* program = NULL;
  kiln_status* st = NULL;
  api = kiln_get_api_base()->get_api(KILN_C_API_VERSION, &st);
  if (api == NULL || argc < 2) {
    fprintf(stderr, "usage: c_api_bad_input program.kiln [corrupt copies]\n");
    return 2;
  }
  data = read_file(argv[1], &size);
  if (data == NULL) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  library_and_options();
  tensors();
  limits(data, size);
  caller_bytes(data, size);
  expect("load", api->program_load_from_copy(data, size, NULL, &program), KILN_OK, NULL);
  if (program != NULL) {
    runs(program);
    size_t count;
    api->program_free(program);
    expect("freed program", api->program_method_count(program, &count), KILN_ERROR_INVALID_ARGUMENT, "already freed");
  }
  hostile_copies(data, size, argc > 2 ? atoi(argv[2]) : 100);
  free(data);
  printf("%d cases, %d unexpected\n", cases, unexpected);
  return unexpected == 0 ? 0 : 1;
}
