// The kiln version. CMakeLists.txt and pyproject.toml read it from here.
#pragma once

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.1.0"
