# Fails the build when an object compiled for one instruction-set level defines
# an external symbol outside that level's namespace. Such a symbol (an inline
# function or template instantiated with, say, AVX-512 flags) could be merged
# by the linker with the baseline copy of the same name, and then run on a CPU
# without AVX-512. Every external symbol of a level's objects must name the
# namespace kiln::kernels::optimized::<isa>.
#   cmake -DNM=nm -DISA=avx512 -DOBJECTS="a.o|b.o" -P KilnCheckIsaSymbols.cmake
string(REPLACE "|" ";" _objects "${OBJECTS}")
# Sanitizers add symbols that nm cannot demangle (ASan's "__odr_asan.<mangled
# name>" indicator for each global): those pass when the mangled name is in
# the namespace.
string(LENGTH "${ISA}" _isa_length)
set(_mangled "9optimized${_isa_length}${ISA}")
set(_bad "")
foreach(_obj IN LISTS _objects)
  execute_process(COMMAND "${NM}" -g -C --defined-only "${_obj}"
                  OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${_obj}")
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  foreach(_line IN LISTS _lines)
    if(_line STREQUAL "" OR _line MATCHES ":$")
      continue()
    endif()
    string(FIND "${_line}" "kiln::kernels::optimized::${ISA}::" _at)
    string(FIND "${_line}" "${_mangled}" _at_mangled)
    if(_at EQUAL -1 AND _at_mangled EQUAL -1)
      list(APPEND _bad "${_obj}: ${_line}")
    endif()
  endforeach()
endforeach()
if(_bad)
  list(JOIN _bad "\n  " _text)
  message(FATAL_ERROR "symbols of the ${ISA} microkernels outside kiln::kernels::optimized::${ISA} "
                      "(the linker could merge them with another level's copy):\n  ${_text}")
endif()
