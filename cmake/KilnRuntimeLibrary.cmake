# Builds `kiln` from the runtime and kernel objects (kernels/CMakeLists.txt).
#  - KILN_BUILD_SHARED=ON: libkiln.so.0 (SONAME libkiln.so.0), hidden visibility
#    plus a version script, so only the public C++ API is exported.
#  - OFF: a static archive; the Python extension embeds it and exports nothing.
if(KILN_BUILD_SHARED)
  add_library(kiln SHARED)
  set_target_properties(kiln PROPERTIES
    OUTPUT_NAME kiln
    SOVERSION 0
    LINK_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/runtime/kiln.map")
  target_link_options(kiln PRIVATE
    "LINKER:--version-script=${CMAKE_CURRENT_SOURCE_DIR}/runtime/kiln.map"
    "LINKER:--no-undefined"
    "LINKER:-z,defs"
    # The runtime's calls into its own API bind to itself: a copy loaded
    # earlier with RTLD_GLOBAL cannot take over its registries.
    "LINKER:-Bsymbolic-functions")
else()
  add_library(kiln STATIC)
endif()
target_sources(kiln PRIVATE $<TARGET_OBJECTS:kiln_runtime_objects>)
foreach(_kiln_kernels IN LISTS KILN_KERNEL_OBJECT_LIBRARIES)
  target_sources(kiln PRIVATE $<TARGET_OBJECTS:${_kiln_kernels}>)
endforeach()
add_dependencies(kiln kiln_check_isa_symbols)
target_include_directories(kiln PUBLIC "$<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/runtime/include>")
target_link_libraries(kiln PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
if(NOT KILN_BUILD_SHARED)
  target_compile_definitions(kiln PUBLIC KILN_STATIC)
endif()
add_library(kiln::runtime ALIAS kiln)
