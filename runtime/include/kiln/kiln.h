// The umbrella header of the kiln C++ SDK.
#pragma once

#include "kiln/api.h"
#include "kiln/backend.h"
#include "kiln/cpu.h"
#include "kiln/error.h"
#include "kiln/kernel.h"
#include "kiln/log.h"
#include "kiln/profile.h"
#include "kiln/program.h"
#include "kiln/registry.h"
#include "kiln/span.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"
#include "kiln/value.h"
#include "kiln/version.h"
