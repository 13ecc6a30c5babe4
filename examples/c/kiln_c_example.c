/* kiln_c_example: load a .kiln program through the C API, print its methods and specs, run one.

     kiln_c_example model.kiln [--method NAME] [--input FILE] [--output FILE] [--expect FILE]
                               [--kernels TIER] [--isa LEVEL] [--threads N] [--calls N] [--reset]
                               [--caller-outputs] [--from-bytes] [--api-version N]

   Tensor files (--input, --output, --expect) hold tensors one after the other,
   each as: uint32 dtype (KILN_DTYPE_*), uint32 ndim, ndim int64 sizes, then the
   row-major bytes; every number little-endian. --input gives the method's
   inputs in order; --output writes the outputs of the last call; --expect
   compares them with a file's, byte for byte (exit 3 when they differ).
   --calls runs the method N times (state carries over unless --reset restores
   it before each call). --caller-outputs passes buffers of the outputs' largest
   sizes for the results instead of letting kiln allocate them. --from-bytes
   reads the file into memory and loads a copy. --api-version asks for another
   version of the function table (a version this library does not serve is
   refused with a message: exit 2).

   Exit codes: 0 success, 1 a kiln error (printed as "error: <kind>: <message>"),
   2 bad usage or an unserved API version, 3 outputs differ from --expect. */
#include <kiln/c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kiln_api* api;

/* Prints a failed status and frees it; returns 1 for failure, 0 for success. */
static int failed(kiln_status* status) {
  if (status == NULL) return 0;
  fprintf(stderr, "error: %s: %s\n", api->code_name(api->status_code(status)), api->status_message(status));
  api->status_free(status);
  return 1;
}

static const char* dtype_name(kiln_dtype dtype) {
  static const char* const names[] = {"f32", "f64", "i64", "i32", "bool", "f16", "bf16", "u8", "i8"};
  return dtype >= 0 && dtype < (kiln_dtype)(sizeof(names) / sizeof(names[0])) ? names[dtype] : "?";
}

static size_t dtype_size(kiln_dtype dtype) {
  static const size_t sizes[] = {4, 8, 8, 4, 1, 2, 2, 1, 1};
  return dtype >= 0 && dtype < (kiln_dtype)(sizeof(sizes) / sizeof(sizes[0])) ? sizes[dtype] : 0;
}

static void print_spec(const char* role, const kiln_tensor_spec* spec) {
  int32_t d;
  printf("  %s %s: %s[", role, spec->name, dtype_name(spec->dtype));
  for (d = 0; d < spec->ndim; ++d) {
    printf("%s%lld", d ? ", " : "", (long long)spec->max_sizes[d]);
    if (spec->dynamic_mask & (1u << d)) printf(" (>= %lld)", (long long)spec->min_sizes[d]);
  }
  printf("]\n");
}

static int print_method(const kiln_program* program, const char* name) {
  static const char* const roles[] = {"input ", "output", "state "};
  kiln_method* method = NULL;
  kiln_spec_kind kind;
  size_t i, n;
  printf("method %s\n", name);
  if (failed(api->program_load_method(program, name, &method))) return 1;
  for (kind = KILN_SPEC_INPUT; kind <= KILN_SPEC_STATE; ++kind) {
    if (failed(api->method_tensor_count(method, kind, &n))) break;
    for (i = 0; i < n; ++i) {
      kiln_tensor_spec spec;
      spec.struct_size = sizeof(spec);
      if (failed(api->method_tensor_spec(method, kind, i, &spec))) break;
      print_spec(roles[kind], &spec);
    }
  }
  api->method_free(method);
  return 0;
}

/* ---- tensor files ---- */

static int read_exact(FILE* f, void* out, size_t n) { return fread(out, 1, n, f) == n; }

/* Reads the next tensor of `f` into a new kiln-allocated tensor; 0 at the end of the file, -1 on a
   malformed file. */
static int read_tensor(FILE* f, kiln_tensor** out) {
  uint32_t header[2];
  int64_t sizes[KILN_MAX_DIMS];
  void* data;
  size_t nbytes;
  if (!read_exact(f, header, sizeof(header))) return 0;
  if (header[1] > KILN_MAX_DIMS || !read_exact(f, sizes, header[1] * sizeof(int64_t))) return -1;
  if (failed(api->tensor_create((kiln_dtype)header[0], sizes, header[1], out))) return -1;
  if (failed(api->tensor_data(*out, &data, &nbytes)) || !read_exact(f, data, nbytes)) {
    api->tensor_free(*out);
    *out = NULL;
    return -1;
  }
  return 1;
}

static int write_tensor(FILE* f, const kiln_tensor* t) {
  uint32_t header[2];
  int64_t sizes[KILN_MAX_DIMS];
  size_t ndim, nbytes;
  kiln_dtype dtype;
  void* data;
  if (failed(api->tensor_dtype(t, &dtype)) || failed(api->tensor_sizes(t, sizes, KILN_MAX_DIMS, &ndim)) ||
      failed(api->tensor_data(t, &data, &nbytes))) {
    return 0;
  }
  header[0] = (uint32_t)dtype;
  header[1] = (uint32_t)ndim;
  return fwrite(header, sizeof(header), 1, f) == 1 && fwrite(sizes, sizeof(int64_t), ndim, f) == ndim &&
         fwrite(data, 1, nbytes, f) == nbytes;
}

static void free_tensors(kiln_tensor** tensors, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) api->tensor_free(tensors[i]);
  free(tensors);
}

/* Reads every tensor of `path`; returns how many, or (size_t)-1. */
static size_t read_tensors(const char* path, kiln_tensor*** out) {
  FILE* f = fopen(path, "rb");
  size_t n = 0;
  int got;
  kiln_tensor* t = NULL;
  *out = NULL;
  if (f == NULL) {
    fprintf(stderr, "error: cannot open %s\n", path);
    return (size_t)-1;
  }
  while ((got = read_tensor(f, &t)) == 1) {
    kiln_tensor** grown = (kiln_tensor**)realloc(*out, (n + 1) * sizeof(kiln_tensor*));
    if (grown == NULL) {
      api->tensor_free(t);
      got = -1;
      break;
    }
    *out = grown;
    (*out)[n++] = t;
  }
  fclose(f);
  if (got < 0) {
    fprintf(stderr, "error: %s is not a tensor file\n", path);
    free_tensors(*out, n);
    *out = NULL;
    return (size_t)-1;
  }
  return n;
}

/* ---- running ---- */

struct options {
  const char* path;
  const char* method;
  const char* input;
  const char* output;
  const char* expect;
  const char* kernels;
  const char* isa;
  int threads;
  int calls;
  int reset;
  int caller_outputs;
  int from_bytes;
  unsigned api_version;
};

/* Gives every NULL output slot a caller-owned buffer of the output's largest size. */
static int caller_buffers(const kiln_method* method, kiln_tensor** outputs, size_t n, void** buffers) {
  size_t i;
  int32_t d;
  for (i = 0; i < n; ++i) {
    kiln_tensor_spec spec;
    size_t bytes;
    spec.struct_size = sizeof(spec);
    if (failed(api->method_tensor_spec(method, KILN_SPEC_OUTPUT, i, &spec))) return 1;
    bytes = dtype_size(spec.dtype);
    for (d = 0; d < spec.ndim; ++d) bytes *= (size_t)spec.max_sizes[d];
    buffers[i] = calloc(bytes ? bytes : 1, 1);
    if (buffers[i] == NULL) return 1;
    if (failed(
            api->tensor_create_view(buffers[i], bytes, spec.dtype, spec.max_sizes, (size_t)spec.ndim, &outputs[i]))) {
      return 1;
    }
  }
  return 0;
}

static int same_tensor(const kiln_tensor* a, const kiln_tensor* b) {
  int64_t sa[KILN_MAX_DIMS], sb[KILN_MAX_DIMS];
  size_t na, nb, bytes_a, bytes_b;
  kiln_dtype da, db;
  void *pa, *pb;
  if (failed(api->tensor_dtype(a, &da)) || failed(api->tensor_dtype(b, &db)) ||
      failed(api->tensor_sizes(a, sa, KILN_MAX_DIMS, &na)) || failed(api->tensor_sizes(b, sb, KILN_MAX_DIMS, &nb)) ||
      failed(api->tensor_data(a, &pa, &bytes_a)) || failed(api->tensor_data(b, &pb, &bytes_b))) {
    return 0;
  }
  return da == db && na == nb && memcmp(sa, sb, na * sizeof(int64_t)) == 0 && bytes_a == bytes_b &&
         memcmp(pa, pb, bytes_a) == 0;
}

static int run(const kiln_program* program, const struct options* o) {
  kiln_method* method = NULL;
  kiln_tensor** inputs = NULL;
  kiln_tensor** outputs = NULL;
  kiln_tensor** expected = NULL;
  void** buffers = NULL;
  size_t num_inputs = 0, num_outputs = 0, num_expected = 0, want_inputs = 0, i;
  int call, rc = 1;

  if (failed(api->program_load_method(program, o->method, &method))) return 1;
  if (failed(api->method_tensor_count(method, KILN_SPEC_INPUT, &want_inputs)) ||
      failed(api->method_tensor_count(method, KILN_SPEC_OUTPUT, &num_outputs))) {
    goto done;
  }
  if ((num_inputs = read_tensors(o->input, &inputs)) == (size_t)-1) goto done;
  if (num_inputs != want_inputs) printf("note: %zu inputs given, the method takes %zu\n", num_inputs, want_inputs);
  outputs = (kiln_tensor**)calloc(num_outputs + 1, sizeof(kiln_tensor*));
  buffers = (void**)calloc(num_outputs + 1, sizeof(void*));
  if (outputs == NULL || buffers == NULL) goto done;
  if (o->caller_outputs && caller_buffers(method, outputs, num_outputs, buffers)) goto done;
  for (call = 0; call < o->calls; ++call) {
    if (o->reset && failed(api->method_reset_state(method))) goto done;
    if (!o->caller_outputs) { /* kiln allocates each call's outputs */
      for (i = 0; i < num_outputs; ++i) {
        api->tensor_free(outputs[i]);
        outputs[i] = NULL;
      }
    }
    if (failed(api->method_run(method, (const kiln_tensor* const*)inputs, num_inputs, outputs, num_outputs))) {
      goto done;
    }
  }
  printf("ran %s %d times: %zu outputs\n", o->method, o->calls, num_outputs);
  if (o->output != NULL) {
    FILE* f = fopen(o->output, "wb");
    int ok = f != NULL;
    for (i = 0; ok && i < num_outputs; ++i) ok = write_tensor(f, outputs[i]);
    if (f != NULL && fclose(f) != 0) ok = 0;
    if (!ok) {
      fprintf(stderr, "error: cannot write %s\n", o->output);
      goto done;
    }
  }
  rc = 0;
  if (o->expect != NULL) {
    if ((num_expected = read_tensors(o->expect, &expected)) == (size_t)-1) {
      rc = 1;
      goto done;
    }
    rc = num_expected == num_outputs ? 0 : 3;
    for (i = 0; rc == 0 && i < num_outputs; ++i) {
      if (!same_tensor(outputs[i], expected[i])) rc = 3;
    }
    printf(rc == 0 ? "outputs match the expected file\n" : "outputs DIFFER from the expected file\n");
  }
done:
  if (expected != NULL) free_tensors(expected, num_expected);
  if (inputs != NULL) free_tensors(inputs, num_inputs);
  if (outputs != NULL) free_tensors(outputs, num_outputs);
  if (buffers != NULL) {
    for (i = 0; i < num_outputs; ++i) free(buffers[i]);
    free(buffers);
  }
  api->method_free(method);
  return rc;
}

static kiln_program* load(const struct options* o) {
  kiln_load_options* options = NULL;
  kiln_program* program = NULL;
  kiln_status* st = api->load_options_create(&options);
  if (st == NULL && o->kernels != NULL) st = api->load_options_set_kernels(options, o->kernels);
  if (st == NULL && o->isa != NULL) st = api->load_options_set_isa(options, o->isa);
  if (st == NULL && !o->from_bytes) st = api->program_load(o->path, options, &program);
  if (st == NULL && o->from_bytes) {
    FILE* f = fopen(o->path, "rb");
    char* bytes = NULL;
    long size = -1;
    if (f != NULL && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) bytes = (char*)malloc(size ? (size_t)size : 1);
    if (bytes != NULL && read_exact(f, bytes, (size_t)size)) {
      st = api->program_load_from_copy(bytes, (size_t)size, options, &program);
    } else {
      fprintf(stderr, "error: cannot read %s\n", o->path);
    }
    free(bytes); /* a loaded copy owns its bytes */
    if (f != NULL) fclose(f);
  }
  api->load_options_free(options);
  failed(st);
  return program;
}

static int usage(void) {
  fprintf(stderr,
          "usage: kiln_c_example model.kiln [--method NAME] [--input FILE] [--output FILE] [--expect FILE]\n"
          "       [--kernels TIER] [--isa LEVEL] [--threads N] [--calls N] [--reset] [--caller-outputs]\n"
          "       [--from-bytes] [--api-version N]\n");
  return 2;
}

int main(int argc, char** argv) {
  struct options o;
  const kiln_api_base* base = kiln_get_api_base();
  kiln_status* st = NULL;
  kiln_build_info info;
  kiln_program* program;
  size_t i, n;
  int a, rc = 0;

  memset(&o, 0, sizeof(o));
  o.method = "forward";
  o.calls = 1;
  o.api_version = KILN_C_API_VERSION;
  if (argc < 2) return usage();
  o.path = argv[1];
  for (a = 2; a < argc; ++a) {
    const char* arg = argv[a];
    const char* value = a + 1 < argc ? argv[a + 1] : NULL;
    if (strcmp(arg, "--reset") == 0)
      o.reset = 1;
    else if (strcmp(arg, "--caller-outputs") == 0)
      o.caller_outputs = 1;
    else if (strcmp(arg, "--from-bytes") == 0)
      o.from_bytes = 1;
    else if (value == NULL)
      return usage();
    else if (strcmp(arg, "--method") == 0)
      o.method = argv[++a];
    else if (strcmp(arg, "--input") == 0)
      o.input = argv[++a];
    else if (strcmp(arg, "--output") == 0)
      o.output = argv[++a];
    else if (strcmp(arg, "--expect") == 0)
      o.expect = argv[++a];
    else if (strcmp(arg, "--kernels") == 0)
      o.kernels = argv[++a];
    else if (strcmp(arg, "--isa") == 0)
      o.isa = argv[++a];
    else if (strcmp(arg, "--threads") == 0)
      o.threads = atoi(argv[++a]);
    else if (strcmp(arg, "--calls") == 0)
      o.calls = atoi(argv[++a]);
    else if (strcmp(arg, "--api-version") == 0)
      o.api_version = (unsigned)strtoul(argv[++a], NULL, 10);
    else
      return usage();
  }

  /* The table of the version this program was written for; a library too old for it says so. */
  api = base->get_api(o.api_version, &st);
  if (api == NULL) {
    fprintf(stderr, "error: %s\n", base->status_message(st));
    base->status_free(st);
    return 2;
  }
  info.struct_size = sizeof(info);
  if (failed(api->build_info(&info))) return 1;
  printf("kiln %s, C API %u (table %u, asked for %u), runtime %s\n", info.version, info.api_version, api->version,
         o.api_version, info.runtime_library);
  if (o.threads > 0 && failed(api->set_num_threads(o.threads))) return 1;

  program = load(&o);
  if (program == NULL) return 1;
  if (failed(api->program_method_count(program, &n))) rc = 1;
  for (i = 0; rc == 0 && i < n; ++i) {
    const char* name;
    if (failed(api->program_method_name(program, i, &name)))
      rc = 1;
    else
      rc = print_method(program, name);
  }
  if (rc == 0 && o.input != NULL) rc = run(program, &o);
  api->program_free(program);
  return rc;
}
