// The umbrella header of kiln::llm (libkiln_llm.so.0, CMake component kiln::llm):
// tokenizers, chat templates, sampling and the text-generation runners (one sequence, or a batch).
#pragma once

#include "kiln/llm/api.h"
#include "kiln/llm/batch_runner.h"
#include "kiln/llm/chat.h"
#include "kiln/llm/gguf.h"
#include "kiln/llm/runner.h"
#include "kiln/llm/sampler.h"
#include "kiln/llm/tokenizer.h"
