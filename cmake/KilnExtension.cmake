# kiln_add_extension(<name> SOURCES <src>... [LINK_LIBRARIES <lib>...])
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
function(kiln_add_extension name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK_LIBRARIES" ${ARGN})
  set(target kiln_${name})
  if(KILN_BUILD_SHARED)
    add_library(${target} SHARED ${ARG_SOURCES})
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
  else()
    add_library(${target} OBJECT ${ARG_SOURCES})
    target_compile_definitions(${target} PRIVATE KILN_STATIC)
    set_property(GLOBAL APPEND PROPERTY KILN_STATIC_EXTENSION_TARGETS ${target})
  endif()
  target_include_directories(${target} PRIVATE "$<TARGET_PROPERTY:kiln,INTERFACE_INCLUDE_DIRECTORIES>")
  if(ARG_LINK_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LINK_LIBRARIES})
  endif()
  set_property(GLOBAL APPEND PROPERTY KILN_EXTENSION_NAMES ${name})
endfunction()
