/* The kiln C API: plain C99 over the one runtime in libkiln.so.0, with a versioned ABI (docs/c_api.md). */
#ifndef KILN_C_API_H_
#define KILN_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The newest version of the function table this header describes. A program
   asks for the version it was compiled with; a library serves every version up
   to its own and refuses a newer one with a status (never a crash). The table
   only grows: a new version appends functions at the end, nothing is removed,
   reordered or changed (docs/c_api.md). */
#define KILN_C_API_VERSION 1

#if defined(KILN_STATIC)
#define KILN_C_EXPORT
#else
#define KILN_C_EXPORT __attribute__((visibility("default")))
#endif

/* ---- Codes and dtypes: fixed values, part of the ABI -------------------- */

/* Error kinds: the same values as kiln::Error (kiln/error.h). Functions return
   a kiln_status* (NULL on success) whose code is one of these. */
typedef int32_t kiln_code;
#define KILN_OK 0
#define KILN_ERROR_INVALID_ARGUMENT 1 /* a bad argument: null or freed handle, wrong size, ... */
#define KILN_ERROR_INVALID_PROGRAM 2  /* a malformed, truncated or hostile program file */
#define KILN_ERROR_INVALID_INPUT 3    /* an input of the wrong count, dtype or shape */
#define KILN_ERROR_MISSING_KERNEL 4
#define KILN_ERROR_MISSING_BACKEND 5
#define KILN_ERROR_REGISTRATION_CONFLICT 6
#define KILN_ERROR_ABI_MISMATCH 7 /* also: a C API version this library does not serve */
#define KILN_ERROR_NOT_FOUND 8
#define KILN_ERROR_NOT_SUPPORTED 9
#define KILN_ERROR_OUT_OF_MEMORY 10
#define KILN_ERROR_IO_ERROR 11
#define KILN_ERROR_KERNEL_FAILURE 12
#define KILN_ERROR_INTERNAL 13 /* a bug in kiln, never the caller's mistake */
#define KILN_ERROR_DUPLICATE_RUNTIME 14
#define KILN_ERROR_BUSY 15

/* Element types: the values of the program format (kiln::ScalarType). */
typedef int32_t kiln_dtype;
#define KILN_DTYPE_FLOAT32 0
#define KILN_DTYPE_FLOAT64 1
#define KILN_DTYPE_INT64 2
#define KILN_DTYPE_INT32 3
#define KILN_DTYPE_BOOL 4
#define KILN_DTYPE_FLOAT16 5
#define KILN_DTYPE_BFLOAT16 6
#define KILN_DTYPE_UINT8 7
#define KILN_DTYPE_INT8 8

/* Which list of a method's tensors a spec query reads. */
typedef int32_t kiln_spec_kind;
#define KILN_SPEC_INPUT 0
#define KILN_SPEC_OUTPUT 1
#define KILN_SPEC_STATE 2

/* A tensor never has more dimensions than this (kiln::kMaxDims). */
#define KILN_MAX_DIMS 8

/* ---- Handles: opaque; each is owned by whoever the function says --------- */

typedef struct kiln_status kiln_status;             /* an error: code and message */
typedef struct kiln_load_options kiln_load_options; /* how a program is loaded */
typedef struct kiln_program kiln_program;           /* a loaded, verified program */
typedef struct kiln_method kiln_method;             /* one execution context of a method */
typedef struct kiln_tensor kiln_tensor;             /* a dense row-major tensor */

/* What a method expects or gives for one tensor. The caller sets struct_size to
   sizeof(kiln_tensor_spec) as its header declares it; the library writes only
   the fields that fit in struct_size, so a struct that grows in a later version
   stays compatible both ways. Pointers point into the method and stay valid
   while the method lives. */
typedef struct kiln_tensor_spec {
  size_t struct_size;
  const char* name;
  kiln_dtype dtype;
  int32_t ndim;
  const int64_t* max_sizes; /* ndim entries: the largest size of each dimension */
  const int64_t* min_sizes; /* ndim entries: the smallest (equal to max for a static one) */
  uint32_t dynamic_mask;    /* bit d set: dimension d is dynamic */
} kiln_tensor_spec;

/* Build information. Strings are static in the library. */
typedef struct kiln_build_info {
  size_t struct_size;          /* set by the caller, as for kiln_tensor_spec */
  const char* version;         /* "0.1.0" */
  uint32_t api_version;        /* the newest C API version this library serves */
  uint32_t abi_version;        /* KILN_ABI_VERSION of the C++ plugin interface */
  const char* runtime_library; /* path of the file holding the registries */
  const char* detected_isa;    /* "avx512_vnni", "avx512", "avx2", "neon", "baseline" */
  const char* compiler;        /* what built the library */
} kiln_build_info;

/* ---- The function table --------------------------------------------------

   Every function that can fail returns NULL on success or a kiln_status* that
   the caller owns and frees with status_free. No C++ exception, type or abort
   crosses it: a null, freed or wrong-kind handle, a bad size or dtype is a
   status of code KILN_ERROR_INVALID_ARGUMENT (or _INVALID_INPUT), whose message
   says which argument. Freed handles are detected while they are among the
   most recently freed ones (the library keeps the last few hundred freed
   handles' headers): using one after that is undefined, as in any C API.

   Threads: unless a function says otherwise, it may be called from any thread,
   and different handles may be used on different threads at once. A status is
   a value: reading one never races with another thread's call. There is no
   global "last error". */
typedef struct kiln_api {
  uint32_t version;     /* the newest version this table serves (>= the one asked for) */
  uint32_t struct_size; /* sizeof the library's table: functions beyond a caller's version are past its end */

  /* -- statuses -- */
  /* The code of a status; KILN_OK for NULL. Never fails. */
  kiln_code (*status_code)(const kiln_status* status);
  /* The message ("" for NULL), owned by the status: valid until it is freed. */
  const char* (*status_message)(const kiln_status* status);
  /* "invalid_program", ... for a code; "unknown" for a value not listed. Static string. */
  const char* (*code_name)(kiln_code code);
  /* Frees a status; NULL is a no-op. */
  void (*status_free)(kiln_status* status);

  /* -- library-wide -- */
  /* Fills *info (struct_size set by the caller). */
  kiln_status* (*build_info)(kiln_build_info* info);
  /* Threads of the one runtime-owned pool (shared with Python and C++ in the
     process). n < 1: one per core (or KILN_NUM_THREADS). Waits for work in flight. */
  kiln_status* (*set_num_threads)(int32_t n);
  kiln_status* (*num_threads)(int32_t* out);
  /* dlopens a plugin whose static initializers register kernels or backends
     into the process-wide registries; *num_kernels / *num_backends (each may be
     NULL) receive how many it registered. A collision is
     KILN_ERROR_REGISTRATION_CONFLICT naming both libraries. */
  kiln_status* (*load_library)(const char* path, size_t* num_kernels, size_t* num_backends);
  /* Sizes of the process-wide registries (the same ones Python and C++ see). */
  kiln_status* (*registered_kernel_count)(size_t* out);
  kiln_status* (*registered_backend_count)(size_t* out);

  /* -- load options: a caller-owned handle; not to be shared while being changed -- */
  kiln_status* (*load_options_create)(kiln_load_options** out);
  void (*load_options_free)(kiln_load_options* options); /* NULL is a no-op */
  /* "optimized" or "portable" (NULL or "": KILN_KERNELS, else optimized). Copied. */
  kiln_status* (*load_options_set_kernels)(kiln_load_options* options, const char* tier);
  /* An ISA level name ("avx2", ...; NULL or "": KILN_ISA, else the CPU's best). Copied. */
  kiln_status* (*load_options_set_isa)(kiln_load_options* options, const char* isa);
  /* Refuse a program or method that would need more memory than this. */
  kiln_status* (*load_options_set_max_memory)(kiln_load_options* options, uint64_t bytes);
  /* Nonzero (the default): map the file and use its constants in place; zero: read it whole. */
  kiln_status* (*load_options_set_map_file)(kiln_load_options* options, int32_t map_file);

  /* -- programs: immutable once loaded; any number of threads may use one at once -- */
  /* Loads and verifies a file (options may be NULL: the defaults). While the
     program or a method of it lives, a mapped file must not be truncated or
     written in place. *out is the caller's, freed with program_free. */
  kiln_status* (*program_load)(const char* path, const kiln_load_options* options, kiln_program** out);
  /* From caller bytes, used in place when 64-byte aligned: the caller keeps them
     alive and unchanged while the program or any method of it lives. */
  kiln_status* (*program_load_from_buffer)(const void* data, size_t size, const kiln_load_options* options,
                                           kiln_program** out);
  /* From a copy of caller bytes: they may be freed as soon as this returns. */
  kiln_status* (*program_load_from_copy)(const void* data, size_t size, const kiln_load_options* options,
                                         kiln_program** out);
  /* Methods loaded from the program stay valid after it is freed. NULL is a no-op. */
  void (*program_free)(kiln_program* program);
  kiln_status* (*program_method_count)(const kiln_program* program, size_t* out);
  /* *name is owned by the program: valid while it lives. */
  kiln_status* (*program_method_name)(const kiln_program* program, size_t index, const char** name);
  /* Resolves kernels, allocates the planned memory once and prepares kernels.
   *out is the caller's, freed with method_free. */
  kiln_status* (*program_load_method)(const kiln_program* program, const char* name, kiln_method** out);

  /* -- methods: calls on one method take turns (a second thread waits for the
     first call to return); separate methods run in parallel -- */
  /* Not while another thread is calling the method. NULL is a no-op. */
  void (*method_free)(kiln_method* method);
  /* *name is owned by the method. */
  kiln_status* (*method_name)(const kiln_method* method, const char** name);
  kiln_status* (*method_tensor_count)(const kiln_method* method, kiln_spec_kind kind, size_t* out);
  /* spec->struct_size must be set; the pointers it receives are owned by the method. */
  kiln_status* (*method_tensor_spec)(const kiln_method* method, kiln_spec_kind kind, size_t index,
                                     kiln_tensor_spec* spec);
  /* Runs the method. inputs: num_inputs tensors (exactly the method's input
     count), read during the call only. outputs: num_outputs slots (exactly the
     method's output count). A NULL slot receives a new kiln-allocated tensor
     holding the output (the caller frees it); a tensor already in a slot
     receives the output's bytes and sizes, and must have its dtype and enough
     capacity. On failure, tensors this call allocated are freed and their slots
     set back to NULL; caller tensors may have been partly written. Outputs are
     copies: nothing the caller does to them afterwards affects the method. */
  kiln_status* (*method_run)(kiln_method* method, const kiln_tensor* const* inputs, size_t num_inputs,
                             kiln_tensor** outputs, size_t num_outputs);
  /* Restores the method's state tensors to their initial values; waits for a call in progress. */
  kiln_status* (*method_reset_state)(kiln_method* method);

  /* -- tensors: caller-owned handles; one thread at a time per tensor -- */
  /* A view of caller memory of `capacity` bytes (it must hold the sizes given:
     KILN_ERROR_INVALID_ARGUMENT otherwise). The caller keeps `data` alive while
     the tensor is used; the tensor never frees it. */
  kiln_status* (*tensor_create_view)(void* data, size_t capacity, kiln_dtype dtype, const int64_t* sizes, size_t ndim,
                                     kiln_tensor** out);
  /* A zero-filled tensor whose 64-byte aligned memory kiln owns (freed with the tensor). */
  kiln_status* (*tensor_create)(kiln_dtype dtype, const int64_t* sizes, size_t ndim, kiln_tensor** out);
  /* NULL is a no-op. Never frees a view's memory. */
  void (*tensor_free)(kiln_tensor* tensor);
  kiln_status* (*tensor_dtype)(const kiln_tensor* tensor, kiln_dtype* out);
  /* *ndim receives the rank; up to max_dims sizes are written to sizes (may be NULL when max_dims is 0). */
  kiln_status* (*tensor_sizes)(const kiln_tensor* tensor, int64_t* sizes, size_t max_dims, size_t* ndim);
  /* The bytes: *data is owned by the tensor (or by the view's caller); *nbytes is what the sizes cover. */
  kiln_status* (*tensor_data)(const kiln_tensor* tensor, void** data, size_t* nbytes);
} kiln_api;

/* The frozen entry point: this struct never changes, so any caller can ask any
   library which versions it serves. */
typedef struct kiln_api_base {
  uint32_t struct_size;
  uint32_t max_version; /* the newest kiln_api version this library serves */
  /* The table for `version` (1 .. max_version), static in the library, never
     freed. A version out of range gives NULL and, when `status` is not NULL, a
     status (code KILN_ERROR_ABI_MISMATCH) saying which versions are served;
     read it with the functions below and free it with status_free. */
  const kiln_api* (*get_api)(uint32_t version, kiln_status** status);
  const char* (*version_string)(void);
  kiln_code (*status_code)(const kiln_status* status);
  const char* (*status_message)(const kiln_status* status);
  void (*status_free)(kiln_status* status);
} kiln_api_base;

/* The one exported symbol of the C API (version node KILN_C_1 of libkiln.so.0). */
KILN_C_EXPORT const kiln_api_base* kiln_get_api_base(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_C_API_H_ */
