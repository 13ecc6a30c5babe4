// Export macro and ABI version shared by the runtime and everything that links it.
#pragma once

// Marks the public API. The runtime is built with hidden visibility, so only
// what carries this macro is exported from libkiln.so.0. In a static build
// (KILN_STATIC) nothing is exported from the module that embeds the runtime.
#if defined(KILN_STATIC)
#define KILN_API
#else
#define KILN_API [[gnu::visibility("default")]]
#endif

// Bumped whenever a public struct layout or function signature that plugins
// compile against changes. Every registration carries the value it was built
// with; the runtime refuses registrations from another ABI.
#define KILN_ABI_VERSION 3

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)
