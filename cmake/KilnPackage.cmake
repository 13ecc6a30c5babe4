# Installs the C++ SDK into the wheel's kiln/ directory: the runtime library,
# the public headers, the CMake package and the pkg-config files (kiln.pc, and
# kiln-<name>.pc per extension library).
include(CMakePackageConfigHelpers)

# A static build (KILN_BUILD_SHARED=OFF) embeds the runtime in the Python
# extension and ships no C++ SDK: there would be no library to link.
if(KILN_BUILD_SHARED)
  install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/runtime/include/kiln"
          DESTINATION include FILES_MATCHING PATTERN "*.h")

  # One real file, no namelink: wheels cannot hold symlinks.
  install(TARGETS kiln LIBRARY DESTINATION lib NAMELINK_SKIP)

  get_property(_kiln_extensions GLOBAL PROPERTY KILN_EXTENSION_NAMES)
  list(JOIN _kiln_extensions " " KILN_EXTENSION_NAMES)
  get_property(KILN_EXTENSION_REQUIRES GLOBAL PROPERTY KILN_EXTENSION_REQUIRES)
  configure_file("${CMAKE_CURRENT_SOURCE_DIR}/cmake/kilnConfig.cmake.in"
                 "${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake" @ONLY)
  write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake"
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake"
                "${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake"
                "${CMAKE_CURRENT_SOURCE_DIR}/cmake/kiln-runpath.rsp"
                "${CMAKE_CURRENT_SOURCE_DIR}/cmake/kilnPlugin.cmake"
          DESTINATION lib/cmake/kiln)

  configure_file("${CMAKE_CURRENT_SOURCE_DIR}/cmake/kiln.pc.in"
                 "${CMAKE_CURRENT_BINARY_DIR}/kiln.pc" @ONLY)
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/kiln.pc" DESTINATION lib/pkgconfig)
  # kiln-<name>.pc for each extension library (kiln::<name> of the CMake package).
  get_property(_kiln_requires GLOBAL PROPERTY KILN_EXTENSION_REQUIRES)
  foreach(KILN_EXTENSION IN LISTS _kiln_extensions)
    set(KILN_EXTENSION_PC_REQUIRES "kiln")
    foreach(_kiln_pair IN LISTS _kiln_requires)
      if(_kiln_pair MATCHES "^${KILN_EXTENSION}:(.*)$")
        string(APPEND KILN_EXTENSION_PC_REQUIRES " kiln-${CMAKE_MATCH_1}")
      endif()
    endforeach()
    configure_file("${CMAKE_CURRENT_SOURCE_DIR}/cmake/kiln-extension.pc.in"
                   "${CMAKE_CURRENT_BINARY_DIR}/kiln-${KILN_EXTENSION}.pc" @ONLY)
    install(FILES "${CMAKE_CURRENT_BINARY_DIR}/kiln-${KILN_EXTENSION}.pc" DESTINATION lib/pkgconfig)
  endforeach()
endif()
