# How every kernel library is compiled: the runtime's (kernels/) and the extensions' (extensions/).
#
#  - KILN_ISA_LEVELS: the instruction-set levels of the target architecture that this build compiles
#    (all, or those of KILN_ISA_LEVELS_BUILT), lowest first, read from runtime/include/kiln/cpu_list.h
#    (the one list of levels), with KILN_ISA_FLAGS_<level> their compiler flags;
#  - kiln_kernel_object_library: an object library of kernels with the kernels' settings;
#  - kiln_add_isa_microkernels: microkernel families compiled once per level and symbol-checked.

set(KILN_ISA_LIST_HEADER "${PROJECT_SOURCE_DIR}/runtime/include/kiln/cpu_list.h")
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${KILN_ISA_LIST_HEADER}")
file(READ "${KILN_ISA_LIST_HEADER}" _kiln_isa_list)
string(REPLACE "\\\n" " " _kiln_isa_list "${_kiln_isa_list}")
# X(ctx, Enum, name, arch, value, features, "flags"): features never hold a quote, so [^"]* stays
# inside one entry.
string(REGEX MATCHALL "X\\(ctx, [A-Za-z0-9_]+, [a-z0-9_]+, [a-z0-9_]+, [0-9]+,[^\"]*\"[^\"]*\"\\)"
       _kiln_isa_entries "${_kiln_isa_list}")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(_kiln_isa_arch x86_64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(_kiln_isa_arch aarch64)
else()
  set(_kiln_isa_arch none)
endif()
set(KILN_ISA_LEVELS "")
set(_kiln_isa_all_levels "")
foreach(_entry IN LISTS _kiln_isa_entries)
  string(REGEX MATCH "X\\(ctx, [A-Za-z0-9_]+, ([a-z0-9_]+), ([a-z0-9_]+), [0-9]+,[^\"]*\"([^\"]*)\"\\)" _m "${_entry}")
  set(_level "${CMAKE_MATCH_1}")
  set(_arch "${CMAKE_MATCH_2}")
  set(_flags "${CMAKE_MATCH_3}")
  list(APPEND _kiln_isa_all_levels ${_level})
  if(_arch STREQUAL "any" OR _arch STREQUAL _kiln_isa_arch)
    list(APPEND KILN_ISA_LEVELS ${_level})
    separate_arguments(KILN_ISA_FLAGS_${_level} UNIX_COMMAND "${_flags}")
  endif()
endforeach()
if(NOT "baseline" IN_LIST KILN_ISA_LEVELS)
  message(FATAL_ERROR "could not read the instruction-set levels from ${KILN_ISA_LIST_HEADER} "
                      "(found: '${KILN_ISA_LEVELS}')")
endif()
# KILN_ISA_LEVELS_BUILT (CMakeLists.txt) keeps some of them: the others are neither compiled nor
# dispatched to, and the runtime does not list them (isa_levels()), so it never claims a level it
# lacks: every target then sees KILN_ISA_LEVELS_LIMITED and KILN_ISA_BUILT_<level> = 1 or 0 for
# every level of the list (runtime/include/kiln/cpu_list.h, KILN_ISA_IF_BUILT).
if(KILN_ISA_LEVELS_BUILT)
  foreach(_level IN LISTS KILN_ISA_LEVELS_BUILT)
    if(NOT _level IN_LIST KILN_ISA_LEVELS)
      message(FATAL_ERROR "KILN_ISA_LEVELS_BUILT: '${_level}' is not a level of ${CMAKE_SYSTEM_PROCESSOR} "
                          "(${KILN_ISA_LEVELS})")
    endif()
  endforeach()
  if(NOT "baseline" IN_LIST KILN_ISA_LEVELS_BUILT)
    message(FATAL_ERROR "KILN_ISA_LEVELS_BUILT must hold baseline, every dispatch's fallback")
  endif()
  set(KILN_ISA_LEVELS ${KILN_ISA_LEVELS_BUILT})
  add_compile_definitions(KILN_ISA_LEVELS_LIMITED)
  foreach(_level IN LISTS _kiln_isa_all_levels)
    if(_level IN_LIST KILN_ISA_LEVELS)
      add_compile_definitions(KILN_ISA_BUILT_${_level}=1)
    else()
      add_compile_definitions(KILN_ISA_BUILT_${_level}=0)
    endif()
  endforeach()
endif()
message(STATUS "kiln: instruction-set levels for ${CMAKE_SYSTEM_PROCESSOR}: ${KILN_ISA_LEVELS}")

set(KILN_ISA_UNIT_TEMPLATE "${CMAKE_CURRENT_LIST_DIR}/kiln_isa_unit.cpp.in")
set(KILN_ISA_SYMBOL_CHECK "${CMAKE_CURRENT_LIST_DIR}/KilnCheckIsaSymbols.cmake")

# kiln_kernel_object_library(<name> <source>...)
#
# An object library of the runtime's kernels (appended to KILN_KERNEL_OBJECT_LIBRARIES in the
# caller's parent scope; cmake/KilnRuntimeLibrary.cmake links them into the runtime), with the
# settings every kernel object library shares: includes rooted at kernels/ ("common/kernel_args.h"),
# the runtime's private API, warnings, -O3 (KILN_KERNEL_OPTIMIZE), and no floating-point
# contraction: a * b + c is two roundings unless the code asks for a fused multiply-add
# (VecF32::fma), so the optimized kernels can repeat the portable ones' operations exactly, on
# every architecture (GCC contracts by default where FMA exists: AVX2, AVX-512, aarch64).
function(kiln_kernel_object_library name)
  add_library(${name} OBJECT ${ARGN})
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}/kernels")
  target_link_libraries(${name} PRIVATE kiln_runtime_objects)
  target_compile_options(${name} PRIVATE -Wall -Wextra ${KILN_KERNEL_OPTIMIZE} -ffp-contract=off)
  set(KILN_KERNEL_OBJECT_LIBRARIES ${KILN_KERNEL_OBJECT_LIBRARIES} ${name} PARENT_SCOPE)
endfunction()

# kiln_add_isa_microkernels(<prefix> <dir> [FAMILIES <family>...])
#
# Compiles each microkernel family <dir>/<family>.inc (default: every .inc in <dir>) once per level
# of KILN_ISA_LEVELS: one generated translation unit per family and level (kiln_isa_unit.cpp.in),
# object library <prefix>_<level> per level, with that level's flags. Sets
# <prefix>_OBJECT_LIBRARIES in the caller's scope to those libraries, and makes target
# <prefix>_isa_symbols fail the build when a level's object defines a symbol outside
# kiln::kernels::optimized::<level> (KilnCheckIsaSymbols.cmake): make whatever links the objects
# depend on it. The runtime's optimized kernels and the extensions' families use it alike.
function(kiln_add_isa_microkernels prefix dir)
  cmake_parse_arguments(ARG "" "" "FAMILIES" ${ARGN})
  set(families ${ARG_FAMILIES})
  if(NOT families)
    file(GLOB families CONFIGURE_DEPENDS RELATIVE "${dir}" "${dir}/*.inc")
    list(TRANSFORM families REPLACE "\\.inc$" "")
  endif()
  set(libraries "")
  set(checks "")
  foreach(isa IN LISTS KILN_ISA_LEVELS)
    set(sources "")
    foreach(family IN LISTS families)
      set(family_path "${dir}/${family}.inc")
      set(unit "${CMAKE_CURRENT_BINARY_DIR}/${prefix}/${family}_${isa}.cpp")
      configure_file("${KILN_ISA_UNIT_TEMPLATE}" "${unit}" @ONLY)
      list(APPEND sources "${unit}")
    endforeach()
    if(NOT sources)
      continue()
    endif()
    set(lib ${prefix}_${isa})
    add_library(${lib} OBJECT ${sources})
    target_include_directories(${lib} PRIVATE "${PROJECT_SOURCE_DIR}/kernels")
    target_link_libraries(${lib} PRIVATE kiln_runtime_objects)
    # Microkernels never throw: without exception tables a sanitized build emits no
    # DW.ref.__gxx_personality_v0 (a symbol outside the level's namespace) for them either.
    target_compile_options(${lib} PRIVATE -Wall -Wextra ${KILN_KERNEL_OPTIMIZE} -ffp-contract=off
                                          ${KILN_ISA_FLAGS_${isa}} -fno-exceptions)
    # GCC 12 warns inside its own AVX-512 max/min/reduce intrinsics (GCC bug 105593).
    if(isa MATCHES "^avx512" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${lib} PRIVATE -Wno-maybe-uninitialized -Wno-uninitialized)
    endif()
    add_custom_command(
      OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/${lib}.symbols-checked"
      COMMAND "${CMAKE_COMMAND}" -DNM=${CMAKE_NM} -DISA=${isa}
              "-DOBJECTS=$<JOIN:$<TARGET_OBJECTS:${lib}>,|>"
              -P "${KILN_ISA_SYMBOL_CHECK}"
      COMMAND "${CMAKE_COMMAND}" -E touch "${CMAKE_CURRENT_BINARY_DIR}/${lib}.symbols-checked"
      DEPENDS ${lib} $<TARGET_OBJECTS:${lib}> "${KILN_ISA_SYMBOL_CHECK}"
      COMMENT "Checking that the ${isa} microkernels of ${prefix} define no symbol outside their namespace"
      COMMAND_EXPAND_LISTS VERBATIM)
    list(APPEND libraries ${lib})
    list(APPEND checks "${CMAKE_CURRENT_BINARY_DIR}/${lib}.symbols-checked")
  endforeach()
  add_custom_target(${prefix}_isa_symbols ALL DEPENDS ${checks})
  set(${prefix}_OBJECT_LIBRARIES ${libraries} PARENT_SCOPE)
endfunction()
