# kiln_add_extension(<name> [SOURCES <src>...] [OBJECT_LIBRARIES <lib>...] [LINK_LIBRARIES <lib>...]
#                    [PYTHON])
#
# The one way the project builds an extension library (fast kernels, quantized
# operators, backends): libkiln_<name>.so.0 next to libkiln.so.0 in the wheel,
# and a component target kiln::<name> in the CMake package.
#  - The shared runtime is named on the link line ahead of everything else and
#    kept (--no-as-needed), so no static archive can provide the runtime's
#    symbols first: the library always uses the process's one runtime.
#  - RUNPATH $ORIGIN finds libkiln.so.0 beside it in the wheel.
#  - With KILN_BUILD_SHARED=OFF the sources become objects that the Python
#    extension embeds together with the runtime.
#  - OBJECT_LIBRARIES: object libraries whose objects go into the library (or,
#    in a static build, are embedded like the sources), e.g. the extension's
#    per-ISA microkernels (kiln_add_isa_microkernels).
#  - PYTHON: the Python extension links the library (kept with --no-as-needed),
#    so `import kiln` registers its kernels.
function(kiln_add_extension name)
  cmake_parse_arguments(ARG "PYTHON" "" "SOURCES;OBJECT_LIBRARIES;LINK_LIBRARIES" ${ARGN})
  set(target kiln_${name})
  set(objects "")
  foreach(lib IN LISTS ARG_OBJECT_LIBRARIES)
    list(APPEND objects $<TARGET_OBJECTS:${lib}>)
  endforeach()
  if(KILN_BUILD_SHARED)
    add_library(${target} SHARED ${ARG_SOURCES} ${objects})
    set_target_properties(${target} PROPERTIES
      OUTPUT_NAME kiln_${name}
      SOVERSION 0
      INSTALL_RPATH "$ORIGIN"
      BUILD_RPATH "$<TARGET_FILE_DIR:kiln>")
    target_link_options(${target} PRIVATE
      "LINKER:--push-state,--no-as-needed,$<TARGET_FILE:kiln>,--pop-state"
      "LINKER:--no-undefined")
    add_dependencies(${target} kiln)
    install(TARGETS ${target} LIBRARY DESTINATION lib NAMELINK_SKIP)
    if(ARG_PYTHON)
      set_property(GLOBAL APPEND PROPERTY KILN_PYTHON_EXTENSION_TARGETS ${target})
    endif()
  elseif(ARG_SOURCES)
    # The Python extension embeds every static extension's objects.
    add_library(${target} OBJECT ${ARG_SOURCES})
    target_compile_definitions(${target} PRIVATE KILN_STATIC)
    set_property(GLOBAL APPEND PROPERTY KILN_STATIC_EXTENSION_TARGETS ${target} ${ARG_OBJECT_LIBRARIES})
  else()
    add_custom_target(${target})
    set_property(GLOBAL APPEND PROPERTY KILN_STATIC_EXTENSION_TARGETS ${ARG_OBJECT_LIBRARIES})
  endif()
  if(KILN_BUILD_SHARED OR ARG_SOURCES)
    target_include_directories(${target} PRIVATE "$<TARGET_PROPERTY:kiln,INTERFACE_INCLUDE_DIRECTORIES>")
    if(ARG_LINK_LIBRARIES)
      target_link_libraries(${target} PRIVATE ${ARG_LINK_LIBRARIES})
    endif()
  endif()
  set_property(GLOBAL APPEND PROPERTY KILN_EXTENSION_NAMES ${name})
endfunction()
