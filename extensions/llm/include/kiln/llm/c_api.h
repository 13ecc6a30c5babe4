/* The kiln LLM runner's C API: libkiln_llm.so.0's versioned table, beside kiln/c_api.h (docs/c_api.md). */
#ifndef KILN_LLM_C_API_H_
#define KILN_LLM_C_API_H_

#include <kiln/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The newest version of the kiln_llm_api table this header describes; the same rules as
   KILN_C_API_VERSION (append-only, a newer library serves an older version, an older one refuses
   a newer version with a status). Statuses are the core API's: read and free them with the
   kiln_api table of kiln/c_api.h. */
#define KILN_LLM_C_API_VERSION 1

typedef struct kiln_llm_runner kiln_llm_runner; /* one LLM program, its tokenizer and one KV cache */

/* How one generation samples and stops. Fill it with generate_options_init (the C++ defaults),
   then change fields; struct_size is set by the caller as for kiln_tensor_spec. */
typedef struct kiln_llm_generate_options {
  size_t struct_size;
  int32_t max_new_tokens;   /* 256 */
  float temperature;        /* 0.8; 0: greedy */
  int32_t top_k;            /* 40; 0: all */
  float top_p;              /* 0.95 */
  float min_p;              /* 0.05 */
  float repetition_penalty; /* 1: none */
  int64_t seed;             /* -1: from the OS */
  int32_t ignore_eos;       /* nonzero: do not stop at the model's stop tokens */
} kiln_llm_generate_options;

/* What the last generation did. finish_reason ("stop_token", "stop_string", "max_new_tokens",
   "context_full", "cancelled") is owned by the runner: valid until its next generation. */
typedef struct kiln_llm_stats {
  size_t struct_size;
  int32_t prompt_tokens;
  int32_t reused_tokens; /* prompt tokens whose KV cache entries were kept from the last call */
  int32_t generated_tokens;
  double load_ms;
  double time_to_first_token_ms;
  double prefill_ms;
  double decode_ms;
  double prefill_tokens_per_s;
  double decode_tokens_per_s;
  const char* finish_reason;
} kiln_llm_stats;

/* Called with each new piece of text (`size` bytes, never half a UTF-8 character, not
   NUL-terminated) on the generating thread. Return nonzero to go on, zero to stop
   (finish_reason "cancelled"). It must not call generate on the same runner (refused with
   KILN_ERROR_BUSY); it may call cancel. */
typedef int32_t (*kiln_llm_text_callback)(void* user_data, const char* piece, size_t size);

typedef struct kiln_llm_api {
  uint32_t version;
  uint32_t struct_size;

  /* Fills *options with the defaults (as far as options->struct_size reaches). */
  kiln_status* (*generate_options_init)(kiln_llm_generate_options* options);
  /* Loads an LLM program (its tokenizer, chat template and config come from the file). options
     may be NULL; num_threads > 0 sizes the runtime's thread pool. *out is the caller's, freed
     with runner_free. */
  kiln_status* (*runner_load)(const char* path, const kiln_load_options* options, int32_t num_threads,
                              kiln_llm_runner** out);
  /* Not while another thread calls the runner. NULL is a no-op. */
  void (*runner_free)(kiln_llm_runner* runner);
  /* Generates after `prompt` (UTF-8, NUL-terminated; special tokens parsed), streaming each
     piece to on_text (may be NULL). options may be NULL (the defaults). When text is not NULL,
     *text receives the whole new text (NUL-terminated, freed with string_free). The KV cache
     persists: a prompt that extends the last one computes only what is new. Calls on one runner
     take turns: one that overlaps another thread's is refused with KILN_ERROR_BUSY. */
  kiln_status* (*generate)(kiln_llm_runner* runner, const char* prompt, const kiln_llm_generate_options* options,
                           kiln_llm_text_callback on_text, void* user_data, char** text);
  /* Ends the generation in progress at its next token; from any thread, at any time. */
  kiln_status* (*cancel)(kiln_llm_runner* runner);
  /* Forgets the KV cache; waits for a generation in progress on another thread. */
  kiln_status* (*reset)(kiln_llm_runner* runner);
  /* Token ids of `size` bytes of text: *count receives how many there are; the first
     min(capacity, *count) are written to ids (which may be NULL when capacity is 0). Any thread. */
  kiln_status* (*encode)(const kiln_llm_runner* runner, const char* text, size_t size, int32_t parse_special,
                         int32_t* ids, size_t capacity, size_t* count);
  /* The text of `count` ids, NUL-terminated, freed with string_free; an id outside the
     vocabulary is KILN_ERROR_INVALID_ARGUMENT. Any thread. */
  kiln_status* (*decode)(const kiln_llm_runner* runner, const int32_t* ids, size_t count, int32_t skip_special,
                         char** text);
  /* The last generation's stats (stats->struct_size set by the caller); not while another thread generates. */
  kiln_status* (*stats)(const kiln_llm_runner* runner, kiln_llm_stats* stats);
  /* Frees a string from generate or decode; NULL is a no-op. */
  void (*string_free)(char* text);
} kiln_llm_api;

/* The table for `version` (1 .. KILN_LLM_C_API_VERSION of the library), static, never freed; a
   version out of range gives NULL and, when `status` is not NULL, a KILN_ERROR_ABI_MISMATCH status. */
KILN_C_EXPORT const kiln_llm_api* kiln_llm_get_api(uint32_t version, kiln_status** status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_LLM_C_API_H_ */
