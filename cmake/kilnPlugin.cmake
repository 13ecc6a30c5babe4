# kiln_add_plugin(<target> <source>...)
#
# Builds a plugin: a shared library whose static initializers register kernels
# or backends (KILN_REGISTER_KERNEL, KILN_REGISTER_BACKEND) into the process's
# one runtime, libkiln.so.0. Load it at run time with kiln.load_library(path) /
# kiln::load_library(path), list it in KILN_PLUGIN_PATH, or link it: nothing
# references its symbols, so whoever links the target keeps it on the link line
# (--no-as-needed), which is what this function arranges.
function(kiln_add_plugin target)
  if(NOT ARGN)
    message(FATAL_ERROR "kiln_add_plugin(${target}): no sources given")
  endif()
  add_library(${target} SHARED ${ARGN})
  target_link_libraries(${target} PRIVATE kiln::runtime)
  set_property(TARGET ${target} APPEND PROPERTY INTERFACE_LINK_OPTIONS
    "LINKER:--push-state,--no-as-needed,$<TARGET_FILE:${target}>,--pop-state")
endfunction()
