/* kiln_llm_c_example: generate text from a .kiln LLM program through the LLM runner's C API.

     kiln_llm_c_example model.kiln --prompt TEXT [--max-new-tokens N] [--temperature T] [--seed S]
                                   [--cancel-after PIECES] [--api-version N]

   Streams the new text to stdout as it comes, then prints "--- stats" with the token counts and
   the finish reason, and the prompt's token ids with their decoded text. --cancel-after cancels
   the generation from inside the callback after that many pieces. Exit codes: 0 success, 1 a kiln
   error ("error: <kind>: <message>"), 2 bad usage or an unserved API version.

   Built with `pkg-config --cflags --libs kiln-llm` (tests/cpp/pkgconfig/Makefile, target llm_c). */
#include <kiln/llm/c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kiln_api* api;
static const kiln_llm_api* llm;

static int failed(kiln_status* status) {
  if (status == NULL) return 0;
  fprintf(stderr, "error: %s: %s\n", api->code_name(api->status_code(status)), api->status_message(status));
  api->status_free(status);
  return 1;
}

struct stream {
  kiln_llm_runner* runner;
  int pieces;
  int cancel_after;
};

static int32_t on_text(void* user_data, const char* piece, size_t size) {
  struct stream* s = (struct stream*)user_data;
  fwrite(piece, 1, size, stdout);
  fflush(stdout);
  if (++s->pieces == s->cancel_after) failed(llm->cancel(s->runner)); /* takes effect at the next token */
  return 1;
}

int main(int argc, char** argv) {
  const char* prompt = NULL;
  unsigned api_version = KILN_LLM_C_API_VERSION;
  kiln_llm_generate_options options;
  kiln_llm_stats stats;
  kiln_llm_runner* runner = NULL;
  kiln_status* st = NULL;
  struct stream stream;
  char* text = NULL;
  char* decoded = NULL;
  int32_t ids[512];
  size_t count = 0, i;
  int a, rc = 1;

  api = kiln_get_api_base()->get_api(KILN_C_API_VERSION, &st);
  if (api == NULL || argc < 2) {
    fprintf(stderr, "usage: kiln_llm_c_example model.kiln --prompt TEXT [--max-new-tokens N] ...\n");
    return 2;
  }
  options.struct_size = sizeof(options);
  memset(&stream, 0, sizeof(stream));
  for (a = 2; a + 1 < argc; a += 2) {
    if (strcmp(argv[a], "--prompt") == 0)
      prompt = argv[a + 1];
    else if (strcmp(argv[a], "--api-version") == 0)
      api_version = (unsigned)strtoul(argv[a + 1], NULL, 10);
  }
  llm = kiln_llm_get_api(api_version, &st);
  if (llm == NULL) {
    fprintf(stderr, "error: %s\n", api->status_message(st));
    api->status_free(st);
    return 2;
  }
  if (prompt == NULL || failed(llm->generate_options_init(&options))) return 2;
  for (a = 2; a + 1 < argc; a += 2) {
    if (strcmp(argv[a], "--max-new-tokens") == 0)
      options.max_new_tokens = atoi(argv[a + 1]);
    else if (strcmp(argv[a], "--temperature") == 0)
      options.temperature = (float)atof(argv[a + 1]);
    else if (strcmp(argv[a], "--seed") == 0)
      options.seed = atoll(argv[a + 1]);
    else if (strcmp(argv[a], "--cancel-after") == 0)
      stream.cancel_after = atoi(argv[a + 1]);
  }

  if (failed(llm->runner_load(argv[1], NULL, 0, &runner))) return 1;
  stream.runner = runner;
  if (failed(llm->generate(runner, prompt, &options, on_text, &stream, &text))) goto done;
  stats.struct_size = sizeof(stats);
  if (failed(llm->stats(runner, &stats))) goto done;
  printf("\n--- stats: %d prompt tokens, %d generated, finish %s, %zu bytes of text\n", stats.prompt_tokens,
         stats.generated_tokens, stats.finish_reason, strlen(text));
  if (failed(llm->encode(runner, prompt, strlen(prompt), 1, ids, sizeof(ids) / sizeof(ids[0]), &count))) goto done;
  printf("--- prompt ids:");
  for (i = 0; i < count && i < sizeof(ids) / sizeof(ids[0]); ++i) printf(" %d", ids[i]);
  if (failed(llm->decode(runner, ids, count < 512 ? count : 512, 0, &decoded))) goto done;
  printf("\n--- decoded: %s\n", decoded);
  rc = 0;
done:
  llm->string_free(text);
  llm->string_free(decoded);
  llm->runner_free(runner);
  return rc;
}
